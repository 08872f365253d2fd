#include "schedule.hpp"

namespace primus::coll::schedule {
namespace {

int wrap(int value, int size) {
  return ((value % size) + size) % size;
}

}  // namespace

Range block(std::size_t count, int blocks, int i) {
  const auto n = static_cast<std::size_t>(blocks);
  const auto at = static_cast<std::size_t>(i);
  // count * i / n without overflow for any count below 2^64 / n... split the product.
  const auto start = [&](std::size_t k) { return count / n * k + count % n * k / n; };
  return {start(at), start(at + 1) - start(at)};
}

int reduce_scatter_send_block(int rank, int size, int step) {
  return wrap(rank - step - 1, size);
}
int reduce_scatter_recv_block(int rank, int size, int step) {
  return wrap(rank - step - 2, size);
}
int allgather_send_block(int rank, int size, int step) {
  return wrap(rank - step, size);
}
int allgather_recv_block(int rank, int size, int step) {
  return wrap(rank - step - 1, size);
}

Doubling doubling(int rank, int size) {
  int power = 1;
  while (power * 2 <= size)
    power *= 2;
  const int extra = size - power;
  if (rank < 2 * extra) {
    if (rank % 2 == 0) return {power, extra, kFolded, -1};
    return {power, extra, kActive, rank / 2};
  }
  return {power, extra, kActive, rank - extra};
}

int doubling_real_rank(int virtual_rank, int size) {
  const Doubling d = doubling(0, size);
  return virtual_rank < d.extra ? 2 * virtual_rank + 1 : virtual_rank + d.extra;
}

}  // namespace primus::coll::schedule
