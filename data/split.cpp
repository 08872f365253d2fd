#include "primus/data/split.hpp"

#include "primus/common/error.hpp"

namespace primus::data {

StaticSplit::StaticSplit(const SplitSpec& spec) : spec_(spec) {
  if (spec.global_batch_size == 0) {
    throw Error("--primus-global-batch-size: expected at least 1 record, got 0");
  }
  if (spec.world_size == 0) throw Error("the world size must be at least 1");
  const std::uint64_t full = spec.records / spec.global_batch_size;
  const bool tail = spec.records % spec.global_batch_size != 0;
  steps_ = full + (tail && !spec.drop_last ? 1 : 0);
  used_ = spec.drop_last ? full * spec.global_batch_size : spec.records;
}

PositionRange StaticSplit::global_batch(std::uint64_t step) const {
  if (step >= steps_) {
    throw Error("global batch " + std::to_string(step) + " is past the epoch's " +
                std::to_string(steps_));
  }
  const std::uint64_t begin = step * spec_.global_batch_size;
  const std::uint64_t end = begin + spec_.global_batch_size;
  return {begin, end < used_ ? end : used_};
}

PositionRange StaticSplit::share(std::uint64_t step, std::uint32_t rank) const {
  if (rank >= spec_.world_size) {
    throw Error("rank " + std::to_string(rank) + " is not in a world of " +
                std::to_string(spec_.world_size));
  }
  const PositionRange batch = global_batch(step);
  const std::uint64_t size = batch.size();
  const std::uint64_t world = spec_.world_size;
  // Rank r: [size * r / world, size * (r + 1) / world), without overflow for any size.
  const auto cut = [&](std::uint64_t r) { return (size / world) * r + (size % world) * r / world; };
  return {batch.begin + cut(rank), batch.begin + cut(rank + 1)};
}

}  // namespace primus::data
