#include "primus/data/order.hpp"

#include <algorithm>

#include "primus/common/error.hpp"

namespace primus::data {
namespace {

constexpr unsigned kRounds = 6;

void put_u64(std::uint8_t* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

unsigned bit_width(std::uint64_t value) {
  unsigned bits = 0;
  for (; value != 0; value >>= 1)
    ++bits;
  return bits;
}

}  // namespace

std::optional<Shuffle> parse_shuffle(std::string_view text) {
  if (text == "none") return Shuffle::kNone;
  if (text == "records") return Shuffle::kRecords;
  if (text == "blocks") return Shuffle::kBlocks;
  return std::nullopt;
}

std::string_view to_string(Shuffle shuffle) {
  switch (shuffle) {
    case Shuffle::kNone:
      return "none";
    case Shuffle::kRecords:
      return "records";
    case Shuffle::kBlocks:
      return "blocks";
  }
  return "?";
}

SipKey order_key(std::uint64_t seed, std::uint64_t epoch) {
  // Two SipHash outputs of (purpose, seed, epoch) under a fixed key: the order is public, not a
  // secret; the key only has to differ from epoch to epoch and seed to seed.
  constexpr SipKey kFixed = {'p', 'r', 'i', 'm', 'u', 's', ' ', 'o',
                             'r', 'd', 'e', 'r', ' ', 'k', 'e', 'y'};
  SipKey key{};
  for (std::uint64_t half = 0; half < 2; ++half) {
    std::uint8_t message[24];
    put_u64(message, half);
    put_u64(message + 8, seed);
    put_u64(message + 16, epoch);
    put_u64(key.data() + 8 * half, siphash24(kFixed, message, sizeof message));
  }
  return key;
}

Permutation::Permutation(std::uint64_t n, const SipKey& key) : n_(n), key_(key) {
  unsigned bits = n > 1 ? bit_width(n - 1) : 1;
  if (bits < 2) bits = 2;
  if (bits % 2 != 0) ++bits;
  half_bits_ = bits / 2;
  half_mask_ = half_bits_ >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << half_bits_) - 1;
}

std::uint64_t Permutation::round_value(unsigned round, std::uint64_t half) const {
  std::uint8_t message[16];
  put_u64(message, round);
  put_u64(message + 8, half);
  return siphash24(key_, message, sizeof message) & half_mask_;
}

std::uint64_t Permutation::encrypt(std::uint64_t x) const {
  std::uint64_t left = x >> half_bits_;
  std::uint64_t right = x & half_mask_;
  for (unsigned round = 0; round < kRounds; ++round) {
    const std::uint64_t next = left ^ round_value(round, right);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

std::uint64_t Permutation::decrypt(std::uint64_t y) const {
  std::uint64_t left = y >> half_bits_;
  std::uint64_t right = y & half_mask_;
  for (unsigned round = kRounds; round-- > 0;) {
    const std::uint64_t previous = right ^ round_value(round, left);
    right = left;
    left = previous;
  }
  return (left << half_bits_) | right;
}

std::uint64_t Permutation::operator()(std::uint64_t i) const {
  if (n_ <= 1) return i;
  // Cycle walking: the network permutes [0, 4^half_bits), under 4 n; the walk from i leaves
  // that range's tail in a few steps on average and lands in [0, n) on a unique value.
  std::uint64_t y = encrypt(i);
  while (y >= n_)
    y = encrypt(y);
  return y;
}

std::uint64_t Permutation::inverse(std::uint64_t y) const {
  if (n_ <= 1) return y;
  std::uint64_t x = decrypt(y);
  while (x >= n_)
    x = decrypt(x);
  return x;
}

GlobalOrder::GlobalOrder(const OrderSpec& spec, std::uint64_t epoch)
    : spec_(spec),
      permutation_(spec.shuffle == Shuffle::kBlocks && spec.block > 0
                       ? (spec.records + spec.block - 1) / spec.block
                       : spec.records,
                   order_key(spec.seed, epoch)) {
  if (spec.shuffle != Shuffle::kBlocks) return;
  if (spec.block == 0) throw Error("--primus-shuffle-block: expected at least 1 record, got 0");
  blocks_ = permutation_.size();
  if (blocks_ == 0) return;
  last_block_records_ = spec.records - (blocks_ - 1) * spec.block;
  last_block_slot_ = permutation_.inverse(blocks_ - 1);
}

std::uint64_t GlobalOrder::record_at(std::uint64_t position) const {
  switch (spec_.shuffle) {
    case Shuffle::kNone:
      return position;
    case Shuffle::kRecords:
      return permutation_(position);
    case Shuffle::kBlocks:
      break;
  }
  // The blocks in permuted order, each `block` records long but the dataset's last one, which
  // sits at slot last_block_slot_.
  const std::uint64_t block = spec_.block;
  const std::uint64_t short_start = last_block_slot_ * block;
  std::uint64_t slot = 0;
  std::uint64_t offset = 0;
  if (position < short_start) {
    slot = position / block;
    offset = position % block;
  } else if (position < short_start + last_block_records_) {
    slot = last_block_slot_;
    offset = position - short_start;
  } else {
    const std::uint64_t after = position - short_start - last_block_records_;
    slot = last_block_slot_ + 1 + after / block;
    offset = after % block;
  }
  return permutation_(slot) * block + offset;
}

void GlobalOrder::append_records(std::uint64_t begin, std::uint64_t end,
                                 std::vector<std::uint64_t>& out) const {
  if (spec_.shuffle != Shuffle::kBlocks) {
    for (std::uint64_t p = begin; p < end; ++p)
      out.push_back(record_at(p));
    return;
  }
  // Within a block the records follow each other: map the first position of each block
  // crossed, then count on.
  std::uint64_t p = begin;
  while (p < end) {
    const std::uint64_t first = record_at(p);
    // Positions left in this block: up to the block's end in the dataset.
    const std::uint64_t block_end =
        std::min<std::uint64_t>((first / spec_.block + 1) * spec_.block, spec_.records);
    const std::uint64_t run = std::min(end - p, block_end - first);
    for (std::uint64_t i = 0; i < run; ++i)
      out.push_back(first + i);
    p += run;
  }
}

}  // namespace primus::data
