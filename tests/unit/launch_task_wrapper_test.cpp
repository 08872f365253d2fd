// primus-task, the task wrapper of primus-launch's srun step, run as srun would run it (the
// built program, real processes) against the launcher's end of the control channel in this
// process: with --primus-recover=rejoin (PRIMUS_RECOVER) it kills its rank on the launcher's
// word (a hang), reports the end, waits, and starts the replacement in its task on the
// launcher's generation notice (docs/architecture.md, "Recovery without a restart", "Under
// srun"); without a notice it ends as its rank did.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "control/control_protocol.hpp"
#include "control/control_server.hpp"
#include "control/node_standby.hpp"
#include "primus/os/job_secret.hpp"

extern char** environ;

namespace primus::launch {
namespace {

using namespace std::chrono_literals;

// The rank: in generation 0 it says so and sleeps (a hang, or a rank the launcher kills); in a
// later one it prints the generation's environment and ends.
const char* const kRank =
    "if [ -n \"$PRIMUS_GENERATION\" ]; then echo \"gen $PRIMUS_GENERATION $MASTER_PORT "
    "$PRIMUS_PORT $PRIMUS_BOOTSTRAP $PRIMUS_RESUME\"; exit 0; fi; echo up; exec sleep 60";

class Wrapper {
 public:
  Wrapper(const ControlServer& server, const std::string& secret, const std::string& dir,
          bool rejoin, std::vector<std::string> command = {"/bin/sh", "-c", kRank},
          const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> env = {
        "PATH=/usr/bin:/bin",          "PRIMUS_CONTROL=" + server.address(),
        "PRIMUS_JOB_SECRET=" + secret, "RANK=1",
        "PRIMUS_ENV_VERSION=1",        "PRIMUS_LAUNCH_LOG_DIR=" + dir,
        "PRIMUS_LAUNCH_RESTARTS=0",    "PRIMUS_EXIT_PREEMPTED=75",
        "PRIMUS_REJOIN_DEADLINE=20",   "MASTER_PORT=20000",
        "PRIMUS_BOOTSTRAP=pmix"};
    if (rejoin) env.emplace_back("PRIMUS_RECOVER=rejoin");
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    const std::string program = std::string(PRIMUS_BUILD_DIR) + "/primus-task";
    std::vector<std::string> argv = {program, "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    std::vector<char*> args;
    for (std::string& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    spawned_ =
        ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, args.data(), envp.data()) == 0;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Wrapper() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Wrapper(const Wrapper&) = delete;
  Wrapper& operator=(const Wrapper&) = delete;

  bool spawned() const { return spawned_; }
  pid_t pid() const { return pid_; }
  // Its wait status once it has ended within `limit`; nullopt while it runs.
  std::optional<int> ended(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    do {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return status_ = status;
      ::usleep(20000);
    } while (std::chrono::steady_clock::now() < until);
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  bool spawned_ = false;
  std::optional<int> status_;
};

// The next report of `kind` from the wrapper (its rank's reports are none here).
std::optional<Report> next(ControlServer& server, ReportKind kind) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < until) {
    pollfd fd{server.fd(), POLLIN, 0};
    ::poll(&fd, 1, 100);
    for (Report& r : server.take()) {
      if (r.kind == kind && r.wrapper && r.rank == 1) return r;
    }
  }
  return std::nullopt;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string scratch_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "primus-task-XXXXXX").string();
  const char* made = ::mkdtemp(pattern.data());
  return made != nullptr ? std::string(made) : std::string();
}

// The replacement's end is reported (status 0), and the task ends as it did.
void expect_replacement_and_task_end_cleanly(ControlServer& server, Wrapper& wrapper) {
  const auto replaced = next(server, ReportKind::kExit);
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->wait_status, 0);
  const auto status = wrapper.ended(10s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

TEST(TaskWrapper, OnTheLaunchersWordItKillsItsRankAndStartsTheReplacementInItsTask) {
  const std::string secret = os::make_job_secret();
  ControlServer server("127.0.0.1", 0, secret, 2, nullptr);
  const std::string dir = scratch_dir();
  ASSERT_FALSE(dir.empty());
  Wrapper wrapper(server, secret, dir, true);
  ASSERT_TRUE(wrapper.spawned());
  ASSERT_TRUE(next(server, ReportKind::kHello).has_value());
  // The rank is up (its log says so) before the launcher's word comes.
  for (int i = 0; i < 250 && read_file(std::filesystem::path(dir) / "rank-1.log").empty(); ++i)
    ::usleep(20000);
  ASSERT_TRUE(server.send_to_wrapper(1, kill_rank_line("hung")));
  const auto killed = next(server, ReportKind::kExit);
  ASSERT_TRUE(killed.has_value());
  EXPECT_TRUE(WIFSIGNALED(killed->wait_status) && WTERMSIG(killed->wait_status) == SIGKILL)
      << killed->wait_status;
  // The wrapper waits for the launcher's word: it has not ended.
  EXPECT_FALSE(wrapper.ended(300ms).has_value());
  ASSERT_TRUE(
      server.send_to_wrapper(1, generation_notice(1, 21000, 21001, "/ckpt/step-000000000020")));
  ASSERT_NO_FATAL_FAILURE(expect_replacement_and_task_end_cleanly(server, wrapper));
  EXPECT_EQ(read_file(std::filesystem::path(dir) / "rank-1.log"), "up\n");
  EXPECT_EQ(read_file(std::filesystem::path(dir) / "rank-1.gen-1.log"),
            "gen 1 21000 21001 tcp /ckpt/step-000000000020\n");
  std::filesystem::remove_all(dir);
}

// No notice comes: a stop signal ends the wait (the launcher ends the step when it makes no
// rejoin), and the task ends as its rank did. Without --primus-recover=rejoin the task ends at
// once with its rank.
TEST(TaskWrapper, WithoutANoticeItEndsAsItsRankDidAndWithoutRejoinItNeverWaits) {
  const std::string secret = os::make_job_secret();
  ControlServer server("127.0.0.1", 0, secret, 2, nullptr);
  const std::string dir = scratch_dir();
  ASSERT_FALSE(dir.empty());
  for (const bool rejoin : {true, false}) {
    Wrapper wrapper(server, secret, dir, rejoin);
    ASSERT_TRUE(wrapper.spawned());
    ASSERT_TRUE(next(server, ReportKind::kHello).has_value());
    ASSERT_TRUE(server.send_to_wrapper(1, kill_rank_line("hung")));
    ASSERT_TRUE(next(server, ReportKind::kExit).has_value());
    if (rejoin) {
      EXPECT_FALSE(wrapper.ended(300ms).has_value());
      ::kill(wrapper.pid(), SIGTERM);
    }
    const auto status = wrapper.ended(10s);
    ASSERT_TRUE(status.has_value()) << rejoin;
    EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << *status;
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir) / "rank-1.gen-1.log"));
  }
  std::filesystem::remove_all(dir);
}

// The rank of the standby test: up until the file `fail` appears beside it, then exits 3; in a
// later generation it prints the generation's port and resume point and ends.
const char* const kPythonRank = R"(import os, sys, time
if os.environ.get("PRIMUS_GENERATION"):
    print("gen", os.environ["PRIMUS_GENERATION"], os.environ["MASTER_PORT"],
          os.environ["PRIMUS_RESUME"], "torch" in sys.modules, flush=True)
    sys.exit(0)
print("up", flush=True)
while not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fail")):
    time.sleep(0.02)
sys.exit(3)
)";

bool listening(const std::string& abstract_name) {
  return read_file("/proc/net/unix").find("@" + abstract_name) != std::string::npos;
}

// The replacement's request carries the asking task's CPUs, which the standby's fork binds
// itself to (Slurm bound the standby, a child of the node's first task, to that task's).
TEST(TaskWrapper, TheStandbysRequestCarriesTheTasksCpus) {
  const std::string assignment = "{\"argv\": [\"t.py\"], \"env\": {\"RANK\": \"3\"}}\n";
  const std::string request = standby_request(assignment, {2, 5});
  EXPECT_EQ(request, "{\"argv\":[\"t.py\"],\"cpus\":[2,5],\"env\":{\"RANK\":\"3\"}}\n");
  EXPECT_EQ(standby_request(assignment, {}), assignment);
  const std::vector<int> cpus = own_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
}

// Under srun with a Python rank: on the launcher's word that every rank is up, the node's first
// task starts the node's standby (python/primus/_standby_node.py, which imports torch), and the
// replacement of its failed rank is that standby's fork, which has torch loaded before the
// script runs; the wrapper reports where it came from and the replacement's end as its own.
TEST(TaskWrapper, TheNodesStandbyMakesTheReplacementAndItsEndIsReported) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a sanitizer build stages no Python package (the plain build runs this test)";
#endif
  const std::string build = PRIMUS_BUILD_DIR;
  ASSERT_TRUE(std::filesystem::exists(build + "/python/stage/primus/_standby_node.py"))
      << "the Python package is not staged: make python/stage.stamp";
  const std::string secret = os::make_job_secret();
  ControlServer server("127.0.0.1", 0, secret, 2, nullptr);
  const std::string dir = scratch_dir();
  ASSERT_FALSE(dir.empty());
  std::ofstream(std::filesystem::path(dir) / "rank.py") << kPythonRank;
  const std::string job = std::to_string(::getpid());
  const std::string name = "primus-standby." + job + ".0.unit";
  Wrapper wrapper(server, secret, dir, true, {"/usr/bin/python3", dir + "/rank.py"},
                  {"PYTHONPATH=" + build + "/python/stage",
                   "LD_LIBRARY_PATH=" + build + "/ckpt/.libs:" + build +
                       "/collectives/.libs:" + build + "/data/.libs",
                   "OMP_NUM_THREADS=1", "SLURM_LOCALID=0", "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0",
                   "SLURMD_NODENAME=unit"});
  ASSERT_TRUE(wrapper.spawned());
  ASSERT_TRUE(next(server, ReportKind::kHello).has_value());
  ASSERT_TRUE(server.send_to_wrapper(1, standby_line()));
  for (int i = 0; i < 3000 && !listening(name); ++i)
    ::usleep(20000);
  ASSERT_TRUE(listening(name)) << read_file(std::filesystem::path(dir) / "standby-unit.log");
  std::ofstream(std::filesystem::path(dir) / "fail") << "";
  const auto failed = next(server, ReportKind::kExit);
  ASSERT_TRUE(failed.has_value());
  EXPECT_TRUE(WIFEXITED(failed->wait_status) && WEXITSTATUS(failed->wait_status) == 3);
  ASSERT_TRUE(server.send_to_wrapper(1, generation_notice(1, 21000, 21001, "/ckpt/step-20")));
  const auto source = next(server, ReportKind::kEvent);
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->event, "replacement");
  EXPECT_EQ(source->replacement, "standby");
  ASSERT_NO_FATAL_FAILURE(expect_replacement_and_task_end_cleanly(server, wrapper));
  EXPECT_EQ(read_file(std::filesystem::path(dir) / "rank-1.gen-1.log"),
            "gen 1 21000 /ckpt/step-20 True\n");
  EXPECT_NE(read_file(std::filesystem::path(dir) / "standby-unit.log").find("becomes rank 1"),
            std::string::npos);
  // The standby ends once its owner has and the rank it made has ended.
  for (int i = 0; i < 500 && listening(name); ++i)
    ::usleep(20000);
  EXPECT_FALSE(listening(name));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace primus::launch
