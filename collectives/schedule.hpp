// Which block each rank sends and receives at each step of the ring and of recursive doubling
// (pure). Ranks 0..n-1; the ring sends to rank+1 and receives from rank-1.
#pragma once

#include <cstddef>

namespace primus::coll::schedule {

struct Range {
  std::size_t begin;  // in elements
  std::size_t count;
};

// Block i of n over count elements: [count*i/n, count*(i+1)/n) (sizes differ by at most 1).
Range block(std::size_t count, int blocks, int i);

// Reduce-scatter ring, step s in [0, n-1): rank r sends block send_block(r, s) to rank r+1 and
// receives block recv_block(r, s) from rank r-1, reducing it into its own; after n-1 steps rank
// r holds the full reduction of block r (and only that rank computes it).
int reduce_scatter_send_block(int rank, int size, int step);
int reduce_scatter_recv_block(int rank, int size, int step);
// Allgather ring, step s in [0, n-1): rank r, which starts with block r, sends
// allgather_send_block(r, s) and receives allgather_recv_block(r, s).
int allgather_send_block(int rank, int size, int step);
int allgather_recv_block(int rank, int size, int step);

// Recursive doubling over a size that need not be a power of two: the largest power of two p
// <= size takes part; each of the first 2*(size-p) ranks pairs up, the even one handing its
// data to the odd one first and getting the result back at the end.
struct Doubling {
  int power;         // p
  int extra;         // size - p
  int role;          // kFolded: hands off and waits; kActive: takes part
  int virtual_rank;  // in [0, p) for an active rank
};
constexpr int kFolded = 0;
constexpr int kActive = 1;
Doubling doubling(int rank, int size);
// The real rank of virtual rank v.
int doubling_real_rank(int virtual_rank, int size);

}  // namespace primus::coll::schedule
