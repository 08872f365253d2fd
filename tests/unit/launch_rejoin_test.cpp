// A rejoin's decisions (launcher/supervise/rejoin.hpp), without a process: when a failure may be
// a rejoin, when the replacement is placed, how it ends, and its phases.
#include <gtest/gtest.h>

#include "supervise/rejoin.hpp"

namespace primus::launch {
namespace {

using Clock = Rejoin::Clock;
using std::chrono::milliseconds;

Rejoin::Settings four_ranks(std::uint32_t limit = 2) {
  Rejoin::Settings s;
  s.enabled = true;
  s.world_size = 4;
  s.limit = limit;
  s.deadline = milliseconds(60000);
  return s;
}

// Every rank said it can rejoin in generation `g`.
void all_rejoinable(Rejoin& rejoin, std::uint32_t g, Clock::time_point now) {
  for (std::uint32_t r = 0; r < 4; ++r)
    rejoin.rejoinable(r, g, now);
}

TEST(LaunchRejoin, ARankFailureBecomesARejoinOnlyWhenEveryRankCanRejoin) {
  const Clock::time_point t0{};
  std::string why;
  Rejoin off(Rejoin::Settings{});
  EXPECT_FALSE(off.begin(1, true, t0, why));
  EXPECT_EQ(why, "--primus-recover=restart");

  Rejoin rejoin(four_ranks());
  for (std::uint32_t r = 0; r < 3; ++r)
    rejoin.rejoinable(r, 0, t0);
  EXPECT_FALSE(rejoin.begin(1, true, t0, why));
  EXPECT_NE(why.find("rank 3 cannot rejoin"), std::string::npos) << why;
  rejoin.rejoinable(3, 0, t0);
  EXPECT_FALSE(rejoin.begin(1, false, t0, why));
  EXPECT_EQ(why, "no checkpoint was committed yet to go on from");
  EXPECT_TRUE(rejoin.begin(1, true, t0, why));
  EXPECT_TRUE(rejoin.under_way());
  EXPECT_EQ(rejoin.failed_rank(), 1u);
  EXPECT_FALSE(rejoin.begin(2, true, t0, why)) << "one rejoin at a time";
  EXPECT_EQ(why, "rank 1's rejoin was under way");
}

// A rank whose training loop is over (it finished) can never rejoin: a failure after it is a
// restart's.
TEST(LaunchRejoin, NoRejoinOnceARankHasLeftItsLoop) {
  const Clock::time_point t0{};
  Rejoin rejoin(four_ranks());
  all_rejoinable(rejoin, 0, t0);
  rejoin.left(3);
  std::string why;
  EXPECT_FALSE(rejoin.begin(1, true, t0, why));
  EXPECT_EQ(why, "rank 3 has left its training loop (it finished)");
}

TEST(LaunchRejoin, TheReplacementIsPlacedOnceEverySurvivorWaitsAndTheRejoinEndsWithItsPhases) {
  const Clock::time_point t0{};
  Rejoin rejoin(four_ranks());
  all_rejoinable(rejoin, 0, t0);
  std::string why;
  ASSERT_TRUE(rejoin.begin(2, true, t0 + milliseconds(100), why));
  rejoin.waiting(0, 0, t0 + milliseconds(150));
  rejoin.waiting(2, 0, t0 + milliseconds(160));  // the failed rank's own word does not count
  rejoin.waiting(1, 1, t0 + milliseconds(170));  // nor a word of another generation
  rejoin.waiting(1, 0, t0 + milliseconds(180));
  EXPECT_FALSE(rejoin.ready_to_place());
  rejoin.waiting(3, 0, t0 + milliseconds(300));
  EXPECT_TRUE(rejoin.ready_to_place());
  rejoin.placed(t0 + milliseconds(400));
  EXPECT_FALSE(rejoin.ready_to_place()) << "placed once";
  EXPECT_EQ(rejoin.generation(), 1u);
  // The survivors' and the replacement's groups come up in generation 1; a late word of
  // generation 0 does not end it.
  EXPECT_FALSE(rejoin.rejoinable(0, 1, t0 + milliseconds(900)));
  EXPECT_FALSE(rejoin.rejoinable(1, 1, t0 + milliseconds(900)));
  EXPECT_FALSE(rejoin.rejoinable(3, 0, t0 + milliseconds(900)));
  EXPECT_FALSE(rejoin.rejoinable(3, 1, t0 + milliseconds(950)));
  const auto phases = rejoin.rejoinable(2, 1, t0 + milliseconds(1400));
  ASSERT_TRUE(phases);
  EXPECT_DOUBLE_EQ(phases->tear_down, 0.2);
  EXPECT_DOUBLE_EQ(phases->place, 0.1);
  EXPECT_DOUBLE_EQ(phases->regroup, 1.0);
  EXPECT_FALSE(rejoin.under_way());
  EXPECT_EQ(rejoin.completed(), 1u);
  // The first step of generation 1, once: from the rejoin's end and from the failure.
  EXPECT_FALSE(rejoin.first_step(0, t0 + milliseconds(1500)));
  const auto first = rejoin.first_step(1, t0 + milliseconds(1700));
  ASSERT_TRUE(first);
  EXPECT_DOUBLE_EQ(first->after_rejoin, 0.3);
  EXPECT_DOUBLE_EQ(first->after_failure, 1.6);
  EXPECT_FALSE(rejoin.first_step(1, t0 + milliseconds(1800))) << "once";
  // The next failure may rejoin again, in generation 1.
  EXPECT_TRUE(rejoin.begin(0, true, t0 + milliseconds(2000), why)) << why;
}

// The survivors' connections to the failed rank close before the launcher reaps it: their
// words may come first, and count once the rejoin begins.
TEST(LaunchRejoin, SurvivorsThatWaitBeforeTheFailureIsSeenCount) {
  const Clock::time_point t0{};
  Rejoin rejoin(four_ranks());
  all_rejoinable(rejoin, 0, t0);
  for (const std::uint32_t r : {0u, 1u, 3u})
    rejoin.waiting(r, 0, t0 + milliseconds(10));
  EXPECT_FALSE(rejoin.ready_to_place()) << "no rejoin yet";
  std::string why;
  ASSERT_TRUE(rejoin.begin(2, true, t0 + milliseconds(20), why)) << why;
  EXPECT_TRUE(rejoin.ready_to_place());
  rejoin.placed(t0 + milliseconds(30));
  all_rejoinable(rejoin, 1, t0 + milliseconds(50));
  EXPECT_EQ(rejoin.completed(), 1u);
}

TEST(LaunchRejoin, RejoinsCountAgainstTheLimitAndAFailedOneEndsThemAll) {
  const Clock::time_point t0{};
  std::string why;
  Rejoin none(four_ranks(0));
  all_rejoinable(none, 0, t0);
  EXPECT_FALSE(none.begin(1, true, t0, why));
  EXPECT_EQ(why, "no restart left (--primus-max-restarts)");

  Rejoin rejoin(four_ranks());
  all_rejoinable(rejoin, 0, t0);
  ASSERT_TRUE(rejoin.begin(1, true, t0, why));
  EXPECT_FALSE(rejoin.past_deadline(t0 + milliseconds(59999)));
  EXPECT_TRUE(rejoin.past_deadline(t0 + milliseconds(60000)));
  rejoin.give_up();
  EXPECT_FALSE(rejoin.under_way());
  EXPECT_FALSE(rejoin.past_deadline(t0 + milliseconds(60000)));
  EXPECT_FALSE(rejoin.begin(2, true, t0 + milliseconds(61000), why));
  EXPECT_EQ(why, "an earlier rejoin of this attempt failed");
}

TEST(LaunchRejoin, AStandbyIsWantedOnceEveryRankIsUpAndWhileARejoinIsLeft) {
  const Clock::time_point t0{};
  Rejoin off(Rejoin::Settings{});
  EXPECT_FALSE(off.wants_standby());

  Rejoin rejoin(four_ranks(1));
  EXPECT_FALSE(rejoin.wants_standby()) << "the ranks are still starting";
  for (std::uint32_t r = 0; r < 3; ++r)
    rejoin.rejoinable(r, 0, t0);
  EXPECT_FALSE(rejoin.wants_standby()) << "rank 3 is not up yet";
  rejoin.rejoinable(3, 0, t0);
  EXPECT_TRUE(rejoin.wants_standby());

  std::string why;
  ASSERT_TRUE(rejoin.begin(0, true, t0, why));
  EXPECT_FALSE(rejoin.wants_standby()) << "a rejoin under way";
  for (std::uint32_t r = 1; r < 4; ++r)
    rejoin.waiting(r, 0, t0);
  rejoin.placed(t0);
  all_rejoinable(rejoin, 1, t0);
  EXPECT_EQ(rejoin.completed(), 1u);
  EXPECT_FALSE(rejoin.wants_standby()) << "the only rejoin (--primus-max-restarts) is spent";

  Rejoin given_up(four_ranks());
  all_rejoinable(given_up, 0, t0);
  ASSERT_TRUE(given_up.begin(2, true, t0, why));
  given_up.give_up();
  EXPECT_FALSE(given_up.wants_standby());
}

}  // namespace
}  // namespace primus::launch
