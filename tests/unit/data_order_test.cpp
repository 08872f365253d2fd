// The global order of an epoch: the permutation is a bijection at every size, its inverse undoes
// it, it depends on the seed and the epoch only, and blocks keep runs of consecutive records.
#include <gtest/gtest.h>

#include <vector>

#include "primus/common/error.hpp"
#include "primus/data/order.hpp"

namespace primus::data {
namespace {

// How many times each value of [0, n) is the image of one of [0, n).
std::vector<int> image_counts(const Permutation& p) {
  std::vector<int> seen(p.size(), 0);
  for (std::uint64_t i = 0; i < p.size(); ++i) {
    const std::uint64_t y = p(i);
    EXPECT_LT(y, p.size()) << "image of " << i;
    if (y < p.size()) ++seen[y];
  }
  return seen;
}

TEST(DataOrder, ThePermutationIsABijectionAtEverySizeUpTo1100) {
  for (const std::uint64_t seed : {0ULL, 7ULL}) {
    for (std::uint64_t n = 0; n <= 1100; ++n) {
      const Permutation p(n, order_key(seed, 3));
      const std::vector<int> seen = image_counts(p);
      for (std::uint64_t y = 0; y < n; ++y)
        ASSERT_EQ(seen[y], 1) << "n " << n << ", value " << y << ", seed " << seed;
    }
  }
}

TEST(DataOrder, ThePermutationIsABijectionAtALargeOddSizeAndItsInverseUndoesIt) {
  const Permutation p(200003, order_key(42, 0));
  const std::vector<int> seen = image_counts(p);
  for (std::uint64_t y = 0; y < p.size(); ++y)
    ASSERT_EQ(seen[y], 1) << y;
  for (std::uint64_t i = 0; i < p.size(); i += 7)
    ASSERT_EQ(p.inverse(p(i)), i);
  // Sizes next to a power of two, where the network's domain is tightest or loosest.
  for (const std::uint64_t n : {4095ULL, 4096ULL, 4097ULL, 65536ULL}) {
    const Permutation q(n, order_key(1, 1));
    for (std::uint64_t i = 0; i < n; ++i)
      ASSERT_EQ(q.inverse(q(i)), i) << n;
  }
}

TEST(DataOrder, TheOrderDependsOnTheSeedAndTheEpochAndNothingElse) {
  const std::uint64_t n = 1000;
  const auto order = [&](std::uint64_t seed, std::uint64_t epoch) {
    const GlobalOrder o({n, Shuffle::kRecords, 1024, seed}, epoch);
    std::vector<std::uint64_t> out;
    for (std::uint64_t p = 0; p < n; ++p)
      out.push_back(o.record_at(p));
    return out;
  };
  const auto same_places = [](const std::vector<std::uint64_t>& a,
                              const std::vector<std::uint64_t>& b) {
    std::size_t same = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      same += a[i] == b[i] ? 1 : 0;
    return same;
  };
  EXPECT_EQ(order(5, 2), order(5, 2));
  std::vector<std::uint64_t> identity(n);
  for (std::uint64_t i = 0; i < n; ++i)
    identity[i] = i;
  // A random permutation of 1000 agrees with another in about one place.
  EXPECT_LT(same_places(order(5, 2), identity), 20U);
  EXPECT_LT(same_places(order(5, 2), order(5, 3)), 20U);
  EXPECT_LT(same_places(order(5, 2), order(6, 2)), 20U);
}

TEST(DataOrder, NoneIsTheStoredOrder) {
  const GlobalOrder o({10, Shuffle::kNone, 1024, 9}, 4);
  for (std::uint64_t p = 0; p < 10; ++p)
    EXPECT_EQ(o.record_at(p), p);
}

TEST(DataOrder, BlocksAreRunsOfConsecutiveRecordsAndCoverEveryRecordOnce) {
  for (const std::uint64_t n : {1ULL, 5ULL, 64ULL, 1000ULL, 10007ULL}) {
    for (const std::uint64_t block : {1ULL, 3ULL, 64ULL, 100000ULL}) {
      for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
        const GlobalOrder o({n, Shuffle::kBlocks, block, 11}, epoch);
        std::vector<int> seen(n, 0);
        std::uint64_t previous = 0;
        for (std::uint64_t p = 0; p < n; ++p) {
          const std::uint64_t r = o.record_at(p);
          ASSERT_LT(r, n);
          ++seen[r];
          // Inside a run the next record follows the previous one; a run starts at a multiple
          // of the block.
          if (p > 0 && r != previous + 1) {
            ASSERT_EQ(r % block, 0U) << n << " " << block;
          }
          previous = r;
        }
        for (std::uint64_t r = 0; r < n; ++r)
          ASSERT_EQ(seen[r], 1) << "n " << n << ", block " << block << ", record " << r;
      }
    }
  }
}

TEST(DataOrder, BlocksAreShuffledAndTheShortLastBlockMoves) {
  // 10 blocks of 10 and a last one of 3: over epochs the short block is not always last.
  std::vector<std::uint64_t> first_records;
  bool short_block_moved = false;
  for (std::uint64_t epoch = 0; epoch < 20; ++epoch) {
    const GlobalOrder o({103, Shuffle::kBlocks, 10, 1}, epoch);
    first_records.push_back(o.record_at(0));
    short_block_moved = short_block_moved || o.record_at(102) != 102;
  }
  EXPECT_TRUE(short_block_moved);
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < first_records.size(); ++i) {
    bool again = false;
    for (std::size_t j = 0; j < i; ++j)
      again = again || first_records[j] == first_records[i];
    distinct += again ? 0 : 1;
  }
  EXPECT_GT(distinct, 4U);
}

TEST(DataOrder, ABlockOfNoRecordsIsRefusedAndShuffleNamesParse) {
  EXPECT_THROW(GlobalOrder({10, Shuffle::kBlocks, 0, 1}, 0), Error);
  EXPECT_EQ(parse_shuffle("records"), Shuffle::kRecords);
  EXPECT_EQ(parse_shuffle("blocks"), Shuffle::kBlocks);
  EXPECT_EQ(parse_shuffle("none"), Shuffle::kNone);
  EXPECT_FALSE(parse_shuffle("Records"));
  EXPECT_EQ(to_string(Shuffle::kBlocks), "blocks");
}

TEST(DataOrder, RangesOfPositionsMapAsOnePositionAtATime) {
  for (const Shuffle shuffle : {Shuffle::kNone, Shuffle::kRecords, Shuffle::kBlocks}) {
    for (const std::uint64_t records : {0ULL, 1ULL, 7ULL, 100ULL, 1001ULL}) {
      const GlobalOrder order({records, shuffle, 16, 5}, 3);
      for (std::uint64_t begin = 0; begin <= records; begin += 13) {
        for (const std::uint64_t length : {0ULL, 1ULL, 15ULL, 16ULL, 17ULL, 64ULL}) {
          const std::uint64_t end = std::min(records, begin + length);
          std::vector<std::uint64_t> got;
          order.append_records(begin, end, got);
          std::vector<std::uint64_t> want;
          for (std::uint64_t p = begin; p < end; ++p)
            want.push_back(order.record_at(p));
          ASSERT_EQ(got, want) << to_string(shuffle) << " " << records << " [" << begin << ", "
                               << end << ")";
        }
      }
    }
  }
}

}  // namespace
}  // namespace primus::data
