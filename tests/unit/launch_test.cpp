// primus-launch's decisions (pure): which rank is the root cause, how an attempt ended, restart
// or exit with which status; and its small adapters: the command's lookup (126/127), the job
// directory's checks, the events' lines.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "cli/command_path.hpp"
#include "primus/common/error.hpp"
#include "process/child_process.hpp"
#include "slurm/slurm_attempt.hpp"
#include "slurm/slurm_queries.hpp"
#include "slurm/step_layout.hpp"
#include "supervise/events.hpp"
#include "supervise/hang_watch.hpp"
#include "supervise/job_dir.hpp"
#include "supervise/outcome.hpp"
#include "supervise/resume.hpp"

namespace primus::launch {
namespace {

int exited(int code) {
  return code << 8;  // a wait status as W* macros read it
}

int signaled(int sig) {
  return sig;
}

TEST(LaunchSignals, AStopReachesTheRanksWithASignalTheyTakeAsOne) {
  // The ranks save on SIGTERM and on their --primus-preempt-signal; anything else that stops
  // primus-launch (a Ctrl-C's SIGINT, a SIGHUP, the other user signal) reaches them as SIGTERM.
  EXPECT_EQ(signal_for_ranks(SIGTERM, SIGUSR2), SIGTERM);
  EXPECT_EQ(signal_for_ranks(SIGUSR2, SIGUSR2), SIGUSR2);
  EXPECT_EQ(signal_for_ranks(SIGINT, SIGUSR2), SIGTERM);
  EXPECT_EQ(signal_for_ranks(SIGHUP, SIGUSR2), SIGTERM);
  EXPECT_EQ(signal_for_ranks(SIGUSR1, SIGUSR2), SIGTERM);
  EXPECT_EQ(signal_for_ranks(SIGUSR1, SIGUSR1), SIGUSR1);
  EXPECT_EQ(signal_number("USR1"), SIGUSR1);
  EXPECT_EQ(signal_number("SIGHUP"), SIGHUP);
  EXPECT_EQ(signal_number("URG"), SIGURG);
}

TEST(LaunchOutcome, ExitCodesAndDescriptionsAsAShellGivesThem) {
  ASSERT_TRUE(WIFEXITED(exited(3)) && WEXITSTATUS(exited(3)) == 3);
  ASSERT_TRUE(WIFSIGNALED(signaled(SIGKILL)));
  EXPECT_EQ(exit_code(exited(0)), 0);
  EXPECT_EQ(exit_code(exited(3)), 3);
  EXPECT_EQ(exit_code(signaled(SIGKILL)), 137);
  EXPECT_EQ(describe(exited(3)), "exit status 3");
  EXPECT_EQ(describe(signaled(SIGSEGV)), "killed by signal 11 (SIGSEGV)");
}

TEST(LaunchOutcome, TheFirstRankToFailIsTheCauseNotTheOnesStoppedAfterIt) {
  // Rank 2 fails; the launcher stops the others, which end by SIGTERM.
  const std::vector<RankEnd> ends = {{0, exited(0), false},
                                     {2, exited(3), false},
                                     {1, signaled(SIGTERM), true},
                                     {3, signaled(SIGKILL), true}};
  const Outcome outcome = judge(ends, false, 75);
  ASSERT_EQ(outcome.verdict, Verdict::kFailed);
  ASSERT_TRUE(outcome.cause);
  EXPECT_EQ(outcome.cause->rank, 2);
  EXPECT_EQ(decide(outcome, 0, 0, 75).exit_status, 3);
  EXPECT_FALSE(decide(outcome, 0, 0, 75).restart);
  EXPECT_TRUE(decide(outcome, 0, 1, 75).restart);
  EXPECT_FALSE(decide(outcome, 1, 1, 75).restart) << "the budget is spent";
  EXPECT_EQ(decide(outcome, 1, 1, 75).exit_status, 3);
  // A signal is reported as 128 + the signal.
  EXPECT_EQ(decide(judge({{0, signaled(SIGSEGV), false}}, false, 75), 0, 0, 75).exit_status, 139);
}

TEST(LaunchOutcome, AStopEndsWithThePreemptedStatusAndIsNeverRestarted) {
  const std::vector<RankEnd> stopped = {{1, exited(75), true}, {0, exited(75), true}};
  const Outcome outcome = judge(stopped, true, 75);
  EXPECT_EQ(outcome.verdict, Verdict::kStopped);
  EXPECT_EQ(decide(outcome, 0, 5, 75).exit_status, 75);
  EXPECT_FALSE(decide(outcome, 0, 5, 75).restart);
  // Another status for it (--primus-exit-preempted).
  EXPECT_EQ(judge({{0, exited(99), true}}, true, 99).verdict, Verdict::kStopped);
  // Ranks that finished before the stop arrived, and others that stopped.
  EXPECT_EQ(judge({{0, exited(0), false}, {1, exited(75), true}}, true, 75).verdict,
            Verdict::kStopped);
  // A rank that does not stop as asked (a plain script killed by SIGTERM) is the cause, and
  // even with restarts left the stop is not undone by a restart.
  const Outcome killed =
      judge({{0, exited(75), true, true}, {1, signaled(SIGTERM), true, true}}, true, 75);
  ASSERT_EQ(killed.verdict, Verdict::kFailed);
  EXPECT_EQ(killed.cause->rank, 1);
  EXPECT_FALSE(decide(killed, 0, 5, 75).restart);
  EXPECT_EQ(decide(killed, 0, 5, 75).exit_status, 143);
  // Without a stop, 75 is a failure like any other status.
  EXPECT_EQ(judge({{0, exited(75), false}}, false, 75).verdict, Verdict::kFailed);
}

TEST(LaunchOutcome, RanksStoppedBeforeTheyWereReadyStoppedWhileStartingNeverFinished) {
  // Issue 39: a preemption while the ranks import torch. Ranks 0 and 1 had not returned from
  // primus.init() and died of the signal; rank 2 was ready and failed when its peer vanished;
  // rank 3 was ready and killed at the deadline. Nothing was saved: the attempt stopped.
  const std::vector<RankEnd> ends = {{0, signaled(SIGTERM), true, false},
                                     {1, signaled(SIGTERM), true, false},
                                     {2, exited(1), true, true},
                                     {3, signaled(SIGKILL), true, true}};
  const Outcome outcome = judge(ends, true, 75);
  ASSERT_EQ(outcome.verdict, Verdict::kStopped);
  EXPECT_EQ(outcome.stopped_while_starting, (std::vector<int>{0, 1}));
  EXPECT_FALSE(decide(outcome, 0, 5, 75).restart);
  EXPECT_EQ(decide(outcome, 0, 5, 75).exit_status, 75);
  // Every rank killed before it was ready, none ready: stopped (it was COMPLETED, exit 0).
  EXPECT_EQ(judge({{0, signaled(SIGTERM), true}, {1, signaled(SIGTERM), true}}, true, 75).verdict,
            Verdict::kStopped);
  // Without a stop the same end is a failure, ready or not.
  const Outcome failed = judge({{0, signaled(SIGTERM), false}}, false, 75);
  ASSERT_EQ(failed.verdict, Verdict::kFailed);
  EXPECT_TRUE(failed.stopped_while_starting.empty());
  // A rank that failed before the stop came stays the cause.
  const Outcome before =
      judge({{2, exited(3), false, true}, {0, signaled(SIGTERM), true, false}}, true, 75);
  ASSERT_EQ(before.verdict, Verdict::kFailed);
  EXPECT_EQ(before.cause->rank, 2);
  EXPECT_TRUE(before.stopped_while_starting.empty());
}

TEST(LaunchOutcome, ARankThatLostItsPeerIsNotTheCauseWhenThePeerFailed) {
  // Issue 39: rank 5 exits 3; rank 1's report (a lost connection to rank 5) arrives first.
  const std::vector<RankEnd> ends = {
      {1, exited(1), false, true}, {5, exited(3), true, true}, {0, signaled(SIGTERM), true, true}};
  Outcome outcome = judge(ends, false, 75);
  ASSERT_EQ(outcome.cause->rank, 1);
  EXPECT_EQ(blame_the_lost_peer(outcome, ends, {{1, 5}}), 1);
  EXPECT_EQ(outcome.cause->rank, 5);
  EXPECT_EQ(exit_code(outcome.cause->wait_status), 3);
  // Followed from rank to rank: 1 lost 2, 2 lost 5.
  outcome = judge(ends, false, 75);
  std::vector<RankEnd> chain = ends;
  chain.push_back({2, exited(1), true, true});
  EXPECT_EQ(blame_the_lost_peer(outcome, chain, {{1, 2}, {2, 5}}), 1);
  EXPECT_EQ(outcome.cause->rank, 5);
  // A peer that finished is not blamed; one that never reported (its node went) is.
  outcome = judge(ends, false, 75);
  EXPECT_FALSE(
      blame_the_lost_peer(outcome, {{1, exited(1), false}, {5, exited(0), false}}, {{1, 5}}));
  EXPECT_EQ(outcome.cause->rank, 1);
  outcome = judge(ends, false, 75);
  EXPECT_EQ(blame_the_lost_peer(outcome, {{1, exited(1), false}}, {{1, 7}}), 1);
  EXPECT_EQ(outcome.cause->rank, 7);
  // Reports that name each other never loop.
  outcome = judge(ends, false, 75);
  blame_the_lost_peer(outcome, ends, {{1, 5}, {5, 1}});
  EXPECT_TRUE(outcome.cause->rank == 1 || outcome.cause->rank == 5);
}

TEST(LaunchHangWatch, ARankSilentSinceTheFirstHelloOrOnItsWayOutIsHung) {
  using Clock = HangWatch::Clock;
  const Clock::time_point t0{};
  const auto s = [](int n) { return std::chrono::seconds(n); };
  HangWatch watch(3);
  EXPECT_FALSE(watch.hung(t0 + s(100), s(5))) << "nobody said hello: a plain script";
  watch.hello(0, t0 + s(10));
  watch.hello(1, t0 + s(11));
  // Rank 2 never says hello (stopped while importing torch): watched from the first hello. The
  // others wait for it in the rendezvous, making no progress, but send heartbeats.
  watch.heard(0, t0 + s(14));
  watch.heard(1, t0 + s(14));
  EXPECT_FALSE(watch.hung(t0 + s(14), s(5)));
  watch.heard(0, t0 + s(16));
  EXPECT_EQ(watch.hung(t0 + s(16), s(5)), 2U);
  // Rank 1, stopped after its hello, heartbeats no more: it is the one, not rank 0, whose
  // hello (its last progress) is older.
  HangWatch stopped(2);
  stopped.hello(0, t0 + s(10));
  stopped.hello(1, t0 + s(11));
  for (int t = 12; t <= 20; ++t)
    stopped.heard(0, t0 + s(t));
  EXPECT_EQ(stopped.hung(t0 + s(20), s(5)), 1U);
  // Both alive (heartbeats), no progress: the oldest progress, as before.
  stopped.heard(1, t0 + s(20));
  EXPECT_EQ(stopped.hung(t0 + s(20), s(5)), 0U);
  watch.hello(2, t0 + s(16));
  watch.advanced(0, t0 + s(20));
  watch.advanced(1, t0 + s(20));
  watch.advanced(2, t0 + s(20));
  // Rank 1 said goodbye and never ended: found; rank 0 ended: never.
  watch.goodbye(1, t0 + s(21));
  watch.ended(0);
  watch.advanced(2, t0 + s(25));
  EXPECT_EQ(watch.hung(t0 + s(27), s(5)), 1U);
  EXPECT_EQ(watch.since(1, t0 + s(27)), t0 + s(21));
  watch.ended(1);
  watch.advanced(1, t0 + s(40));  // a late report of an ended rank changes nothing
  EXPECT_FALSE(watch.hung(t0 + s(29), s(5)));
  EXPECT_EQ(watch.hung(t0 + s(31), s(5)), 2U);
}

// tests/python/test_rejoin.py's hang test failed once this way (2026-12-07): after a rejoin
// that took 5 s from the hang, rank 0, whose last step was before it, was found hung at the
// first check, before its first step from the checkpoint.
TEST(LaunchHangWatch, AfterARejoinEveryRankIsWatchedAgainFromItsEnd) {
  using Clock = HangWatch::Clock;
  const Clock::time_point t0{};
  const auto s = [](int n) { return std::chrono::seconds(n); };
  HangWatch watch(2);
  watch.hello(0, t0 + s(1));
  watch.hello(1, t0 + s(1));
  watch.advanced(0, t0 + s(10));
  watch.advanced(1, t0 + s(10));
  watch.heard(0, t0 + s(15));
  EXPECT_EQ(watch.hung(t0 + s(15), s(4)), 1U) << "rank 1 stopped at 10";
  watch.ended(1);
  watch.replaced(1, t0 + s(15));
  watch.rejoined(t0 + s(16));
  EXPECT_FALSE(watch.hung(t0 + s(19), s(4))) << "rank 0 waited through the rejoin";
  watch.advanced(1, t0 + s(18));
  EXPECT_EQ(watch.hung(t0 + s(21), s(4)), 0U) << "and is watched from its end on";
}

TEST(LaunchHangWatch, RanksWaitingInTheRendezvousAreNotBlamedBeforeAStoppedOne) {
  using Clock = HangWatch::Clock;
  const Clock::time_point t0{};
  const auto s = [](int n) { return std::chrono::seconds(n); };
  // Ranks 0 and 1 enter torch's rendezvous at 12 and fall silent there (torch holds the GIL);
  // rank 2 heartbeats until 14, when it is stopped before reaching it. Rank 0 is the silent
  // longest, yet rank 2 is the one.
  HangWatch watch(3);
  for (std::uint32_t rank = 0; rank < 3; ++rank)
    watch.hello(rank, t0 + s(10));
  watch.heard(0, t0 + s(11));
  watch.heard(1, t0 + s(12));
  watch.rendezvous(0);
  watch.rendezvous(1);
  watch.heard(2, t0 + s(14));
  EXPECT_EQ(watch.hung(t0 + s(30), s(10)), 2U);
  // Without the rendezvous events, the silent longest: rank 0.
  HangWatch unaware(3);
  for (std::uint32_t rank = 0; rank < 3; ++rank)
    unaware.hello(rank, t0 + s(10));
  unaware.heard(0, t0 + s(11));
  unaware.heard(1, t0 + s(12));
  unaware.heard(2, t0 + s(14));
  EXPECT_EQ(unaware.hung(t0 + s(30), s(10)), 0U);
  // Every rank in the rendezvous (the stopped one among them): the silent longest again.
  watch.rendezvous(2);
  EXPECT_EQ(watch.hung(t0 + s(30), s(10)), 0U);
  // Past it (ready), a rank's silence counts as before.
  watch.ready(0);
  watch.ready(1);
  watch.ready(2);
  EXPECT_EQ(watch.hung(t0 + s(30), s(10)), 0U);
}

TEST(LaunchOutcome, EveryRankAtZeroIsFinished) {
  const Outcome outcome = judge({{1, exited(0), false}, {0, exited(0), false}}, false, 75);
  EXPECT_EQ(outcome.verdict, Verdict::kFinished);
  EXPECT_EQ(decide(outcome, 0, 3, 75).exit_status, 0);
  EXPECT_FALSE(decide(outcome, 0, 3, 75).restart);
}

TEST(LaunchCommands, AShieldedCommandOutlivesAStopSignalThatReachesEveryProcess) {
  // Issue 39: a preemption signals every process of the job, the dataset's check and the
  // resume point's resolution included; killed halfway, they read as an unreadable dataset or
  // a broken checkpoint directory (exit 2, the job lost). Shielded, they keep the launcher's
  // blocked stop signals blocked and finish; the launcher takes the stop itself.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigset_t before;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &stop, &before), 0);
  const std::vector<std::string> argv = {"sh", "-c", "kill -TERM $$; echo finished"};
  const CommandOutput shielded = run_command(argv, std::chrono::seconds(10), true);
  const CommandOutput plain = run_command(argv, std::chrono::seconds(10), false);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ASSERT_TRUE(WIFEXITED(shielded.status)) << describe(shielded.status);
  EXPECT_EQ(WEXITSTATUS(shielded.status), 0);
  EXPECT_EQ(shielded.output, "finished\n");
  ASSERT_TRUE(WIFSIGNALED(plain.status)) << describe(plain.status);
  EXPECT_EQ(WTERMSIG(plain.status), SIGTERM);
}

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/primus-launch-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(Scratch, CommandsAreFoundAsExecvpFindsThemOrRefusedWith126Or127) {
  const std::filesystem::path tool = dir_ / "tool";
  std::ofstream(tool) << "#!/bin/sh\n";
  const std::filesystem::path plain = dir_ / "plain";
  std::ofstream(plain) << "data\n";
  ::chmod(tool.c_str(), 0755);
  ::chmod(plain.c_str(), 0644);
  const std::string path = "/nonexistent:" + dir_.string();
  EXPECT_EQ(resolve_command("tool", path.c_str()).path, tool.string());
  EXPECT_EQ(resolve_command(tool.string(), nullptr).path, tool.string());
  EXPECT_EQ(resolve_command("no-such-tool", path.c_str()).status, 127);
  EXPECT_EQ(resolve_command("no-such-tool", path.c_str()).reason, "not found in PATH");
  EXPECT_EQ(resolve_command((dir_ / "missing").string(), nullptr).status, 127);
  EXPECT_EQ(resolve_command(plain.string(), nullptr).status, 126);  // root too: no x bit
  EXPECT_EQ(resolve_command("plain", path.c_str()).status, 126);
  EXPECT_EQ(resolve_command(dir_.string(), nullptr).status, 126);
  EXPECT_EQ(resolve_command("", nullptr).status, 127);
}

TEST_F(Scratch, TheJobDirectoryIsTheUsersAloneAndLogFoldersAreNeverReused) {
  const JobDir job(dir_ / "job");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "job").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  EXPECT_EQ(job.next_allocation(), 0U);
  EXPECT_TRUE(std::filesystem::is_directory(job.attempt_logs(0, 0)));
  EXPECT_TRUE(std::filesystem::is_directory(job.attempt_logs(0, 1)));
  EXPECT_EQ(job.next_allocation(), 1U);
  job.attempt_logs(4, 0);
  EXPECT_EQ(job.next_allocation(), 5U);
  EXPECT_EQ(job.attempt_logs(0, 1), dir_ / "job" / "logs" / "alloc-0" / "attempt-1");

  std::filesystem::create_directory(dir_ / "shared");
  ::chmod((dir_ / "shared").c_str(), 0777);
  try {
    JobDir bad(dir_ / "shared");
    ADD_FAILURE() << "took a directory that others can write";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("can be written by others (mode 777)"), std::string::npos)
        << e.what();
  }
  std::filesystem::create_directory_symlink(dir_ / "job", dir_ / "link");
  EXPECT_THROW(JobDir(dir_ / "link"), Error);
  EXPECT_THROW(JobDir(dir_ / "missing-parent" / "job"), Error);
}

TEST(LaunchEvents, OneJsonObjectPerLineWithWhatApplies) {
  EXPECT_EQ(event_line({"launched", std::nullopt, std::nullopt, {}}, "T", 0, 0),
            "{\"time\": \"T\", \"event\": \"launched\", \"allocation\": 0, \"attempt\": 0}\n");
  EXPECT_EQ(
      event_line({"rank-failed", 3, std::string("n\"1"), {{"status", "exit status 3"}}}, "T", 2, 1),
      "{\"time\": \"T\", \"event\": \"rank-failed\", \"allocation\": 2, \"attempt\": 1, "
      "\"rank\": 3, \"node\": \"n\\\"1\", \"details\": {\"status\": \"exit status 3\"}}\n");
  const std::string now = utc_now_ms();
  EXPECT_EQ(now.size(), 24U) << now;  // 2026-12-01T21:54:11.123Z
  EXPECT_EQ(now.back(), 'Z');
  EXPECT_EQ(now[19], '.');
}

TEST(LaunchResume, ReadsWhatPrimusCkptLatestPrints) {
  const NewestCheckpoint found = parse_newest_checkpoint(
      R"({"root": "/j/ckpt", "path": "/j/ckpt/step-000000000010", "step": 10,
          "skipped": ["/j/ckpt/step-000000000013/rank-00001.h5: 100 bytes"]})");
  EXPECT_EQ(found.path, "/j/ckpt/step-000000000010");
  EXPECT_EQ(found.step, 10);
  ASSERT_EQ(found.skipped.size(), 1U);
  const NewestCheckpoint none =
      parse_newest_checkpoint(R"({"root": "/j/ckpt", "path": null, "step": null, "skipped": []})");
  EXPECT_FALSE(none.path);
  EXPECT_FALSE(none.step);
  EXPECT_THROW(parse_newest_checkpoint("primus-ckpt: something else"), Error);
  EXPECT_THROW(parse_newest_checkpoint(R"({"path": "/x", "step": null, "skipped": []})"), Error);
  EXPECT_THROW(parse_newest_checkpoint(R"({"path": 3, "step": 3, "skipped": []})"), Error);
}

TEST(LaunchResume, TheJobsOwnNewestCheckpointWinsOverAGivenOne) {
  NewestCheckpoint own;
  own.path = "/j/ckpt/step-000000000020";
  own.step = 20;
  const std::optional<std::string> given = std::string("/elsewhere/step-000000000004");
  EXPECT_EQ(resume_point(own, given), own.path);
  EXPECT_EQ(resume_point(own, std::nullopt), own.path);
  EXPECT_EQ(resume_point(NewestCheckpoint{}, given), given);
  EXPECT_EQ(resume_point(NewestCheckpoint{}, std::string()), std::nullopt);
  EXPECT_EQ(resume_point(NewestCheckpoint{}, std::nullopt), std::nullopt);
}

TEST(LaunchResume, ARootThatDoesNotExistHasNoCheckpointAndRunsNothing) {
  const NewestCheckpoint none =
      find_newest_checkpoint("/nonexistent/primus/ckpt", std::chrono::seconds(5));
  EXPECT_FALSE(none.path);
  EXPECT_TRUE(none.skipped.empty());
}

TEST(LaunchStepLayout, InsideAStepTheRanksGetTheJobsLayoutBack) {
  // What `srun --overlap -N1 -n1` left in the environment of a job of salloc -N2 -n3 (seen on
  // the testbed).
  const Environment step = {{"SLURM_JOB_ID", "27"},
                            {"SLURM_JOB_NUM_NODES", "2"},
                            {"SLURM_NNODES", "1"},
                            {"SLURM_NTASKS", "1"},
                            {"SLURM_NPROCS", "1"},
                            {"SLURM_TASKS_PER_NODE", "1"},
                            {"SLURM_DISTRIBUTION", "cyclic"},
                            {"SLURM_STEP_ID", "0"},
                            {"SLURM_STEPID", "0"},
                            {"SLURM_STEP_NUM_TASKS", "1"},
                            {"SLURM_NODELIST", "n[1-2]"},
                            {"PRIMUS_CKPT_DIR", "/c"}};
  EXPECT_TRUE(inside_a_step(step));
  JobFacts job;
  job.num_nodes = "2";
  job.num_tasks = "3";
  const Environment fixed = job_layout_environment(step, job);
  EXPECT_FALSE(inside_a_step(fixed));
  EXPECT_EQ(lookup(fixed, "SLURM_NNODES"), "2");
  EXPECT_EQ(lookup(fixed, "SLURM_NTASKS"), "3");
  EXPECT_EQ(lookup(fixed, "SLURM_NPROCS"), "3");
  for (const char* gone :
       {"SLURM_TASKS_PER_NODE", "SLURM_DISTRIBUTION", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS"}) {
    EXPECT_FALSE(lookup(fixed, gone)) << gone;
  }
  EXPECT_EQ(lookup(fixed, "SLURM_NODELIST"), "n[1-2]");
  EXPECT_EQ(lookup(fixed, "PRIMUS_CKPT_DIR"), "/c");
  EXPECT_FALSE(inside_a_step({{"SLURM_JOB_ID", "27"}, {"SLURM_NTASKS", "3"}}));
}

TEST(LaunchStepLayout, WithoutTheJobsLayoutItIsAnErrorNotOneRank) {
  const Environment step = {{"SLURM_JOB_ID", "27"}, {"SLURM_STEP_ID", "0"}};
  EXPECT_THROW(job_layout_environment(step, JobFacts{}), Error);
  JobFacts zero;
  zero.num_nodes = "2";
  zero.num_tasks = "0";
  EXPECT_THROW(job_layout_environment(step, zero), Error);
}

TEST(LaunchStepLayout, AJobGivenFewerNodesStartsTheTasksItsAllocationHolds) {
  // As the testbed's batch shell showed it after NumNodes=2 NumTasks=4 on a -N4
  // --ntasks-per-node=2 job: the submitted count stays in SLURM_NTASKS.
  const Environment shrunk = {{"SLURM_JOB_ID", "10"},
                              {"SLURM_NTASKS", "8"},
                              {"SLURM_NPROCS", "8"},
                              {"SLURM_JOB_NUM_NODES", "2"},
                              {"SLURM_TASKS_PER_NODE", "2(x2)"}};
  std::string note;
  const Environment fitted = fit_to_allocation(shrunk, note);
  EXPECT_EQ(lookup(fitted, "SLURM_NTASKS"), "4");
  EXPECT_EQ(lookup(fitted, "SLURM_NPROCS"), "4");
  EXPECT_NE(note.find("submitted for 8 tasks"), std::string::npos) << note;
  EXPECT_NE(note.find("starting 4 ranks"), std::string::npos) << note;
  // An allocation that holds what was asked (or more, -n 3 over 2 nodes of 2) is left alone.
  for (const auto& [tasks, per_node] :
       {std::pair{"8", "2(x4)"}, std::pair{"3", "2,1"}, std::pair{"3", "2(x2)"}}) {
    const Environment same = {{"SLURM_NTASKS", tasks}, {"SLURM_TASKS_PER_NODE", per_node}};
    EXPECT_EQ(fit_to_allocation(same, note), same) << per_node;
    EXPECT_TRUE(note.empty());
  }
  const Environment garbled = {{"SLURM_NTASKS", "8"}, {"SLURM_TASKS_PER_NODE", "x"}};
  EXPECT_EQ(fit_to_allocation(garbled, note), garbled);
}

TEST(LaunchGraceTime, AJobSlurmEndsWhileItsRanksStillRunIsRequeuedJustBeforeItsEnd) {
  // As scontrol showed a job without a time limit 1 s into its preemption on the testbed
  // (GraceTime=10 in partition low): EndTime stays Unknown until the grace time is over.
  const JobFacts preempted = job_facts(parse_scontrol_record(
      "JobId=13 JobState=RUNNING Restarts=0 StartTime=2026-12-02T20:24:59 EndTime=Unknown "
      "PreemptTime=2026-12-02T20:25:18 Partition=low TimeLimit=UNLIMITED"));
  ASSERT_TRUE(preempted.preempted);
  EXPECT_FALSE(preempted.end_time);
  EXPECT_EQ(preempted.partition, "low");
  const auto grace = grace_time(parse_scontrol_record(
      "PartitionName=low AllowGroups=ALL Default=YES GraceTime=10 Hidden=NO PriorityTier=1"));
  ASSERT_TRUE(grace);
  EXPECT_EQ(grace->count(), 10);
  const auto preempt_time = parse_slurm_time("2026-12-02T20:25:18");
  ASSERT_TRUE(preempt_time);
  EXPECT_EQ(preempted.preempted_at, preempt_time);
  const auto now = std::chrono::steady_clock::time_point(std::chrono::hours(1));
  const auto margin = std::chrono::seconds(3);
  // Asked one second into the preemption: 9 s left, requeued 3 s before the end.
  const auto at = requeue_deadline(preempted, grace, false, margin, now, *preempt_time + 1);
  ASSERT_TRUE(at);
  EXPECT_EQ(*at - now, std::chrono::seconds(6));
  // Asked later than the margin allows: at once. An earlier EndTime (the time limit) wins.
  EXPECT_EQ(requeue_deadline(preempted, grace, false, margin, now, *preempt_time + 9), now);
  JobFacts limit_first = preempted;
  limit_first.end_time = *preempt_time + 5;
  EXPECT_EQ(*requeue_deadline(limit_first, grace, false, margin, now, *preempt_time) - now,
            std::chrono::seconds(2));
  // No grace time known, or one Slurm does not wait for: nothing to do.
  EXPECT_FALSE(requeue_deadline(preempted, std::nullopt, true, margin, now, *preempt_time));
  EXPECT_FALSE(
      requeue_deadline(preempted, std::chrono::seconds(2), true, margin, now, *preempt_time));

  // A job at its time limit: at EndTime, only while it may still be requeued.
  const JobFacts limited = job_facts(parse_scontrol_record(
      "JobId=14 JobState=RUNNING EndTime=2026-12-02T21:00:00 PreemptTime=None"));
  ASSERT_TRUE(limited.end_time);
  EXPECT_FALSE(limited.preempted);
  EXPECT_FALSE(requeue_deadline(limited, grace, false, margin, now, *limited.end_time - 60));
  EXPECT_EQ(*requeue_deadline(limited, grace, true, margin, now, *limited.end_time - 60) - now,
            std::chrono::seconds(57));
  // No end (no time limit), or a job already ending (cancelled): never.
  JobFacts unlimited = limited;
  unlimited.end_time.reset();
  EXPECT_FALSE(requeue_deadline(unlimited, grace, true, margin, now, *preempt_time));
  JobFacts cancelled = preempted;
  cancelled.state = "CANCELLED";
  EXPECT_FALSE(requeue_deadline(cancelled, grace, true, margin, now, *preempt_time));
  for (const char* bad : {"Unknown", "None", "2026-12-02", "2026-12-02T20:25:29x", ""}) {
    EXPECT_FALSE(parse_slurm_time(bad)) << bad;
  }
  EXPECT_FALSE(grace_time(parse_scontrol_record("PartitionName=low GraceTime=soon")));
}

TEST(LaunchStepLayout, ScontrolsRecordGivesTheJobsNodesAndTasks) {
  const JobFacts facts = job_facts(parse_scontrol_record(
      "JobId=27 JobName=interactive JobState=RUNNING NumNodes=2 NumCPUs=3 NumTasks=3 "
      "CPUs/Task=1"));
  EXPECT_EQ(facts.num_nodes, "2");
  EXPECT_EQ(facts.num_tasks, "3");
}

}  // namespace
}  // namespace primus::launch
