// The ring and recursive-doubling schedules (pure): blocks tile the buffer, every block is
// reduced along one chain through every rank and ends at its owner, the allgather hands each
// block to every rank, and the doubling pairs ranks consistently.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "../../collectives/schedule.hpp"

namespace primus::coll::schedule {
namespace {

TEST(CollSchedule, BlocksTileTheBufferAndDifferByAtMostOne) {
  for (std::size_t count : {0UL, 1UL, 7UL, 1000UL, 1UL << 40}) {
    for (int n = 1; n <= 9; ++n) {
      std::size_t at = 0;
      std::size_t smallest = SIZE_MAX;
      std::size_t largest = 0;
      for (int i = 0; i < n; ++i) {
        const Range r = block(count, n, i);
        EXPECT_EQ(r.begin, at);
        at += r.count;
        smallest = std::min(smallest, r.count);
        largest = std::max(largest, r.count);
      }
      EXPECT_EQ(at, count);
      EXPECT_LE(largest - smallest, 1U);
    }
  }
}

// Simulates the reduce-scatter ring on sets: which ranks' contributions each copy holds.
TEST(CollSchedule, TheReduceScatterRingLeavesRankRWithBlockRFromEveryRank) {
  for (int n = 2; n <= 9; ++n) {
    std::vector<std::vector<std::set<int>>> held(n, std::vector<std::set<int>>(n));
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < n; ++b)
        held[r][b] = {r};
    for (int step = 0; step + 1 < n; ++step) {
      std::vector<std::vector<std::set<int>>> next = held;
      for (int r = 0; r < n; ++r) {
        const int right = (r + 1) % n;
        const int sent = reduce_scatter_send_block(r, n, step);
        EXPECT_EQ(reduce_scatter_recv_block(right, n, step), sent);  // what right expects
        for (int contributor : held[r][sent])
          EXPECT_TRUE(next[right][sent].insert(contributor).second) << "counted twice";
      }
      held = next;
    }
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(held[r][r].size(), static_cast<std::size_t>(n)) << n << " ranks, rank " << r;
  }
}

TEST(CollSchedule, TheAllgatherRingGivesEveryRankEveryBlock) {
  for (int n = 2; n <= 9; ++n) {
    std::vector<std::set<int>> has(n);
    for (int r = 0; r < n; ++r)
      has[r] = {r};
    for (int step = 0; step + 1 < n; ++step) {
      std::vector<std::set<int>> next = has;
      for (int r = 0; r < n; ++r) {
        const int sent = allgather_send_block(r, n, step);
        EXPECT_TRUE(has[r].count(sent)) << "sends a block it does not have";
        EXPECT_EQ(allgather_recv_block((r + 1) % n, n, step), sent);
        next[(r + 1) % n].insert(sent);
      }
      has = next;
    }
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(has[r].size(), static_cast<std::size_t>(n));
  }
}

TEST(CollSchedule, DoublingFoldsTheExtraRanksOntoTheirOddPartners) {
  for (int n = 1; n <= 17; ++n) {
    std::set<int> virtual_ranks;
    int folded = 0;
    for (int r = 0; r < n; ++r) {
      const Doubling d = doubling(r, n);
      EXPECT_EQ(d.power + d.extra, n);
      EXPECT_LE(d.extra, d.power - (d.power > 1 ? 1 : 0));
      if (d.role == kFolded) {
        ++folded;
        EXPECT_EQ(doubling(r + 1, n).role, kActive);
      } else {
        EXPECT_TRUE(virtual_ranks.insert(d.virtual_rank).second);
        EXPECT_EQ(doubling_real_rank(d.virtual_rank, n), r);
      }
    }
    EXPECT_EQ(folded, n - (n > 0 ? doubling(0, n).power : 0));
    EXPECT_EQ(virtual_ranks.size(), static_cast<std::size_t>(doubling(0, n).power));
  }
}

}  // namespace
}  // namespace primus::coll::schedule
