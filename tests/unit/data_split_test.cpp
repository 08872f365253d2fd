// The static split, over the global order: every record exactly once per epoch at every world
// size, shuffle mode and drop_last (drop_last: the tail of the order dropped, the same for all),
// every rank the same number of steps with shares at most one record apart, and global batch k
// the same records in the same order at every world size.
#include <gtest/gtest.h>

#include <vector>

#include "primus/common/error.hpp"
#include "primus/data/order.hpp"
#include "primus/data/split.hpp"

namespace primus::data {
namespace {

// The records of global batch `step` as the ranks of `world` read them, in rank order.
std::vector<std::uint64_t> batch_records(const GlobalOrder& order, const StaticSplit& split,
                                         std::uint64_t step, std::uint32_t world) {
  std::vector<std::uint64_t> out;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    const PositionRange share = split.share(step, rank);
    for (std::uint64_t p = share.begin; p < share.end; ++p)
      out.push_back(order.record_at(p));
  }
  return out;
}

void check_exactly_once(std::uint64_t records, std::uint64_t batch, bool drop_last, Shuffle shuffle,
                        const std::vector<std::uint32_t>& worlds) {
  const GlobalOrder order({records, shuffle, 16, 1234}, 2);
  std::vector<std::vector<std::uint64_t>> batches_at_world_1;
  for (const std::uint32_t world : worlds) {
    const StaticSplit split({records, batch, drop_last, world});
    const std::string what = std::to_string(records) + " records, batch " + std::to_string(batch) +
                             ", world " + std::to_string(world) +
                             (drop_last ? ", drop_last, " : ", ") + std::string(to_string(shuffle));
    std::vector<int> seen(records, 0);
    for (std::uint64_t step = 0; step < split.steps(); ++step) {
      std::uint64_t smallest = ~std::uint64_t{0};
      std::uint64_t largest = 0;
      for (std::uint32_t rank = 0; rank < world; ++rank) {
        const PositionRange share = split.share(step, rank);
        smallest = std::min(smallest, share.size());
        largest = std::max(largest, share.size());
        for (std::uint64_t p = share.begin; p < share.end; ++p)
          ++seen[order.record_at(p)];
      }
      ASSERT_LE(largest - smallest, 1U) << what << ", step " << step;
      const std::vector<std::uint64_t> got = batch_records(order, split, step, world);
      if (world == worlds.front()) {
        batches_at_world_1.push_back(got);
      } else {
        ASSERT_EQ(got, batches_at_world_1[step]) << what << ": global batch " << step;
      }
    }
    if (world != worlds.front()) {
      ASSERT_EQ(split.steps(), batches_at_world_1.size()) << what;
    }
    // Every record once; with drop_last the records at the tail of the order not at all.
    for (std::uint64_t p = 0; p < records; ++p) {
      const std::uint64_t r = order.record_at(p);
      ASSERT_EQ(seen[r], p < split.used_records() ? 1 : 0) << what << ", record " << r;
    }
    if (drop_last) {
      ASSERT_EQ(split.used_records(), records / batch * batch) << what;
    } else {
      ASSERT_EQ(split.used_records(), records) << what;
    }
  }
}

TEST(DataSplit, EveryRecordExactlyOnceAtOneToEightRanksInEveryModeOfShuffleAndDropLast) {
  const std::vector<std::uint32_t> worlds = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const Shuffle shuffle : {Shuffle::kNone, Shuffle::kRecords, Shuffle::kBlocks}) {
    for (const bool drop_last : {false, true}) {
      for (const std::uint64_t records : {0ULL, 1ULL, 7ULL, 1001ULL, 10007ULL}) {
        for (const std::uint64_t batch : {1ULL, 5ULL, 64ULL, 100ULL}) {
          check_exactly_once(records, batch, drop_last, shuffle, worlds);
        }
      }
    }
  }
}

TEST(DataSplit, EveryRecordExactlyOnceIn200000Records) {
  for (const Shuffle shuffle : {Shuffle::kRecords, Shuffle::kBlocks}) {
    for (const bool drop_last : {false, true}) {
      check_exactly_once(200000, 96, drop_last, shuffle, {1, 3, 8});
    }
  }
}

TEST(DataSplit, ALastShortBatchIsSplitAsEvenlyAsPossibleOrDropped) {
  const StaticSplit keep({10, 4, false, 3});
  EXPECT_EQ(keep.steps(), 3U);
  EXPECT_EQ(keep.global_batch(2), (PositionRange{8, 10}));
  // Two records for three ranks: one rank's share is empty, and it still takes the step.
  EXPECT_EQ(keep.share(2, 0).size() + keep.share(2, 1).size() + keep.share(2, 2).size(), 2U);
  EXPECT_EQ(keep.share(2, 0).size(), 0U);
  const StaticSplit drop({10, 4, true, 3});
  EXPECT_EQ(drop.steps(), 2U);
  EXPECT_EQ(drop.used_records(), 8U);
  EXPECT_EQ(drop.share(0, 0), (PositionRange{0, 1}));
  EXPECT_EQ(drop.share(0, 1), (PositionRange{1, 2}));
  EXPECT_EQ(drop.share(0, 2), (PositionRange{2, 4}));
}

TEST(DataSplit, HugeDatasetsAndWorldsNeitherOverflowNorLoseRecords) {
  // 10^12 records, 2^20 per global batch, 4096 ranks: the shares tile each batch.
  const StaticSplit split({1000000000000ULL, 1ULL << 20, false, 4096});
  const std::uint64_t last = split.steps() - 1;
  for (const std::uint64_t step : {std::uint64_t{0}, std::uint64_t{12345}, last}) {
    std::uint64_t at = split.global_batch(step).begin;
    for (std::uint32_t rank = 0; rank < 4096; ++rank) {
      const PositionRange share = split.share(step, rank);
      ASSERT_EQ(share.begin, at);
      at = share.end;
    }
    ASSERT_EQ(at, split.global_batch(step).end);
  }
  EXPECT_EQ(split.global_batch(last).end, 1000000000000ULL);
}

TEST(DataSplit, BadSettingsAreRefusedNamingThem) {
  try {
    StaticSplit({10, 0, false, 2});
    FAIL() << "a global batch size of 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--primus-global-batch-size"), std::string::npos);
  }
  EXPECT_THROW(StaticSplit({10, 2, false, 0}), Error);
  const StaticSplit split({10, 2, false, 2});
  EXPECT_THROW(split.share(0, 2), Error);
  EXPECT_THROW(split.global_batch(5), Error);
}

}  // namespace
}  // namespace primus::data
