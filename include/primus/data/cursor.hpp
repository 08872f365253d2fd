// Where a job is in its data, and the plan of an epoch (docs/architecture.md, "Data
// distribution"). The cursor is (epoch, global records consumed) plus what it depends on; a
// batch counts as consumed once yielded. A cursor loaded into a run whose dataset, global batch
// size, shuffle, seed or drop_last differ is refused, naming the difference; a different number
// of ranks is fine (global batch k is the same records at every world size). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "primus/data/order.hpp"
#include "primus/data/split.hpp"

namespace primus::data {

// What the order and the split of every epoch depend on.
struct PlanSettings {
  std::string fingerprint;  // the dataset's (Dataset::fingerprint())
  std::uint64_t records = 0;
  std::uint64_t global_batch_size = 0;
  Shuffle shuffle = Shuffle::kRecords;
  std::uint64_t shuffle_block = 1024;
  std::uint64_t seed = 0;
  bool drop_last = false;
};

// nullopt when a cursor saved under `saved` continues exactly under `now`; else the first
// difference, for example "the global batch size (--primus-global-batch-size): the cursor was
// saved with 64, this run has 32". The seed counts only with a shuffle, the block only with
// shuffle=blocks.
std::optional<std::string> cursor_mismatch(const PlanSettings& saved, const PlanSettings& now);

struct Cursor {
  std::uint64_t epoch = 0;
  std::uint64_t consumed = 0;  // positions of the epoch's global order yielded so far
  bool operator==(const Cursor& other) const {
    return epoch == other.epoch && consumed == other.consumed;
  }
};

// One epoch's global order and static split, for a world of `world_size` ranks.
class EpochPlan {
 public:
  EpochPlan(const PlanSettings& settings, std::uint64_t epoch, std::uint32_t world_size);
  std::uint64_t epoch() const { return epoch_; }
  std::uint64_t steps() const { return split_.steps(); }
  std::uint64_t used_records() const { return split_.used_records(); }
  // The step a cursor of this epoch continues at (steps() when the epoch is done). Throws Error
  // when `consumed` is not at a global batch boundary or past the epoch.
  std::uint64_t step_at(std::uint64_t consumed) const;
  // Global records consumed once global batch `step` is yielded.
  std::uint64_t consumed_after(std::uint64_t step) const;
  // Rank `rank`'s records of global batch `step`, in order (appended to `ids`, which is
  // cleared first).
  void share(std::uint64_t step, std::uint32_t rank, std::vector<std::uint64_t>& ids) const;
  // All of global batch `step`, in order.
  void global_batch(std::uint64_t step, std::vector<std::uint64_t>& ids) const;

 private:
  void positions(const PositionRange& range, std::vector<std::uint64_t>& ids) const;

  std::uint64_t epoch_;
  GlobalOrder order_;
  StaticSplit split_;
  std::uint64_t global_batch_size_;
};

// A cursor at an epoch's end is the next epoch's start: (e, used) becomes (e + 1, 0).
Cursor normalize(const Cursor& cursor, const PlanSettings& settings);

}  // namespace primus::data
