// The launcher's one policy after an attempt (launcher/policy.hpp), as a table: every case of
// the fault campaign's contract (docs/reliability.md) that a decision of primus-launch serves
// is a row, on one machine and under Slurm.
#include <gtest/gtest.h>

#include <csignal>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "supervise/policy.hpp"

namespace primus::launch {
namespace {

constexpr int kPreempted = 75;

RankEnd exited(int rank, int code, bool ready = true, bool after_stop = false) {
  return RankEnd{rank, code << 8, after_stop, ready};
}
RankEnd killed(int rank, int sig, bool ready = true, bool after_stop = false) {
  return RankEnd{rank, sig, after_stop, ready};
}
std::vector<RankEnd> all_exited(int ranks, int code) {
  std::vector<RankEnd> ends;
  ends.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    ends.push_back(exited(r, code));
  return ends;
}
// Slurm: ranks 2r and 2r+1 on n(r+1).
std::map<std::uint32_t, std::string> two_per_node(int ranks) {
  std::map<std::uint32_t, std::string> nodes;
  for (int r = 0; r < ranks; ++r)
    nodes[static_cast<std::uint32_t>(r)] = "n" + std::to_string(r / 2 + 1);
  return nodes;
}

struct Row {
  std::string name;
  std::function<void(JobSituation&, AttemptFacts&)> given;
  Next next;
  int exit_status;
  Verdict verdict;
  std::optional<int> cause;        // the root cause's rank, when failed
  std::string stop_event;          // the stop's event under Slurm (empty: not a stop)
  std::set<std::string> excluded;  // nodes excluded now
  std::string not_going_on;        // a part of the reason the ranks do not go on
};

JobSituation one_machine() {
  JobSituation job;
  job.max_restarts = 1;
  job.max_requeues = 3;
  job.preempted_status = kPreempted;
  return job;
}

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // One machine.
      {"every rank finished",
       [](JobSituation&, AttemptFacts& f) { f.ends = all_exited(4, 0); },
       Next::kExit,
       0,
       Verdict::kFinished,
       std::nullopt,
       "",
       {},
       ""},
      {"a rank failed, a restart left",
       [](JobSituation&, AttemptFacts& f) {
         f.ends = {exited(1, 3), exited(0, 143, true, true), exited(2, 143, true, true)};
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       1,
       "",
       {},
       ""},
      {"a rank failed, no restart left: its status, never 0",
       [](JobSituation& j, AttemptFacts& f) {
         j.attempt = 1;
         f.ends = {exited(1, 3), exited(0, 143, true, true)};
       },
       Next::kExit,
       3,
       Verdict::kFailed,
       1,
       "",
       {},
       ""},
      {"a stop: the ranks saved and exited 75",
       [](JobSituation&, AttemptFacts& f) {
         f.stop_seen = true;
         f.ends = all_exited(4, kPreempted);
       },
       Next::kExit,
       kPreempted,
       Verdict::kStopped,
       std::nullopt,
       "",
       {},
       ""},
      {"a stop while the ranks started: stopped, never finished",
       [](JobSituation&, AttemptFacts& f) {
         f.stop_seen = true;
         f.ends = {killed(0, SIGTERM, false, true), killed(1, SIGTERM, false, true)};
       },
       Next::kExit,
       kPreempted,
       Verdict::kStopped,
       std::nullopt,
       "",
       {},
       ""},
      {"a hung rank is the cause, not the ranks stopped after it",
       [](JobSituation&, AttemptFacts& f) {
         f.hung = 2;
         f.ends = {exited(0, 143, true, true), killed(2, SIGKILL, true, true)};
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       2,
       "",
       {},
       ""},
      {"a rank that lost its peer: the peer is the cause",
       [](JobSituation& j, AttemptFacts& f) {
         j.attempt = 1;
         f.ends = {exited(1, 1), exited(3, 3)};
         f.lost_peers = {{1, 3}};
       },
       Next::kExit,
       3,
       Verdict::kFailed,
       3,
       "",
       {},
       ""},
      {"one machine: a hung rank or a hardware error excludes no node",
       [](JobSituation&, AttemptFacts& f) {
         f.hung = 2;
         f.nodes = two_per_node(4);
         f.exceptions = {{1, "RuntimeError: CUDA error: uncorrectable ECC error encountered"}};
         f.ends = {exited(0, 143, true, true), killed(2, SIGKILL, true, true)};
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       2,
       "",
       {},
       ""},
      // Slurm: stops.
      {"preempted: requeued once",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.stop_seen = true;
         f.ends = all_exited(8, kPreempted);
         f.job_state = "RUNNING";
         f.preempted = true;
       },
       Next::kRequeue,
       kPreempted,
       Verdict::kStopped,
       std::nullopt,
       "preempted",
       {},
       ""},
      {"preempted while the ranks started: requeued once",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.stop_seen = true;
         f.ends = {killed(0, SIGTERM, false, true), killed(5, SIGTERM, false, true)};
         f.job_state = "RUNNING";
         f.preempted = true;
       },
       Next::kRequeue,
       kPreempted,
       Verdict::kStopped,
       std::nullopt,
       "preempted",
       {},
       ""},
      {"the time limit's warning: requeued below the cap",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.allocation = 2;
         f.stop_seen = true;
         f.ends = all_exited(8, kPreempted);
         f.job_state = "RUNNING";
       },
       Next::kRequeue,
       kPreempted,
       Verdict::kStopped,
       std::nullopt,
       "time-limit",
       {},
       ""},
      {"the time limit's warning at the cap: exit 1",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.allocation = 3;
         f.stop_seen = true;
         f.ends = all_exited(8, kPreempted);
         f.job_state = "RUNNING";
       },
       Next::kExit,
       1,
       Verdict::kStopped,
       std::nullopt,
       "requeue-cap-reached",
       {},
       ""},
      {"past the time limit itself: too late to requeue",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.stop_seen = true;
         f.ends = all_exited(8, kPreempted);
         f.job_state = "TIMEOUT";
       },
       Next::kExit,
       kPreempted,
       Verdict::kStopped,
       std::nullopt,
       "time-limit",
       {},
       ""},
      {"primus-launch stop: exit 0, not requeued",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.stop_seen = f.user_stop = true;
         f.ends = all_exited(8, kPreempted);
         f.job_state = "RUNNING";
       },
       Next::kExit,
       0,
       Verdict::kStopped,
       std::nullopt,
       "finished",
       {},
       ""},
      {"scancel: cancelled, never requeued",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.stop_seen = true;
         f.ends = all_exited(8, kPreempted);
         f.job_state = "COMPLETING";
       },
       Next::kExit,
       128 + SIGTERM,
       Verdict::kStopped,
       std::nullopt,
       "cancelled",
       {},
       ""},
      {"requeued by the launcher at Slurm's deadline: nothing more",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.stop_seen = f.requeued = true;
         f.ends = {exited(0, kPreempted)};
       },
       Next::kExit,
       kPreempted,
       Verdict::kFinished,
       std::nullopt,
       "",
       {},
       ""},
      // Slurm: lost nodes.
      {"a lost node with a spare: excluded, the ranks start again without it",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.placing = true;
         j.node_restarts = 1;
         j.max_restarts = 0;
         f.ends = {exited(0, 1)};
         f.srun_status = 137 << 8;
         f.lost_nodes = {{"n3", "State=DOWN"}};
         f.placement_after_loss = true;
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       std::nullopt,
       "",
       {"n3"},
       ""},
      {"a lost node without spares: srun's status, naming the way on",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.ends = {exited(0, 1)};
         f.srun_status = 137 << 8;
         f.lost_nodes = {{"n3", "State=DOWN"}};
       },
       Next::kExit,
       137,
       Verdict::kFailed,
       std::nullopt,
       "",
       {"n3"},
       "--no-kill"},
      {"a lost node and no placement left: the placement's reason",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.placing = true;
         j.node_restarts = 1;
         f.ends = {exited(0, 1)};
         f.lost_nodes = {{"n3", "State=DOWN"}};
         f.placement_why = "need 3 nodes";
       },
       Next::kExit,
       1,
       Verdict::kFailed,
       std::nullopt,
       "",
       {"n3"},
       "need 3 nodes"},
      // Slurm: failures and exclusions.
      {"a hung rank without spares: its node excluded, the job fails (never COMPLETED)",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.hung = 5;
         f.nodes = two_per_node(8);
         f.ends = {exited(0, 143, false, true), killed(5, SIGKILL, false, true)};
       },
       Next::kExit,
       128 + SIGKILL,
       Verdict::kFailed,
       5,
       "",
       {"n3"},
       "excluded node"},
      {"a hung rank with a spare: its node excluded, the ranks start again",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.placing = true;
         f.hung = 5;
         f.nodes = two_per_node(8);
         f.ends = {killed(5, SIGKILL, true, true)};
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       5,
       "",
       {"n3"},
       ""},
      {"a node excluded already is not excluded again",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.placing = true;
         j.excluded = {"n3"};
         f.hung = 5;
         f.nodes = two_per_node(8);
         f.ends = {killed(5, SIGKILL, true, true)};
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       5,
       "",
       {},
       ""},
      {"a hardware error excludes its rank's node",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.placing = true;
         f.nodes = two_per_node(8);
         f.ends = {exited(2, 1)};
         f.exceptions = {{2, "RuntimeError: CUDA error: uncorrectable ECC error encountered"}};
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       2,
       "",
       {"n2"},
       ""},
      {"a rank killed after its first step: one restart",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         f.nodes = two_per_node(8);
         f.ends = {killed(5, SIGKILL), exited(0, 143, true, true)};
       },
       Next::kRestart,
       0,
       Verdict::kFailed,
       5,
       "",
       {},
       ""},
      {"finished, but srun failed and some ranks never reported: failed",
       [](JobSituation& j, AttemptFacts& f) {
         j.slurm = true;
         j.attempt = 1;
         f.world_size = 8;
         f.ends = all_exited(6, 0);
         f.srun_status = 1 << 8;
       },
       Next::kExit,
       1,
       Verdict::kFailed,
       -1,
       "",
       {},
       ""},
  };
  return table;
}

TEST(LaunchPolicy, EveryRowOfTheContract) {
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.name);
    JobSituation job = one_machine();  // a Slurm row sets job.slurm
    AttemptFacts facts;
    row.given(job, facts);
    if (facts.world_size == 0) facts.world_size = static_cast<std::uint32_t>(facts.ends.size());
    if (!facts.lost_nodes.empty()) facts.world_size = 8;
    RankFailures failures(1000);
    const Action action = after_attempt(job, facts, failures);
    EXPECT_EQ(action.next, row.next);
    if (row.next != Next::kRestart) {
      EXPECT_EQ(action.exit_status, row.exit_status);
    }
    if (facts.lost_nodes.empty() && !facts.requeued) {
      EXPECT_EQ(action.outcome.verdict, row.verdict);
    }
    if (row.cause) {
      ASSERT_TRUE(action.outcome.cause);
      EXPECT_EQ(action.outcome.cause->rank, *row.cause);
    }
    EXPECT_EQ(action.stop ? action.stop->event : std::string(), row.stop_event);
    std::set<std::string> excluded;
    for (const auto& [node, why] : action.exclude)
      excluded.insert(node);
    EXPECT_EQ(excluded, row.excluded);
    if (row.not_going_on.empty()) {
      EXPECT_TRUE(action.not_going_on.empty()) << action.not_going_on;
    } else {
      EXPECT_NE(action.not_going_on.find(row.not_going_on), std::string::npos)
          << action.not_going_on;
    }
  }
}

}  // namespace
}  // namespace primus::launch
