// The static split of an epoch among the ranks (docs/architecture.md, "Data distribution"):
// global batches of `global_batch_size` positions of the global order; global batch k is the same
// positions whatever the world size, and rank r takes its contiguous share of it, as even as
// possible (a share may be empty). drop_last drops a last, short global batch; otherwise it is
// split like the others. Every rank takes the same number of steps. Pure.
#pragma once

#include <cstdint>

namespace primus::data {

struct SplitSpec {
  std::uint64_t records = 0;
  std::uint64_t global_batch_size = 0;  // at least 1
  bool drop_last = false;
  std::uint32_t world_size = 1;  // at least 1
};

struct PositionRange {
  std::uint64_t begin = 0;  // positions in the epoch's global order
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool operator==(const PositionRange& other) const {
    return begin == other.begin && end == other.end;
  }
};

class StaticSplit {
 public:
  // Throws Error naming the setting for a global batch size or world size of 0.
  explicit StaticSplit(const SplitSpec& spec);
  // Global batches (steps) in an epoch.
  std::uint64_t steps() const { return steps_; }
  // Positions an epoch uses: all of them, or without drop_last's tail.
  std::uint64_t used_records() const { return used_; }
  // Global batch `step` (< steps()).
  PositionRange global_batch(std::uint64_t step) const;
  // Rank `rank`'s share of global batch `step`.
  PositionRange share(std::uint64_t step, std::uint32_t rank) const;

 private:
  SplitSpec spec_;
  std::uint64_t steps_ = 0;
  std::uint64_t used_ = 0;
};

}  // namespace primus::data
