// The ranks' reports of an attempt, read once for both runners (launcher/rank_reports.hpp): what
// each report and each end of a rank mean on one machine and under srun, and what the runner is
// told to do. The events go to a real events.jsonl in a temporary directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "supervise/rank_reports.hpp"

namespace primus::launch {
namespace {

using namespace std::chrono_literals;
constexpr int kPreempted = 75;

class RankReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("primus-rank-reports-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    events_ = std::make_unique<EventLog>(dir_ / "events.jsonl", 0);
  }
  void TearDown() override {
    events_.reset();
    std::filesystem::remove_all(dir_);
  }
  AttemptContext context(bool slurm, std::uint32_t world = 4) {
    AttemptContext c;
    c.attempt = 0;
    c.world_size = world;
    c.node = "here";
    c.preempted_status = kPreempted;
    c.slurm = slurm;
    c.events = events_.get();
    return c;
  }
  std::string events_text() const {
    std::ifstream in(dir_ / "events.jsonl");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static Report event(std::uint32_t rank, const std::string& name, bool wrapper = false) {
    Report r;
    r.kind = ReportKind::kEvent;
    r.rank = rank;
    r.event = name;
    r.wrapper = wrapper;
    return r;
  }
  static Report wrapper_exit(std::uint32_t rank, int wait_status) {
    Report r;
    r.kind = ReportKind::kExit;
    r.rank = rank;
    r.wrapper = true;
    r.wait_status = wait_status;
    return r;
  }

  std::filesystem::path dir_;
  std::unique_ptr<EventLog> events_;
};

TEST_F(RankReportsTest, AFailedRankEndsTheAttemptForAFailureInBothModes) {
  for (const bool slurm : {false, true}) {
    RankReports reports(context(slurm));
    EXPECT_EQ(reports.rank_ended(2, 1 << 8), RankAction::kEndForFailure);
    EXPECT_TRUE(reports.stopping_for_failure());
    // The others, ended by the launcher's SIGTERM, are not failures of their own.
    EXPECT_EQ(reports.rank_ended(0, SIGTERM), RankAction::kNone);
    const AttemptReport report = reports.finish();
    ASSERT_EQ(report.ends.size(), 2U);
    EXPECT_FALSE(report.ends[0].after_stop_request);
    EXPECT_TRUE(report.ends[1].after_stop_request);
  }
  EXPECT_NE(events_text().find("\"rank-failed\""), std::string::npos);
}

TEST_F(RankReportsTest, ThePreemptedStatusIsAStopUnderSrunAndAFailureOnOneMachine) {
  RankReports slurm(context(true));
  EXPECT_EQ(slurm.rank_ended(1, kPreempted << 8), RankAction::kNone);
  EXPECT_TRUE(slurm.report().ranks_signalled);
  EXPECT_FALSE(slurm.stopping_for_failure());
  // Only the launcher signals ranks on one machine: an exit with 75 it did not ask for failed.
  RankReports local(context(false));
  EXPECT_EQ(local.rank_ended(1, kPreempted << 8), RankAction::kEndForFailure);
  EXPECT_FALSE(local.report().ranks_signalled);
}

TEST_F(RankReportsTest, ARankKilledDuringAStopEndsTheOthersNow) {
  RankReports reports(context(false));
  reports.stop_forwarded("SIGTERM to primus-launch", "SIGTERM", false);
  EXPECT_TRUE(reports.stopping());
  EXPECT_EQ(reports.rank_ended(0, kPreempted << 8), RankAction::kNone);
  EXPECT_EQ(reports.rank_ended(1, SIGKILL), RankAction::kEndNow);
  EXPECT_FALSE(reports.stopping_for_failure());
  EXPECT_NE(events_text().find("\"stop-requested\""), std::string::npos);
}

TEST_F(RankReportsTest, AWrappersExitCountsOnceAndOnlyFromAWrapper) {
  RankReports reports(context(true));
  Report from_rank = wrapper_exit(3, 0);
  from_rank.wrapper = false;
  EXPECT_EQ(reports.handle(from_rank), RankAction::kNone);
  EXPECT_TRUE(reports.report().ends.empty());
  EXPECT_EQ(reports.handle(wrapper_exit(3, 0)), RankAction::kNone);
  EXPECT_EQ(reports.handle(wrapper_exit(3, 1 << 8)), RankAction::kNone);  // a second report
  EXPECT_EQ(reports.report().ends.size(), 1U);
  EXPECT_EQ(reports.reported().count(3), 1U);
  EXPECT_EQ(reports.handle(wrapper_exit(2, 1 << 8)), RankAction::kEndForFailure);
}

TEST_F(RankReportsTest, AStopSignalReportIsAStopUnderSrunOnly) {
  RankReports slurm(context(true));
  Report signal = event(0, "stop-signal");
  signal.signal = "SIGTERM";
  slurm.handle(signal);
  slurm.handle(event(1, "stop-signal"));
  EXPECT_TRUE(slurm.report().ranks_signalled);
  EXPECT_TRUE(slurm.stopping());
  const std::string text = events_text();
  const auto first = text.find("SIGTERM to the ranks");
  EXPECT_NE(first, std::string::npos);
  EXPECT_EQ(text.find("stop-requested", first), std::string::npos);  // said once

  RankReports local(context(false));
  local.handle(event(0, "stop-signal"));
  EXPECT_FALSE(local.report().ranks_signalled);
  EXPECT_FALSE(local.stopping());
}

TEST_F(RankReportsTest, AStopSignalAfterAFailureIsTheLaunchersOwn) {
  RankReports reports(context(true));
  EXPECT_EQ(reports.rank_ended(0, 1 << 8), RankAction::kEndForFailure);
  reports.handle(event(1, "stop-signal"));
  EXPECT_FALSE(reports.report().ranks_signalled);
  EXPECT_EQ(reports.rank_ended(1, kPreempted << 8), RankAction::kNone);
  EXPECT_FALSE(reports.report().ranks_signalled);
}

TEST_F(RankReportsTest, HellosOfThisAttemptNameTheNodesUnderSrun) {
  RankReports reports(context(true));
  Report hello;
  hello.kind = ReportKind::kHello;
  hello.rank = 1;
  hello.attempt = 1;  // an earlier attempt's rank: not this one
  hello.node = "n9";
  reports.handle(hello);
  EXPECT_TRUE(reports.report().nodes.empty());
  EXPECT_FALSE(reports.report().any_rank_connected);
  hello.attempt = 0;
  hello.node = "n2";
  hello.wrapper = true;
  hello.step = "7.3";
  reports.handle(hello);
  EXPECT_EQ(reports.report().nodes.at(1), "n2");
  EXPECT_EQ(reports.report().step, "7.3");
  EXPECT_FALSE(reports.report().any_rank_connected);
  hello.wrapper = false;
  reports.handle(hello);
  EXPECT_TRUE(reports.report().any_rank_connected);
  // The wrapper's connection closed without an exit report: silent once srun has ended.
  Report goodbye;
  goodbye.kind = ReportKind::kGoodbye;
  goodbye.rank = 1;
  goodbye.wrapper = true;
  reports.handle(goodbye);
  EXPECT_EQ(reports.silent().count(1), 1U);
  EXPECT_TRUE(reports.reported().empty());
}

TEST_F(RankReportsTest, CheckpointsExceptionsAndReadinessAreKept) {
  RankReports reports(context(false, 2));
  Report committed = event(0, "checkpoint-committed");
  committed.path = "/ckpt/step-00000010";
  committed.steps = 10;
  reports.handle(committed);
  Report raised;
  raised.kind = ReportKind::kException;
  raised.rank = 1;
  raised.exception = "PeerFailure";
  raised.message = "lost rank 0";
  raised.peer = 0;
  reports.handle(raised);
  reports.handle(event(0, "ready"));
  reports.rank_ended(0, 0);
  reports.rank_ended(1, 1 << 8);
  const AttemptReport report = reports.finish();
  EXPECT_TRUE(report.checkpoint_committed);
  EXPECT_EQ(report.checkpoint, "/ckpt/step-00000010");
  EXPECT_EQ(report.exceptions.at(1), "PeerFailure: lost rank 0");
  EXPECT_EQ(report.lost_peers.at(1), 0U);
  EXPECT_TRUE(report.ends[0].ready);
  EXPECT_FALSE(report.ends[1].ready);
  const AttemptFacts facts = facts_of(report, 2);
  EXPECT_FALSE(facts.stop_seen);
  EXPECT_EQ(facts.lost_peers.at(1), 0U);
}

TEST_F(RankReportsTest, AHangIsFoundOnlyWhileNothingElseIsUnderWay) {
  RankReports reports(context(true, 2));
  Report hello;
  hello.kind = ReportKind::kHello;
  hello.attempt = 0;
  for (std::uint32_t rank : {0U, 1U}) {
    hello.rank = rank;
    reports.handle(hello);
  }
  const auto later = std::chrono::steady_clock::now() + 60s;
  RankReports stopped = reports;
  stopped.stop_forwarded("primus-launch stop", "SIGTERM", true);
  EXPECT_EQ(stopped.check_hang(later, 10s), std::nullopt);
  EXPECT_TRUE(stopped.report().user_stop);
  const auto hung = reports.check_hang(later, 10s);
  ASSERT_TRUE(hung.has_value());
  EXPECT_TRUE(reports.report().hung.has_value());
  EXPECT_TRUE(reports.stopping_for_failure());
  EXPECT_FALSE(facts_of(reports.finish(), 2).stop_seen);
  EXPECT_NE(events_text().find("\"hang\""), std::string::npos);
}

// A rejoin, as the reports see it (--primus-recover=rejoin on one machine): a rank's failure
// begins one once every rank said it can rejoin and a checkpoint exists (its end kept out of the
// attempt's), the survivors' words and every rank's groups in the next generation end it with a
// "rejoined" event and a rejoin counted; another failure meanwhile gives it up, and the first
// failed rank's end is then the attempt's first.
TEST_F(RankReportsTest, ARejoinBeginsAtAFailureAndEndsWhenEveryRankIsInTheNextGeneration) {
  Rejoin::Settings settings;
  settings.enabled = true;
  settings.world_size = 4;
  settings.limit = 1;
  Rejoin rejoin(settings);
  AttemptContext c = context(false);
  c.rejoin = &rejoin;
  c.resume_point = true;
  RankReports reports(c);
  const auto said = [](std::uint32_t rank, const std::string& name, std::uint32_t generation) {
    Report r = event(rank, name);
    r.generation = generation;
    return r;
  };
  for (std::uint32_t r = 0; r < 4; ++r)
    reports.handle(said(r, "rejoinable", 0));
  EXPECT_FALSE(reports.recovery()) << "no recovery before a failure";
  EXPECT_EQ(reports.rank_ended(2, 3 << 8), RankAction::kRejoin);
  EXPECT_FALSE(reports.stopping());
  EXPECT_TRUE(reports.report().ends.empty()) << "the failed rank's end waits on the rejoin";
  // The recovery as status.json shows it, phase by phase.
  ASSERT_TRUE(reports.recovery());
  EXPECT_EQ(reports.recovery()->state, "under-way");
  EXPECT_EQ(reports.recovery()->phase, "tear-down");
  EXPECT_EQ(reports.recovery()->rank, 2U);
  EXPECT_EQ(reports.recovery()->generation, 1U);
  EXPECT_GT(reports.recovery()->failure_time, 1.7e9) << "a UNIX time";
  EXPECT_EQ(reports.recovery()->detect_seconds, std::optional<double>(0.0)) << "an end is seen";
  for (const std::uint32_t r : {0U, 1U, 3U})
    reports.handle(said(r, "rejoin-waiting", 0));
  ASSERT_TRUE(rejoin.ready_to_place());
  reports.replacement_started(2);
  rejoin.placed(Rejoin::Clock::now());
  EXPECT_EQ(reports.recovery()->phase, "regroup");
  EXPECT_EQ(reports.recovery()->replacement, "started");
  // Under srun the failed rank's task wrapper says that the node's standby made the
  // replacement; a rank cannot say so.
  Report source = event(2, "replacement");
  source.replacement = "standby";
  reports.handle(source);
  EXPECT_EQ(reports.recovery()->replacement, "started");
  source.wrapper = true;
  reports.handle(source);
  EXPECT_EQ(reports.recovery()->replacement, "standby");
  EXPECT_FALSE(reports.recovery()->rejoin_seconds) << "not rejoined yet";
  // Each rank says how long its restore took and where it came from: the event has the slowest
  // and how many ranks restored from each source.
  for (std::uint32_t r = 0; r < 4; ++r) {
    Report joined = said(r, "rejoinable", 1);
    joined.restore_seconds = 0.01 * (r + 1);
    joined.restore_source = r == 0 ? "memory" : "peer";
    reports.handle(joined);
  }
  EXPECT_FALSE(rejoin.under_way());
  EXPECT_EQ(reports.report().rejoins, 1U);
  {
    const RecoveryStatus& r = *reports.recovery();
    EXPECT_EQ(r.state, "rejoined");
    EXPECT_EQ(r.phase, "first-step");
    ASSERT_TRUE(r.tear_down_seconds && r.place_seconds && r.regroup_seconds && r.rejoin_seconds);
    EXPECT_DOUBLE_EQ(*r.rejoin_seconds,
                     *r.tear_down_seconds + *r.place_seconds + *r.regroup_seconds);
    EXPECT_DOUBLE_EQ(r.restore_seconds.value_or(0), 0.04) << "the slowest rank's restore";
    EXPECT_FALSE(r.recovery_seconds) << "rank 0 has taken no step yet";
  }
  const std::string text = events_text();
  EXPECT_NE(text.find("\"rejoin\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"rejoined\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"regroup_seconds\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"replacement\": \"standby\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"detect_seconds\": \"0.000\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"restore_seconds\": \"0.040\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"restore_sources\": \"memory 1, peer 3\""), std::string::npos) << text;
  // Rank 0's first step in generation 1 ends the rejoin's phases, once.
  const Report first = said(0, "first-step", 1);
  reports.handle(first);
  reports.handle(first);
  const std::string after = events_text();
  const auto at = after.find("\"rejoin-first-step\"");
  ASSERT_NE(at, std::string::npos) << after;
  EXPECT_EQ(after.find("\"rejoin-first-step\"", at + 1), std::string::npos) << after;
  EXPECT_NE(after.find("\"after_failure_seconds\""), std::string::npos) << after;
  EXPECT_EQ(reports.recovery()->state, "done");
  EXPECT_EQ(reports.recovery()->phase, "");
  ASSERT_TRUE(reports.recovery()->first_step_seconds && reports.recovery()->recovery_seconds);
  EXPECT_GE(*reports.recovery()->recovery_seconds, *reports.recovery()->rejoin_seconds);
  // No rejoin is left (limit 1): the next failure ends the attempt as before.
  EXPECT_EQ(reports.rank_ended(1, 3 << 8), RankAction::kEndForFailure);
}

// A survivor that ends, even with 0 (it had finished its loop when the failure came), will
// never rejoin: the rejoin is given up at once, not at its deadline.
TEST_F(RankReportsTest, ASurvivorThatEndsDuringARejoinGivesItUp) {
  Rejoin::Settings settings;
  settings.enabled = true;
  settings.world_size = 3;
  settings.limit = 1;
  Rejoin rejoin(settings);
  AttemptContext c = context(false, 3);
  c.rejoin = &rejoin;
  c.resume_point = true;
  RankReports reports(c);
  for (std::uint32_t r = 0; r < 3; ++r) {
    Report said = event(r, "rejoinable");
    said.generation = 0;
    reports.handle(said);
  }
  EXPECT_EQ(reports.rank_ended(1, 9), RankAction::kRejoin);
  EXPECT_EQ(reports.rank_ended(0, 0), RankAction::kEndForFailure);
  EXPECT_FALSE(rejoin.under_way());
  EXPECT_NE(events_text().find("while the others waited to rejoin"), std::string::npos);
  const AttemptReport report = reports.finish();
  ASSERT_EQ(report.ends.size(), 2U);
  EXPECT_EQ(report.ends[0].rank, 1) << "the failed rank's end is the root cause";
}

TEST_F(RankReportsTest, AFailureDuringARejoinGivesItUpAndTheFirstFailureIsTheRootCause) {
  Rejoin::Settings settings;
  settings.enabled = true;
  settings.world_size = 3;
  settings.limit = 2;
  Rejoin rejoin(settings);
  AttemptContext c = context(false, 3);
  c.rejoin = &rejoin;
  c.resume_point = true;
  RankReports reports(c);
  for (std::uint32_t r = 0; r < 3; ++r) {
    Report r_said = event(r, "rejoinable");
    r_said.generation = 0;
    reports.handle(r_said);
  }
  EXPECT_EQ(reports.rank_ended(1, 3 << 8), RankAction::kRejoin);
  EXPECT_EQ(reports.rank_ended(0, 1 << 8), RankAction::kEndForFailure);
  EXPECT_TRUE(reports.stopping_for_failure());
  const AttemptReport report = reports.finish();
  ASSERT_EQ(report.ends.size(), 2U);
  EXPECT_EQ(report.ends[0].rank, 1) << "the rank whose failure began the rejoin comes first";
  EXPECT_NE(events_text().find("\"rejoin-failed\""), std::string::npos);
  ASSERT_TRUE(reports.recovery());
  EXPECT_EQ(reports.recovery()->state, "failed");
  EXPECT_NE(reports.recovery()->reason.find("rank 0 failed too"), std::string::npos)
      << reports.recovery()->reason;
  // A rejoin given up stays given up for the attempt.
  EXPECT_EQ(reports.rejoin_failed("again"), RankAction::kNone);
}

// A hang under --primus-recover=rejoin: the hung rank is the rejoin's (the runner kills it
// alone), the attempt goes on, and that rank's end by SIGKILL is the rejoin's, not a failure.
TEST_F(RankReportsTest, AHungRankBeginsARejoinAndItsKilledEndIsTheRejoins) {
  Rejoin::Settings settings;
  settings.enabled = true;
  settings.world_size = 2;
  settings.limit = 1;
  Rejoin rejoin(settings);
  AttemptContext c = context(false, 2);
  c.rejoin = &rejoin;
  c.resume_point = true;
  RankReports reports(c);
  Report hello;
  hello.kind = ReportKind::kHello;
  hello.attempt = 0;
  for (std::uint32_t rank : {0U, 1U}) {
    hello.rank = rank;
    reports.handle(hello);
    Report said = event(rank, "rejoinable");
    said.generation = 0;
    reports.handle(said);
  }
  const auto hung = reports.check_hang(std::chrono::steady_clock::now() + 60s, 10s);
  ASSERT_TRUE(hung.has_value());
  EXPECT_TRUE(reports.rejoining(*hung));
  // The recovery's first phase is the silence that made it a hang (60 s and a little more).
  ASSERT_TRUE(reports.recovery());
  EXPECT_GE(reports.recovery()->detect_seconds.value_or(0), 60.0);
  EXPECT_LT(reports.recovery()->detect_seconds.value_or(0), 70.0);
  EXPECT_FALSE(reports.stopping_for_failure());
  EXPECT_FALSE(reports.report().hung.has_value());
  EXPECT_EQ(reports.rank_ended(*hung, SIGKILL), RankAction::kRejoin);
  EXPECT_FALSE(reports.rejoining(*hung)) << "its end came";
  EXPECT_TRUE(reports.report().ends.empty());
  const std::string text = events_text();
  EXPECT_NE(text.find("\"hang\""), std::string::npos);
  EXPECT_NE(text.find("\"rejoin\""), std::string::npos);
  EXPECT_EQ(text.find("\"rank-failed\""), std::string::npos) << text;
}

}  // namespace
}  // namespace primus::launch
