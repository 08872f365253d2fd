// The cursor: stopped at any global batch and resumed on the same, fewer or more ranks, the run
// reads every record exactly once per epoch and in the uninterrupted order; a cursor from
// another dataset, batch size, shuffle, seed or drop_last is refused naming the difference.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "primus/common/error.hpp"
#include "primus/data/cursor.hpp"

namespace primus::data {
namespace {

PlanSettings settings(std::uint64_t records, std::uint64_t batch, Shuffle shuffle, bool drop_last) {
  return {"0123456789abcdef", records, batch, shuffle, 8, 99, drop_last};
}

// What the ranks of `world` read in global batches [from, to) of an epoch, in step and rank order.
std::vector<std::uint64_t> run(const PlanSettings& s, std::uint64_t epoch, std::uint32_t world,
                               std::uint64_t from, std::uint64_t to) {
  const EpochPlan plan(s, epoch, world);
  std::vector<std::uint64_t> out;
  std::vector<std::uint64_t> share;
  for (std::uint64_t step = from; step < to; ++step) {
    for (std::uint32_t rank = 0; rank < world; ++rank) {
      plan.share(step, rank, share);
      out.insert(out.end(), share.begin(), share.end());
    }
  }
  return out;
}

TEST(DataCursor, ResumingOnAnyWorldSizeContinuesTheSameOrder) {
  for (const Shuffle shuffle : {Shuffle::kNone, Shuffle::kRecords, Shuffle::kBlocks}) {
    for (const bool drop_last : {false, true}) {
      const PlanSettings s = settings(203, 12, shuffle, drop_last);
      const EpochPlan whole(s, 3, 1);
      const auto uninterrupted = run(s, 3, 4, 0, whole.steps());
      for (std::uint64_t stop = 0; stop <= whole.steps(); ++stop) {
        // The cursor saved after global batch stop - 1 was yielded.
        const Cursor saved{3, stop == 0 ? 0 : whole.consumed_after(stop - 1)};
        for (const std::uint32_t before : {1U, 3U, 4U}) {
          for (const std::uint32_t after : {1U, 2U, 4U, 5U, 8U}) {
            const EpochPlan resumed(s, saved.epoch, after);
            const std::uint64_t next = resumed.step_at(saved.consumed);
            ASSERT_EQ(next, stop);
            auto combined = run(s, 3, before, 0, stop);
            const auto rest = run(s, 3, after, next, resumed.steps());
            combined.insert(combined.end(), rest.begin(), rest.end());
            ASSERT_EQ(combined, uninterrupted)
                << to_string(shuffle) << (drop_last ? " drop_last" : "") << ", stop " << stop
                << ", " << before << " -> " << after << " ranks";
          }
        }
      }
      std::vector<int> seen(203, 0);
      for (const std::uint64_t id : uninterrupted)
        ++seen[id];
      for (std::uint64_t id = 0; id < 203; ++id)
        ASSERT_LE(seen[id], 1) << id;
      EXPECT_EQ(uninterrupted.size(), drop_last ? 192U : 203U);
    }
  }
}

TEST(DataCursor, AnEpochsEndIsTheNextEpochsStart) {
  const PlanSettings s = settings(100, 10, Shuffle::kRecords, false);
  EXPECT_EQ(normalize({4, 100}, s), (Cursor{5, 0}));
  EXPECT_EQ(normalize({4, 90}, s), (Cursor{4, 90}));
  const PlanSettings dropped = settings(105, 10, Shuffle::kRecords, true);
  EXPECT_EQ(normalize({0, 100}, dropped), (Cursor{1, 0}));
  EXPECT_EQ(EpochPlan(dropped, 0, 3).step_at(100), 10U);
}

TEST(DataCursor, APositionInsideAGlobalBatchIsRefused) {
  const EpochPlan plan(settings(100, 10, Shuffle::kNone, false), 0, 2);
  EXPECT_THROW(plan.step_at(15), Error);
  EXPECT_THROW(plan.step_at(110), Error);
  const EpochPlan uneven(settings(105, 10, Shuffle::kNone, false), 0, 2);
  EXPECT_EQ(uneven.step_at(105), 11U);
  EXPECT_EQ(uneven.consumed_after(10), 105U);
}

TEST(DataCursor, ACursorOfAnotherRunIsRefusedNamingTheDifference) {
  const PlanSettings now = settings(100, 10, Shuffle::kRecords, false);
  EXPECT_FALSE(cursor_mismatch(now, now));
  const auto mismatch = [&](auto change) {
    PlanSettings saved = now;
    change(saved);
    return cursor_mismatch(saved, now).value_or("(accepted)");
  };
  EXPECT_EQ(mismatch([](PlanSettings& p) { p.global_batch_size = 64; }),
            "the global batch size (--primus-global-batch-size): the cursor was saved with 64, "
            "this run has 10");
  EXPECT_NE(mismatch([](PlanSettings& p) {
              p.fingerprint = "ffffffffffffffff";
            }).find("the dataset (--primus-data)"),
            std::string::npos);
  EXPECT_NE(mismatch([](PlanSettings& p) { p.records = 99; }).find("99 records"),
            std::string::npos);
  EXPECT_NE(
      mismatch([](PlanSettings& p) { p.shuffle = Shuffle::kBlocks; }).find("--primus-shuffle"),
      std::string::npos);
  EXPECT_NE(mismatch([](PlanSettings& p) { p.seed = 1; }).find("--primus-seed"), std::string::npos);
  EXPECT_NE(mismatch([](PlanSettings& p) { p.drop_last = true; }).find("--primus-drop-last"),
            std::string::npos);
  // The block matters only with shuffle=blocks, the seed only with a shuffle.
  EXPECT_EQ(mismatch([](PlanSettings& p) { p.shuffle_block = 3; }), "(accepted)");
  const PlanSettings none = settings(100, 10, Shuffle::kNone, false);
  PlanSettings other_seed = none;
  other_seed.seed = 5;
  EXPECT_FALSE(cursor_mismatch(other_seed, none));
}

TEST(DataCursor, EpochsHaveDifferentOrders) {
  const PlanSettings s = settings(1000, 100, Shuffle::kRecords, false);
  EXPECT_NE(run(s, 0, 2, 0, 10), run(s, 1, 2, 0, 10));
  EXPECT_EQ(run(s, 1, 2, 0, 10), run(s, 1, 7, 0, 10));
}

}  // namespace
}  // namespace primus::data
