#include "primus/data/cursor.hpp"

#include "primus/common/error.hpp"

namespace primus::data {
namespace {

OrderSpec order_spec(const PlanSettings& settings) {
  return {settings.records, settings.shuffle, settings.shuffle_block, settings.seed};
}

SplitSpec split_spec(const PlanSettings& settings, std::uint32_t world_size) {
  return {settings.records, settings.global_batch_size, settings.drop_last, world_size};
}

std::string differs(const std::string& what, const std::string& saved, const std::string& now) {
  return what + ": the cursor was saved with " + saved + ", this run has " + now;
}

}  // namespace

std::optional<std::string> cursor_mismatch(const PlanSettings& saved, const PlanSettings& now) {
  if (saved.fingerprint != now.fingerprint || saved.records != now.records) {
    return differs(
        "the dataset (--primus-data)",
        "fingerprint " + saved.fingerprint + " (" + std::to_string(saved.records) + " records)",
        "fingerprint " + now.fingerprint + " (" + std::to_string(now.records) + " records)");
  }
  if (saved.global_batch_size != now.global_batch_size) {
    return differs("the global batch size (--primus-global-batch-size)",
                   std::to_string(saved.global_batch_size), std::to_string(now.global_batch_size));
  }
  if (saved.shuffle != now.shuffle) {
    return differs("the shuffle (--primus-shuffle)", std::string(to_string(saved.shuffle)),
                   std::string(to_string(now.shuffle)));
  }
  if (now.shuffle == Shuffle::kBlocks && saved.shuffle_block != now.shuffle_block) {
    return differs("the shuffle block (--primus-shuffle-block)",
                   std::to_string(saved.shuffle_block), std::to_string(now.shuffle_block));
  }
  if (now.shuffle != Shuffle::kNone && saved.seed != now.seed) {
    return differs("the seed (--primus-seed)", std::to_string(saved.seed),
                   std::to_string(now.seed));
  }
  if (saved.drop_last != now.drop_last) {
    return differs("drop_last (--primus-drop-last)", saved.drop_last ? "on" : "off",
                   now.drop_last ? "on" : "off");
  }
  return std::nullopt;
}

EpochPlan::EpochPlan(const PlanSettings& settings, std::uint64_t epoch, std::uint32_t world_size)
    : epoch_(epoch),
      order_(order_spec(settings), epoch),
      split_(split_spec(settings, world_size)),
      global_batch_size_(settings.global_batch_size) {}

std::uint64_t EpochPlan::step_at(std::uint64_t consumed) const {
  if (consumed == split_.used_records()) return split_.steps();
  if (consumed > split_.used_records() || consumed % global_batch_size_ != 0) {
    throw Error("the data cursor's position " + std::to_string(consumed) + " in epoch " +
                std::to_string(epoch_) + " is not the end of a global batch of " +
                std::to_string(global_batch_size_) + " (the epoch uses " +
                std::to_string(split_.used_records()) + " records)");
  }
  return consumed / global_batch_size_;
}

std::uint64_t EpochPlan::consumed_after(std::uint64_t step) const {
  return split_.global_batch(step).end;
}

void EpochPlan::positions(const PositionRange& range, std::vector<std::uint64_t>& ids) const {
  ids.clear();
  ids.reserve(range.size());
  order_.append_records(range.begin, range.end, ids);
}

void EpochPlan::share(std::uint64_t step, std::uint32_t rank,
                      std::vector<std::uint64_t>& ids) const {
  positions(split_.share(step, rank), ids);
}

void EpochPlan::global_batch(std::uint64_t step, std::vector<std::uint64_t>& ids) const {
  positions(split_.global_batch(step), ids);
}

Cursor normalize(const Cursor& cursor, const PlanSettings& settings) {
  const StaticSplit split(split_spec(settings, 1));
  if (cursor.consumed == split.used_records()) return {cursor.epoch + 1, 0};
  return cursor;
}

}  // namespace primus::data
