// The global order of a dataset's records in one epoch (docs/architecture.md, "Data
// distribution"): none (as stored), records (a bijective permutation of [0, n) computed on the
// fly, never materialised) or blocks (runs of `block` consecutive records, the runs permuted).
// It depends on (seed, epoch) and the record count only, so every rank computes the same order
// with no communication, and memory does not grow with the record count. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "primus/common/keyed_hash.hpp"

namespace primus::data {

enum class Shuffle { kNone, kRecords, kBlocks };

// "none", "records", "blocks" (--primus-shuffle); nullopt for anything else.
std::optional<Shuffle> parse_shuffle(std::string_view text);
std::string_view to_string(Shuffle shuffle);

// The key of epoch `epoch`'s order under `seed`.
SipKey order_key(std::uint64_t seed, std::uint64_t epoch);

// A keyed bijection of [0, n): a Feistel network on the smallest even number of bits that holds
// n - 1 (six rounds, SipHash-2-4 as the round function), with cycle walking for the values it
// maps past n. At most a few SipHash calls per value; O(1) memory.
class Permutation {
 public:
  Permutation(std::uint64_t n, const SipKey& key);
  std::uint64_t size() const { return n_; }
  // The image of i; i < size().
  std::uint64_t operator()(std::uint64_t i) const;
  // The i whose image is y; y < size().
  std::uint64_t inverse(std::uint64_t y) const;

 private:
  std::uint64_t round_value(unsigned round, std::uint64_t half) const;
  std::uint64_t encrypt(std::uint64_t x) const;
  std::uint64_t decrypt(std::uint64_t y) const;

  std::uint64_t n_;
  unsigned half_bits_ = 1;
  std::uint64_t half_mask_ = 1;
  SipKey key_;
};

struct OrderSpec {
  std::uint64_t records = 0;
  Shuffle shuffle = Shuffle::kRecords;
  std::uint64_t block = 1024;  // records per run, for kBlocks (at least 1)
  std::uint64_t seed = 0;
};

// The order of one epoch: record_at(p) is the record (its index in the dataset, files in their
// order) at position p of the epoch. Throws Error for a block of 0.
class GlobalOrder {
 public:
  GlobalOrder(const OrderSpec& spec, std::uint64_t epoch);
  std::uint64_t size() const { return spec_.records; }
  std::uint64_t record_at(std::uint64_t position) const;
  // record_at(p) for p in [begin, end), appended to `out`: one permutation call per block
  // crossed with shuffle=blocks, not one per record.
  void append_records(std::uint64_t begin, std::uint64_t end,
                      std::vector<std::uint64_t>& out) const;

 private:
  OrderSpec spec_;
  Permutation permutation_;  // of the records, or of the blocks
  std::uint64_t blocks_ = 0;
  std::uint64_t last_block_records_ = 0;  // the last block's length (it may be short)
  std::uint64_t last_block_slot_ = 0;     // where the permutation puts the last block
};

}  // namespace primus::data
