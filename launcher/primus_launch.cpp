// primus-launch: one per allocation, it starts and supervises the ranks of a job (docs/man/
// primus-launch.1, docs/architecture.md "The launcher and its control channel"). Inside a Slurm
// allocation it runs the ranks as one srun step of task wrappers and supervises them through
// the control channel; outside one, --nproc N ranks on this machine, with the rank environment
// the plugin gives ranks under srun.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/cli/command_line.hpp"
#include "attempt_report.hpp"
#include "command_path.hpp"
#include "data_check.hpp"
#include "events.hpp"
#include "job_dir.hpp"
#include "job_monitor.hpp"
#include "local_attempt.hpp"
#include "node_exclusions.hpp"
#include "outcome.hpp"
#include "placement.hpp"
#include "policy.hpp"
#include "primus/common.hpp"
#include "primus/common/hostlist.hpp"
#include "primus/common/rank_env.hpp"
#include "primus/common/slurm_step.hpp"
#include "primus/common/tasks_per_node.hpp"
#include "primus/os/job_secret.hpp"
#include "primus/os/node_address.hpp"
#include "rank_process.hpp"
#include "reaper.hpp"
#include "resume.hpp"
#include "slurm_attempt.hpp"
#include "slurm_queries.hpp"
#include "status.hpp"
#include "status_view.hpp"
#include "step_layout.hpp"
#include "supervision.hpp"

#include <slurm/slurm.h>

extern char** environ;

namespace primus::launch {
namespace {

constexpr const char* kUsage =
    "Usage: primus-launch [options] -- COMMAND [ARGS...]      (inside a Slurm allocation)\n"
    "       primus-launch [options] --nproc N -- COMMAND [ARGS...]   (on this machine)\n"
    "       primus-launch status [JOBID|JOBDIR] [--json] [--watch [--interval S]]\n"
    "       primus-launch report [JOBID|JOBDIR] [--out DIR]\n"
    "       primus-launch stop [JOBID|JOBDIR]\n"
    "\n"
    "Starts COMMAND once per rank with the rank environment of primus(7) (RANK, WORLD_SIZE,\n"
    "LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...), supervises the ranks and ends them together.\n"
    "Inside an allocation the ranks are one srun step with the job's layout (srun's own\n"
    "options through its SLURM_* and SRUN_* input variables).\n"
    "  --nproc N          N ranks on this machine (outside a Slurm allocation)\n"
    "  --label            prefix every output line with '<rank>: '\n"
    "  --help, --version\n"
    "Every --primus option of srun and sbatch is accepted (see primus(7)); PRIMUS_* variables\n"
    "apply below them. Among them: --primus-max-restarts=N (start the ranks again after a\n"
    "failure, default 0), --primus-max-requeues=N (3), --primus-hang-timeout=SECONDS (off),\n"
    "--primus-exit-preempted=STATUS (75), --primus-stop-grace=SECONDS (120: after a stop,\n"
    "SIGKILL to ranks still running), --primus-job-dir=PATH (default primus-JOBID in the\n"
    "submit directory, or ./primus-local on one machine: logs, events.jsonl, checkpoints).\n"
    "\n"
    "status [JOBID|JOBDIR]: the job's state, every rank (node, step, samples/s, lateness, last\n"
    "step, last checkpoint, memory, straggler) and every node (CPU, memory, network), from the\n"
    "job directory's status.json (rewritten every heartbeat interval). --json prints that file\n"
    "(its schema: primus-launch(1)); --watch redraws the table every --interval seconds (2).\n"
    "report [JOBID|JOBDIR]: report.html, PNG figures and report.json in JOBDIR/report (or\n"
    "--out DIR): samples/s per rank, the primus.log scalars and every event over time.\n"
    "stop [JOBID|JOBDIR]: asks the launcher of a job to stop its ranks gracefully; they save\n"
    "and exit, and the job is not requeued (default: $PRIMUS_JOB_DIR, else ./primus-local).\n"
    "\n"
    "Exit status: 0 the ranks finished (or stopped by primus-launch stop under Slurm); 75 they\n"
    "stopped for preemption or a time limit after a checkpoint; 1 the requeue cap was reached;\n"
    "2 a usage or configuration error; 126/127 COMMAND cannot run or is not found; otherwise\n"
    "the first failing rank's status (128+N for signal N).\n";

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::filesystem::path absolute_from_here(const std::string& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? std::filesystem::path(path) : absolute.lexically_normal();
}

Environment process_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    if (eq != nullptr) env[std::string(*entry, static_cast<std::size_t>(eq - *entry))] = eq + 1;
  }
  return env;
}

// The job directory of Slurm job JOBID as primus-launch makes it by default: primus-<JOBID> in
// the job's submit directory (scontrol's WorkDir).
std::string job_dir_of_slurm_job(const std::string& job) {
  const CommandOutput out =
      run_command({"scontrol", "show", "job", "-o", job}, std::chrono::seconds(30));
  if (out.status != 0) {
    throw Error("job " + job + ": scontrol show job failed (" + out.output.substr(0, 200) +
                "); after slurmctld forgets a job, give its job directory instead");
  }
  const auto record = parse_scontrol_record(out.output);
  if (const auto comment = record.find("Comment"); comment != record.end()) {
    if (const auto dir = job_dir_from_comment(comment->second)) return *dir;
  }
  const auto work_dir = record.find("WorkDir");
  if (work_dir == record.end()) throw Error(job + ": scontrol shows no WorkDir");
  std::string id = job;
  if (const auto array = record.find("ArrayJobId"); array != record.end()) {
    const auto task = record.find("ArrayTaskId");
    if (task != record.end()) id = array->second + "_" + task->second;
  }
  const std::filesystem::path dir = std::filesystem::path(work_dir->second) / ("primus-" + id);
  if (!std::filesystem::exists(dir / "events.jsonl")) {
    throw Error("job " + job + ": " + dir.string() +
                " is not a primus-launch job directory; for a job started with "
                "--primus-job-dir, give that directory");
  }
  return dir.string();
}

std::string self_executable() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Error("cannot find primus-launch's own path (/proc/self/exe)");
  return path.string();
}

// The job directory that JOBID or JOBDIR (or nothing: $PRIMUS_JOB_DIR, else ./primus-local)
// names.
std::filesystem::path job_dir_operand(const std::string& operand) {
  std::string dir = operand;
  if (dir.empty()) {
    const char* env = std::getenv("PRIMUS_JOB_DIR");
    dir = env != nullptr && *env != '\0' ? env : "primus-local";
  } else if (dir.find_first_not_of("0123456789_") == std::string::npos) {
    dir = job_dir_of_slurm_job(dir);
  }
  return absolute_from_here(dir);
}

// status.json of a job directory, read and parsed; an error that says why it cannot be.
std::pair<std::string, JobStatus> read_status(const std::filesystem::path& job_dir) {
  const std::filesystem::path file = job_dir / "status.json";
  std::ifstream in(file);
  if (!in) {
    const int error = errno;
    if (error == EACCES) {
      throw Error(file.string() +
                  ": permission denied (a job directory is readable by its "
                  "owner only)");
    }
    throw Error(file.string() + ": no status (" + std::strerror(error) +
                "; is it the job directory of a job that primus-launch started?)");
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return {text, parse_status(text)};
  } catch (const Error& e) {
    throw Error(file.string() + ": " + e.what());
  }
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// `primus-launch status [JOBID|JOBDIR] [--json] [--watch [--interval S]]`.
int status_command(const std::vector<std::string>& args) {
  std::string operand;
  bool json = false;
  bool watch = false;
  double interval = 2;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--json") {
      json = true;
    } else if (arg == "--watch" || arg == "-w") {
      watch = true;
    } else if (arg == "--interval" || arg == "-n" || arg.rfind("--interval=", 0) == 0) {
      std::string value;
      if (arg.rfind("--interval=", 0) == 0) {
        value = arg.substr(11);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      }
      char* end = nullptr;
      interval = std::strtod(value.c_str(), &end);
      if (value.empty() || end == nullptr || *end != '\0' || !(interval >= 0.1) ||
          interval > 3600) {
        throw cli::UsageError("status: --interval: expected seconds from 0.1 to 3600, got '" +
                              value + "'");
      }
    } else if (arg.rfind('-', 0) == 0) {
      throw cli::UsageError("status: unknown option '" + arg +
                            "' (expected --json, --watch, --interval S)");
    } else if (operand.empty()) {
      operand = arg;
    } else {
      throw cli::UsageError("status: expected at most one JOBID or JOBDIR");
    }
  }
  if (json && watch) throw cli::UsageError("status: --json and --watch do not go together");
  const std::filesystem::path dir = job_dir_operand(operand);
  if (!watch) {
    const auto [text, status] = read_status(dir);
    std::cout << (json ? text : status_view(status, unix_now()));
    return 0;
  }
  // Like watch(1): the screen cleared and the table drawn again, until interrupted.
  for (;;) {
    std::string screen;
    char header[128];
    std::snprintf(header, sizeof header, "Every %.1fs: primus-launch status %s", interval,
                  dir.string().c_str());
    screen += header;
    screen += "    " + utc_now_ms().substr(0, 19) + "Z\n\n";
    try {
      screen += status_view(read_status(dir).second, unix_now());
    } catch (const Error& e) {
      screen += std::string("primus-launch: ") + e.what() + "\n";
    }
    std::cout << "\033[H\033[2J" << screen << std::flush;
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
  }
}

// `primus-launch report [JOBID|JOBDIR] [--out DIR]`: python3 -m primus.report, with the Python
// found at configure time (PRIMUS_PYTHON overrides it).
int report_command(const std::vector<std::string>& args) {
  std::string operand;
  std::vector<std::string> extra;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--out" && i + 1 < args.size()) {
      extra = {"--out", absolute_from_here(args[++i]).string()};
    } else if (arg.rfind("--out=", 0) == 0) {
      extra = {"--out", absolute_from_here(arg.substr(6)).string()};
    } else if (arg.rfind('-', 0) == 0) {
      throw cli::UsageError("report: unknown option '" + arg + "' (expected --out DIR)");
    } else if (operand.empty()) {
      operand = arg;
    } else {
      throw cli::UsageError("report: expected at most one JOBID or JOBDIR");
    }
  }
  const std::filesystem::path dir = job_dir_operand(operand);
  if (!std::filesystem::exists(dir / "events.jsonl")) {
    throw Error(dir.string() +
                " is not the job directory of a primus-launch job (it has no "
                "events.jsonl)");
  }
  const char* given = std::getenv("PRIMUS_PYTHON");
  const std::string python = given != nullptr && *given != '\0' ? given : PRIMUS_PYTHON;
  // The package where `make install` put it (beside the bin directory primus-launch runs from,
  // so that an install moved whole, or `make install prefix=...`, keeps working; else where
  // configure put it), after any PYTHONPATH the user set.
  const char* path = std::getenv("PYTHONPATH");
  std::string python_path = path != nullptr && *path != '\0' ? std::string(path) + ":" : "";
  const std::filesystem::path beside =
      std::filesystem::path(self_executable()).parent_path().parent_path() /
      PRIMUS_PYEXECDIR_FROM_PREFIX;
  std::error_code error;
  if (std::filesystem::is_directory(beside / "primus", error)) python_path += beside.string() + ":";
  python_path += PRIMUS_PYEXECDIR;
  ::setenv("PYTHONPATH", python_path.c_str(), 1);
  std::vector<std::string> argv = {python, "-m", "primus.report", dir.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (std::string& arg : argv)
    pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  ::execvp(python.c_str(), pointers.data());
  std::cerr << "primus-launch: report: cannot run " << python << ": " << std::strerror(errno)
            << " (set PRIMUS_PYTHON to a python3 with the primus package and matplotlib)\n";
  return errno == ENOENT ? 127 : 126;
}

int stop_command(const std::vector<std::string>& args) {
  cli::Parser parser(" (see primus-launch --help)");
  parser.operands({});
  // Zero or one operand: the job directory.
  std::vector<std::string> rest = args;
  std::string dir;
  if (!rest.empty() && rest.front().rfind('-', 0) != 0) {
    dir = rest.front();
    rest.erase(rest.begin());
  }
  const cli::Parsed parsed = parser.parse(rest);
  if (parsed.help) {
    std::cout << kUsage;
    return 0;
  }
  if (dir.empty()) {
    const char* env = std::getenv("PRIMUS_JOB_DIR");
    dir = env != nullptr && *env != '\0' ? env : "primus-local";
  }
  if (!dir.empty() && dir.find_first_not_of("0123456789_") == std::string::npos) {
    dir = job_dir_of_slurm_job(dir);
  }
  const std::filesystem::path job_dir = absolute_from_here(dir);
  if (!std::filesystem::exists(job_dir / "events.jsonl")) {
    throw Error(job_dir.string() +
                " is not the job directory of a primus-launch job (it has no "
                "events.jsonl)");
  }
  const JobDir checked(job_dir);  // this user's alone, or an error
  const std::filesystem::path request = checked.stop_request_file();
  const std::filesystem::path temporary = request.string() + ".tmp";
  {
    const int fd =
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) throw Error("cannot write " + temporary.string() + ": " + std::strerror(errno));
    const std::string text = utc_now_ms() + "\n";
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!ok) throw Error("cannot write " + temporary.string());
  }
  std::filesystem::rename(temporary, request);
  std::cout << "primus-launch: asked the job in " << job_dir.string()
            << " to stop (its launcher sees it within a second)\n";
  return 0;
}

struct Settings {
  std::uint32_t nproc = 0;
  bool label = false;
  std::vector<std::string> command;
  std::vector<OptionLayer> layers;  // the environment's, then the command line's
  ResolvedOptions options;
};

Settings parse(const std::vector<std::string>& args, const Environment& env) {
  cli::Parser parser(" (see primus-launch --help)");
  parser.add({"version", cli::Arg::kNone, "", "", "the version"})
      .add({"label", cli::Arg::kNone, "", "", "prefix each output line with '<rank>: '"});
  cli::Option nproc_option{"nproc", cli::Arg::kRequired, "N", "a number of ranks from 1 to 4096",
                           "N ranks on this machine"};
  nproc_option.check = [](const std::string& value) -> std::optional<std::string> {
    const auto n = parse_unsigned(value, 4096);
    if (n && *n > 0) return std::nullopt;
    return "a number of ranks from 1 to 4096";
  };
  parser.add(std::move(nproc_option));
  parser.add_option_table().command("COMMAND");
  // --version, like --help, needs no command.
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (std::find(args.begin(), dashes, "--version") != dashes &&
      std::find(args.begin(), dashes, "--help") == dashes) {
    std::cout << "primus-launch " << PACKAGE_VERSION << "\n";
    std::exit(0);
  }
  const cli::Parsed parsed = parser.parse(args);
  Settings s;
  if (parsed.help) {
    std::cout << kUsage;
    std::exit(0);
  }
  const bool in_allocation = lookup(env, "SLURM_JOB_ID").has_value();
  if (parsed.has("nproc") && in_allocation) {
    throw cli::UsageError(
        "--nproc: runs the ranks on this machine only, and this is a Slurm allocation "
        "(SLURM_JOB_ID is set); run primus-launch outside one, or start the ranks with srun "
        "--primus");
  }
  if (!parsed.has("nproc") && !in_allocation) {
    throw cli::UsageError(
        "--nproc N is required outside a Slurm allocation (how many ranks to start)");
  }
  if (parsed.has("nproc")) {
    s.nproc = static_cast<std::uint32_t>(*parse_unsigned(*parsed.value("nproc"), 4096));
  }
  s.label = parsed.has("label");
  s.command = parsed.command;
  s.layers = {parse_environment_options(env),
              parse_command_line_options(OptionSource::kSrun, parsed.table)};
  s.options = ResolvedOptions::resolve(s.layers);
  return s;
}

std::uint32_t option_number(const ResolvedOptions& options, std::string_view name,
                            std::uint64_t max) {
  return static_cast<std::uint32_t>(parse_unsigned(options.value_or(name, "0"), max).value_or(0));
}

// PRIMUS_RESUME for the next attempt: the newest committed checkpoint under `root` that
// verifies, else the one the user gave, else none (rule 4 of "Preemption and requeue"). Newer
// checkpoints that fail the verification are named; a "resuming" event records the choice.
std::optional<std::string> resolve_resume(const std::filesystem::path& root,
                                          const std::optional<std::string>& given, EventLog& events,
                                          const std::string& node) {
  const NewestCheckpoint newest = find_newest_checkpoint(root, std::chrono::minutes(10));
  for (const std::string& why : newest.skipped)
    std::cerr << "primus-launch: not resuming from " << why << "\n";
  std::optional<std::string> point = resume_point(newest, given);
  if (point) {
    events.write({"resuming",
                  std::nullopt,
                  node,
                  {{"checkpoint", *point},
                   {"step", newest.step ? std::to_string(*newest.step) : ""},
                   {"source", newest.path ? "the newest valid checkpoint" : "PRIMUS_RESUME"}}});
  }
  return point;
}

bool dynamic_data(const ResolvedOptions& options) {
  return options.value_or("primus-data-mode", "static") == "dynamic";
}

// The dataset, checked and indexed before any rank starts; false (after saying why) when it
// cannot be read.
bool dataset_ready(const ResolvedOptions& options, const std::filesystem::path& job_dir,
                   EventLog& events, const std::string& node) {
  const auto check = check_dataset(options, job_dir, std::chrono::hours(24));
  if (!check) return true;
  const std::string spec = options.value_or("primus-data", "");
  if (!check->ok) {
    std::cerr << "primus-launch: the dataset (--primus-data=" << spec
              << ") cannot be read; no rank was started: " << check->message << "\n";
    events.write(
        {"dataset-failed", std::nullopt, node, {{"spec", spec}, {"error", check->message}}});
    return false;
  }
  events.write({"dataset-checked", std::nullopt, node, {{"spec", spec}}});
  return true;
}

std::chrono::milliseconds stop_grace_of(const ResolvedOptions& options) {
  return std::chrono::seconds(
      parse_unsigned(options.value_or("primus-stop-grace", "120"), std::uint64_t{7} * 24 * 3600)
          .value_or(120));
}

std::optional<std::chrono::milliseconds> hang_timeout_of(const ResolvedOptions& options) {
  const std::string hang = options.value_or("primus-hang-timeout", "off");
  if (hang == "off" || hang == "0") return std::nullopt;
  return std::chrono::seconds(parse_unsigned(hang, std::uint64_t{7} * 24 * 3600).value_or(0));
}

// What the policy needs of a Slurm attempt's report.
AttemptFacts facts_of(const SlurmAttemptResult& result, std::uint32_t world_size) {
  AttemptFacts facts;
  facts.ends = result.ends;
  facts.world_size = world_size;
  // A stop that the ranks reported (Slurm signalled them) is a stop as much as one the launcher
  // forwarded; one after a failure is the launcher's own.
  facts.stop_seen = (result.stop_forwarded || result.ranks_signalled) && !result.ended_for_failure;
  facts.user_stop = result.user_stop;
  facts.hung = result.hung;
  facts.lost_peers = result.lost_peers;
  facts.nodes = result.nodes;
  facts.exceptions = result.exceptions;
  facts.srun_status = result.srun_status;
  facts.requeued = result.requeued;
  return facts;
}

std::uint32_t env_number(const Environment& env, std::string_view name, std::uint32_t fallback) {
  const auto value = lookup(env, name);
  if (!value) return fallback;
  return static_cast<std::uint32_t>(parse_unsigned(*value, 1U << 30).value_or(fallback));
}

// The ranks of the step srun starts in this allocation with no layout options of its own.
std::uint32_t slurm_world_size(const Environment& env) {
  if (const auto n = env_number(env, "SLURM_NTASKS", 0); n > 0) return n;
  const std::uint32_t nodes =
      env_number(env, "SLURM_JOB_NUM_NODES", env_number(env, "SLURM_NNODES", 1));
  return std::max<std::uint32_t>(1, nodes);
}

// primus-task, what every task of the step runs: beside primus-launch in the build tree, else in
// the libexec directory beside the bin directory it is installed in (an install moved whole, or
// `make install prefix=...`, keeps working), else where configure put it.
std::string task_executable() {
  const std::filesystem::path self = self_executable();
  const std::filesystem::path candidates[] = {
      self.parent_path() / "primus-task",
      self.parent_path().parent_path() / "libexec" / "primus" / "primus-task",
      std::filesystem::path(PRIMUS_PKGLIBEXECDIR) / "primus-task"};
  for (const auto& path : candidates) {
    if (::access(path.c_str(), X_OK) == 0) return path.lexically_normal().string();
  }
  throw Error("cannot find primus-task, which every task of the step runs (looked in " +
              candidates[0].parent_path().string() + ", " + candidates[1].parent_path().string() +
              " and " + candidates[2].parent_path().string() + "); reinstall Primus");
}

// `exec primus-launch` matters for --signal=B:...: Slurm signals the batch shell, which does not
// pass the signal on to a child.
void warn_without_exec() {
  const auto comm = [](pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(in, name);
    return name;
  };
  const auto parent_of = [](pid_t pid) -> pid_t {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t ppid = -1;
    rest >> state >> ppid;
    return ppid;
  };
  // The batch script runs as slurm_script, a child of slurmstepd; exec'd, the launcher is that
  // child itself.
  const pid_t parent = ::getppid();
  if (comm(parent) != "slurmstepd" && comm(parent_of(parent)) == "slurmstepd") {
    std::cerr << "primus-launch: note: the batch script runs primus-launch without exec; a "
                 "signal for the batch shell (sbatch --signal=B:SIG@T) stops at the shell. "
                 "Write 'exec primus-launch ...' or use --signal=SIG@T (no B:).\n";
  }
}

// What the monitor needs from the options: intervals, --primus-metrics, --primus-metrics-file
// and the site's file_sd directory (PRIMUS_METRICS_SD_DIR, set by the plugin at submission).
JobMonitorSetup monitor_setup(const ResolvedOptions& options, const Environment& env,
                              const std::filesystem::path& job_dir, const std::string& job_id,
                              std::uint32_t allocation, const std::string& node) {
  JobMonitorSetup m;
  m.job_dir = job_dir;
  m.job_id = job_id;
  m.allocation = allocation;
  m.node = node;
  const auto interval = option_number(options, "primus-heartbeat-interval", 3600);
  m.status_interval = std::chrono::seconds(interval > 0 ? interval : 5);
  m.progress_interval =
      std::chrono::seconds(option_number(options, "primus-progress-interval", 3600));
  m.straggler_window_seconds = option_number(options, "primus-straggler-window", 3600);
  if (const auto metrics = options.get("primus-metrics")) {
    m.metrics = parse_listen_address(metrics->value);
    if (!m.metrics)
      throw cli::UsageError("--primus-metrics: expected [ADDR:]PORT, got '" + metrics->value + "'");
  }
  if (const auto file = options.get("primus-metrics-file")) {
    m.metrics_file = absolute_from_here(file->value);
  }
  // The site's file_sd directory: the plugin's metrics_sd_dir in the plugstack (a job submitted
  // with --primus also has it as PRIMUS_METRICS_SD_DIR).
  if (m.metrics && lookup(env, "SLURM_JOB_ID")) {
    const auto sd_dir = lookup(env, "PRIMUS_METRICS_SD_DIR");
    const auto site = sd_dir ? sd_dir : site_setting("metrics_sd_dir");
    if (site && !site->empty() && site->front() == '/') m.sd_dir = *site;
  }
  m.sd_name = job_id;
  m.terminal = ::isatty(STDERR_FILENO) == 1;
  return m;
}

// What --primus-spare-nodes, --primus-elastic and --primus-global-batch-size ask of the
// placement.
NodePolicy node_policy(const ResolvedOptions& options) {
  NodePolicy policy;
  policy.spare_nodes = option_number(options, "primus-spare-nodes", 1000);
  const std::string elastic = options.value_or("primus-elastic", "off");
  if (elastic != "off") policy.elastic_min = option_number(options, "primus-elastic", 100000);
  if (const auto batch = options.get("primus-global-batch-size")) {
    policy.global_batch = parse_unsigned(batch->value, std::uint64_t{1} << 40);
  }
  return policy;
}

// The nodes a hostlist names, in order; empty when it does not parse.
std::vector<std::string> hosts_of(const std::string& list) {
  try {
    return Hostlist::parse(list).expand();
  } catch (const std::exception&) {
    return {};
  }
}

// Which of `suspects` slurmctld says are lost (reason by node), asked once.
std::map<std::string, std::string> lost_among(const std::string& job,
                                              const std::set<std::string>& suspects) {
  std::map<std::string, std::string> lost;
  const auto facts = query_job(job);
  const std::vector<std::string> held =
      facts ? hosts_of(facts->node_list) : std::vector<std::string>{};
  for (const std::string& node : suspects) {
    const auto record = query_node(node);
    if (!record) continue;
    const bool in_job =
        !facts || held.empty() || std::find(held.begin(), held.end(), node) != held.end();
    const NodeVerdict verdict = judge_node(*record, in_job);
    if (verdict.lost) lost[node] = verdict.reason;
  }
  return lost;
}

// How many suspect nodes the launcher probes with a one-task step, one after the other.
constexpr std::size_t kMostNodesToProbe = 8;

// Whether `node`'s slurmd still starts a task of the job: a one-task step there (srun --overlap),
// which a live node runs in well under a second and a dead one never does.
bool node_answers(const std::string& srun, const std::string& job, const std::string& node) {
  const CommandOutput out =
      run_command({srun, "--jobid=" + job, "--overlap", "--mpi=none", "--nodes=1", "--ntasks=1",
                   "--nodelist=" + node, "--quiet", "true"},
                  std::chrono::seconds(20));
  return out.status == 0;
}

// After an attempt in which some ranks' wrappers never reported (docs/architecture.md, "Node
// failures"): the nodes among `suspects` that are lost, with slurmctld's reason. Asked at once;
// then the suspects whose slurmd does not start a task are waited for, every second up to
// `wait`, until slurmctld marks one lost (it marks a node whose slurmd fell silent DOWN after
// SlurmdTimeout; at once when an admin sets it DOWN). Nodes that still run tasks are not lost:
// their ranks failed (or hung) on their own.
std::map<std::string, std::string> find_lost_nodes(const std::string& srun, const std::string& job,
                                                   const std::set<std::string>& suspects,
                                                   std::chrono::seconds wait) {
  std::map<std::string, std::string> lost = lost_among(job, suspects);
  if (!lost.empty()) return lost;
  if (suspects.size() > kMostNodesToProbe) {
    // Most of the step said nothing (a step that never started, say): not one node's loss,
    // and probing them one by one would take minutes on a large job.
    return lost;
  }
  std::set<std::string> silent;
  for (const std::string& node : suspects)
    if (!node_answers(srun, job, node)) silent.insert(node);
  if (silent.empty()) return lost;
  std::string names;
  for (const std::string& node : silent)
    names += (names.empty() ? "" : ",") + node;
  std::cerr << "primus-launch: " << names << " started no task; waiting up to " << wait.count()
            << " s for slurmctld to say whether it is lost (SlurmdTimeout)\n";
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    lost = lost_among(job, silent);
    if (!lost.empty()) return lost;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::cerr << "primus-launch: slurmctld did not mark " << names
            << " lost; taking the failure for the ranks' own\n";
  return lost;
}

int slurm_launch(const Settings& s, const Environment& given_env, const ResolvedCommand& command) {
  const std::string job = *lookup(given_env, "SLURM_JOB_ID");
  // Run as a task of a step (srun --overlap -N1 -n1 primus-launch), the launcher starts the
  // ranks with the job's layout, not that step's one task.
  std::string resized;
  const Environment env =
      inside_a_step(given_env)
          ? job_layout_environment(given_env, query_job(job).value_or(JobFacts{}))
          : fit_to_allocation(given_env, resized);
  if (!resized.empty()) std::cerr << "primus-launch: " << resized << "\n";
  const std::string job_id = primus_job_id(env);
  // What `scontrol requeue` names: <array job>_<task> in an array (the array job's own id
  // would requeue every task).
  const std::string requeue_target =
      lookup(env, "SLURM_ARRAY_JOB_ID") && lookup(env, "SLURM_ARRAY_TASK_ID")
          ? *lookup(env, "SLURM_ARRAY_JOB_ID") + "_" + *lookup(env, "SLURM_ARRAY_TASK_ID")
          : job;
  const std::string submit_dir =
      lookup(env, "SLURM_SUBMIT_DIR").value_or(std::filesystem::current_path().string());
  const std::filesystem::path job_path =
      absolute_from_here(resolve_job_dir(s.options, submit_dir, job_id));
  const JobDir job_dir(job_path);
  const std::uint32_t allocation = env_number(env, "SLURM_RESTART_COUNT", 0);
  const std::uint32_t max_restarts = option_number(s.options, "primus-max-restarts", 1000);
  const std::uint32_t max_requeues = option_number(s.options, "primus-max-requeues", 1000);
  const int preempted = static_cast<int>(option_number(s.options, "primus-exit-preempted", 125));
  const std::optional<std::chrono::milliseconds> hang_timeout = hang_timeout_of(s.options);
  const ResolvedCommand srun = resolve_command("srun", std::getenv("PATH"));
  if (srun.status != 0) {
    std::cerr << "primus-launch: srun: " << srun.reason << " (inside an allocation the ranks "
              << "are started with srun)\n";
    return srun.status;
  }

  OptionLayer fixed;
  fixed.source = OptionSource::kSrun;
  fixed.values["primus-job-dir"] = job_path.string();
  std::vector<OptionLayer> layers = s.layers;
  layers.push_back(fixed);
  const ResolvedOptions options = ResolvedOptions::resolve(layers);

  // The job's secret when sbatch or salloc made one (--primus); otherwise one for this launch,
  // which srun's plugin keeps for the step.
  std::string secret = lookup(env, "PRIMUS_JOB_SECRET").value_or("");
  if (!os::is_job_secret(secret)) secret = os::make_job_secret();

  const std::string node = lookup(env, "SLURMD_NODENAME").value_or(this_hostname());
  std::string control_host;
  std::uint16_t control_port = 0;
  if (const auto given = options.get("primus-control-addr")) {
    const std::string& value = given->value;
    const auto colon = value.rfind(':');
    control_host = value.substr(0, colon);
    if (colon != std::string::npos) {
      control_port = static_cast<std::uint16_t>(*parse_unsigned(value.substr(colon + 1), 65535));
    }
    control_host = os::resolve_node_address(control_host, "--primus-control-addr");
  } else {
    control_host = os::resolve_node_address(
        node,
        "the control channel's address (this node's name; --primus-control-addr=HOST chooses "
        "one that every node of the job can reach)");
  }
  // --primus-spare-nodes and --primus-elastic: the launcher places the ranks itself, the same
  // number on each node, on the job's nodes less the spares (and, later, less the lost and
  // excluded nodes).
  const NodePolicy policy = node_policy(options);
  const bool placing = places_ranks(policy);
  const std::vector<std::string> job_nodes = hosts_of(
      lookup(env, "SLURM_JOB_NODELIST").value_or(lookup(env, "SLURM_NODELIST").value_or("")));
  std::uint32_t tasks_per_node = 1;
  if (const auto per_node = lookup(env, "SLURM_TASKS_PER_NODE")) {
    try {
      const TasksPerNode layout = TasksPerNode::parse(*per_node, "SLURM_TASKS_PER_NODE");
      tasks_per_node = layout.max_tasks();
      if (placing && layout.runs().size() != 1) {
        throw cli::UsageError(
            "--primus-spare-nodes and --primus-elastic need the same number of tasks on every "
            "node, and the job has SLURM_TASKS_PER_NODE=" +
            *per_node + " (submit with --ntasks-per-node)");
      }
    } catch (const cli::UsageError&) {
      throw;
    } catch (const std::exception&) {
      if (placing) throw;
    }
  }
  std::uint32_t rank_nodes = static_cast<std::uint32_t>(job_nodes.size());
  if (placing) {
    if (job_nodes.empty()) {
      throw Error(
          "--primus-spare-nodes/--primus-elastic: cannot read the job's nodes "
          "(SLURM_JOB_NODELIST)");
    }
    if (job_nodes.size() <= policy.spare_nodes) {
      throw cli::UsageError("--primus-spare-nodes=" + std::to_string(policy.spare_nodes) +
                            ": the job holds " + std::to_string(job_nodes.size()) +
                            " node(s); ask for that many nodes more than the ranks use (-N)");
    }
    rank_nodes = static_cast<std::uint32_t>(job_nodes.size()) - policy.spare_nodes;
    if (policy.elastic_min && *policy.elastic_min > rank_nodes) {
      throw cli::UsageError("--primus-elastic=" + std::to_string(*policy.elastic_min) +
                            ": the ranks use only " + std::to_string(rank_nodes) + " node(s)");
    }
  }
  const std::uint32_t world = placing ? rank_nodes * tasks_per_node : slurm_world_size(env);
  // Restarts after a lost node: at least one per spare, and one per node the job may shrink by.
  const std::uint32_t node_restarts =
      policy.spare_nodes + (policy.elastic_min ? rank_nodes - *policy.elastic_min : 0);
  const NodeExclusions exclusions(job_path / "excluded-nodes.json");
  RankFailures rank_failures(
      std::max<std::uint32_t>(1, option_number(options, "primus-exclude-after", 1000)));
  std::set<std::string> lost_nodes;  // lost in this allocation (not all of them excluded yet)
  std::vector<std::string> current_nodes = job_nodes;
  block_launcher_signals();  // before the control channel's thread starts
  ControlServer control(control_host, control_port, secret, world, [](const std::string& line) {
    std::cerr << "primus-launch: control channel: " << line << "\n";
  });
  EventLog events(job_dir.events_file(), allocation);
  JobMonitor monitor(monitor_setup(options, env, job_path, job_id, allocation, node), events);
  warn_without_exec();
  monitor.set_excluded_nodes(excluded_for_status(exclusions));
  // `primus-launch status JOBID` finds a job directory that is not the default one through the
  // job's Comment (when the user left it empty). Recorded once the first srun has started: the
  // two scontrol calls then overlap the step's start instead of delaying it.
  bool comment_pending = job_path != absolute_from_here(submit_dir) / ("primus-" + job_id);
  const auto record_job_dir = [&] {
    if (!comment_pending) return;
    comment_pending = false;
    if (const auto facts = query_job(job); facts && facts->comment.empty()) {
      if (const auto error = set_job_comment(job, job_dir_comment(job_path.string()))) {
        std::cerr << "primus-launch: note: cannot record the job directory in the job's Comment ("
                  << *error << "); primus-launch status needs JOBDIR for this job\n";
      }
    }
  };

  std::string command_text;
  for (const std::string& word : s.command)
    command_text += (command_text.empty() ? "" : " ") + word;
  events.write({"launched",
                std::nullopt,
                node,
                {{"job", job_id},
                 {"ranks", std::to_string(world)},
                 {"command", command_text},
                 {"mode", "slurm"},
                 {"control", control.address()}}});

  if (!dataset_ready(options, job_path, events, node)) return kExitUsage;
  const std::string task = task_executable();
  const std::filesystem::path ckpt_root = resolve_ckpt_dir(options, submit_dir, job_path.string());
  const std::optional<std::string> given_resume = lookup(env, "PRIMUS_RESUME");
  if (!placing) {
    // The ranks take every node of the allocation: none of them may be one the job excluded
    // (given by Slurm to a job requeued without its ExcNodeList, by hand or by Slurm itself).
    std::string held;
    for (const Exclusion& e : exclusions.load()) {
      if (std::find(job_nodes.begin(), job_nodes.end(), e.node) == job_nodes.end()) continue;
      held += (held.empty() ? "" : "; ") + e.node + " (" + e.reason + ")";
    }
    if (!held.empty()) {
      const std::string why = "the allocation includes nodes this job excluded: " + held +
                              "; submit with --exclude=NODES, or with --primus-spare-nodes=K and K "
                              "nodes more (" +
                              (job_path / "excluded-nodes.json").string() + ")";
      std::cerr << "primus-launch: not starting the ranks: " << why << "\n";
      events.write({"failed", std::nullopt, node, {{"exit_status", "1"}, {"reason", why}}});
      monitor.set_state("failed");
      return 1;
    }
  }
  for (std::uint32_t attempt = 0;; ++attempt) {
    events.set_attempt(attempt);
    SlurmAttemptSetup setup;
    setup.after_start = record_job_dir;
    setup.srun = srun.path;
    setup.argv = {"--export=ALL", "--kill-on-bad-exit=0"};
    std::uint32_t attempt_world = world;
    std::optional<Placement> placement;
    if (placing) {
      if (attempt > 0) {
        // A --no-kill job that lost a node holds fewer now (slurmctld's NodeList).
        if (const auto facts = query_job(job); facts && !hosts_of(facts->node_list).empty()) {
          current_nodes = hosts_of(facts->node_list);
        }
      }
      std::set<std::string> excluded = exclusions.nodes();
      excluded.insert(lost_nodes.begin(), lost_nodes.end());
      std::string why;
      placement = place(current_nodes, excluded, rank_nodes, tasks_per_node, policy, attempt, why);
      if (!placement) {
        std::cerr << "primus-launch: cannot start the ranks: " << why << "\n";
        events.write({"failed", std::nullopt, node, {{"exit_status", "1"}, {"reason", why}}});
        monitor.set_state("failed");
        return 1;
      }
      if (!placement->note.empty()) std::cerr << "primus-launch: " << placement->note << "\n";
      attempt_world = placement->world_size;
      Hostlist list;
      for (const std::string& host : placement->nodes)
        list.push_host(host);
      // Explicit sizes and nodes: after a lost node the allocation's SLURM_* sizes are stale, and
      // srun would ask for the old task count (TESTBED.md, "Losing a node").
      setup.argv.push_back("--nodes=" + std::to_string(placement->nodes.size()));
      setup.argv.push_back("--ntasks=" + std::to_string(attempt_world));
      setup.argv.push_back("--ntasks-per-node=" + std::to_string(tasks_per_node));
      setup.argv.push_back("--nodelist=" + list.compress());
      events.write({"placed",
                    std::nullopt,
                    node,
                    {{"nodes", list.compress()},
                     {"ranks", std::to_string(attempt_world)},
                     {"shrunk", placement->shrunk ? "true" : "false"}}});
    }
    if (s.label) setup.argv.emplace_back("--label");
    setup.argv.push_back(task);
    setup.argv.emplace_back("--");
    setup.argv.push_back(command.path);
    setup.argv.insert(setup.argv.end(), s.command.begin() + 1, s.command.end());
    const std::filesystem::path log_dir = job_dir.attempt_logs(allocation, attempt);
    Environment step_env = env;
    for (const auto& [name, resolved] : options.all()) {
      const OptionSpec* spec = find_option(name);
      if (spec != nullptr && !spec->env.empty()) step_env[std::string(spec->env)] = resolved.value;
    }
    if (!lookup(step_env, "PRIMUS_FRAMEWORK")) step_env["PRIMUS_FRAMEWORK"] = "pytorch";
    step_env["PRIMUS_JOB_SECRET"] = secret;
    step_env["PRIMUS_CONTROL"] = control.address();
    step_env["PRIMUS_LAUNCH_RESTARTS"] = std::to_string(attempt);
    step_env["PRIMUS_LAUNCH_LOG_DIR"] = log_dir.string();
    const std::optional<std::string> resume = resolve_resume(ckpt_root, given_resume, events, node);
    if (resume) {
      step_env["PRIMUS_RESUME"] = *resume;
    } else {
      step_env.erase("PRIMUS_RESUME");
    }
    if (placing) {  // the sizes of this step and of the allocation as it is now
      step_env["SLURM_NTASKS"] = step_env["SLURM_NPROCS"] = std::to_string(attempt_world);
      step_env["SLURM_JOB_NUM_NODES"] = step_env["SLURM_NNODES"] =
          std::to_string(current_nodes.size());
    }
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(22, 5, 0) && \
    SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 2, 0)
    // Slurm 22.05's PMIx direct connections race at step start (docs/collectives.md).
    if (!lookup(step_env, "SLURM_PMIX_DIRECT_CONN")) step_env["SLURM_PMIX_DIRECT_CONN"] = "false";
#endif
    for (const auto& [name, value] : step_env) {
      std::string entry = name;
      entry += '=';
      entry += value;
      setup.env.push_back(std::move(entry));
    }
    setup.job = job;
    setup.world_size = attempt_world;
    setup.attempt = attempt;
    setup.hang_timeout = hang_timeout;
    setup.stop_grace = stop_grace_of(options);
    setup.stop_request = job_dir.stop_request_file();
    monitor.start_attempt(attempt, attempt_world);
    setup.monitor = &monitor;
    setup.node = node;
    setup.preempted_status = preempted;
    setup.requeue_target = requeue_target;
    setup.may_requeue_at_time_limit = allocation < max_requeues;
    for (const std::string& excluded : exclusions.nodes())
      setup.excluded_nodes.push_back(excluded);
    DataTasks data(attempt_world);  // every attempt opens the queue again, from its checkpoint
    if (dynamic_data(options)) setup.data = &data;

    const SlurmAttemptResult result = run_slurm_attempt(setup, control, events);
    AttemptFacts facts = facts_of(result, attempt_world);
    JobSituation situation;
    situation.slurm = true;
    situation.attempt = attempt;
    situation.allocation = allocation;
    situation.max_restarts = max_restarts;
    situation.max_requeues = max_requeues;
    situation.preempted_status = preempted;
    situation.placing = placing;
    situation.node_restarts = node_restarts;
    if (ends_as_a_stop(situation, facts)) {
      if (const auto state = query_job(job)) {
        facts.preempted = state->preempted;
        facts.job_state = state->state;
      }
    } else if (!facts.requeued && result.ends.size() < attempt_world) {
      // Ranks whose wrappers never reported: was their node lost? (docs/architecture.md, "Node
      // failures": the wrappers report every end of a rank they see.)
      std::set<std::uint32_t> reported;
      for (const RankEnd& end : result.ends)
        reported.insert(static_cast<std::uint32_t>(end.rank));
      const std::vector<std::string>& step_nodes = placement ? placement->nodes : job_nodes;
      const auto suspects = suspect_nodes(step_nodes, tasks_per_node, result.nodes, reported);
      if (!suspects.empty()) {
        static const std::chrono::seconds wait =
            query_slurmd_timeout().value_or(std::chrono::seconds(300)) + std::chrono::seconds(10);
        facts.lost_nodes = find_lost_nodes(srun.path, job, suspects, wait);
      }
      if (!facts.lost_nodes.empty() && placing && attempt < std::max(max_restarts, node_restarts)) {
        if (const auto facts_now = query_job(job);
            facts_now && !hosts_of(facts_now->node_list).empty()) {
          current_nodes = hosts_of(facts_now->node_list);
        }
        std::set<std::string> excluded = exclusions.nodes();
        excluded.insert(lost_nodes.begin(), lost_nodes.end());
        for (const auto& [lost, reason] : facts.lost_nodes)
          excluded.insert(lost);
        facts.placement_after_loss = place(current_nodes, excluded, rank_nodes, tasks_per_node,
                                           policy, attempt + 1, facts.placement_why)
                                         .has_value();
      }
    }
    for (const auto& [lost, reason] : facts.lost_nodes)
      lost_nodes.insert(lost);
    situation.excluded = exclusions.nodes();
    const Action action = after_attempt(situation, facts, rank_failures);
    Supervision supervision(events, monitor, &exclusions);
    supervision.node = node;
    supervision.job_id = job_id;
    supervision.requeue_target = requeue_target;
    supervision.allocation = allocation;
    supervision.attempt = attempt;
    supervision.max_restarts = max_restarts;
    supervision.max_requeues = max_requeues;
    supervision.preempted_status = preempted;
    supervision.log_dir = log_dir;
    supervision.resume = resume;
    supervision.checkpoint = result.checkpoint;
    supervision.checkpoint_committed = result.checkpoint_committed;
    supervision.any_rank_connected = result.any_rank_connected;
    if (carry_out(action, facts, supervision)) continue;
    return action.exit_status;
  }
}

int launch(const std::vector<std::string>& args) {
  raise_open_file_limit();
  const Environment env = process_environment();
  Settings s = parse(args, env);
  const ResolvedCommand command = resolve_command(s.command.front(), std::getenv("PATH"));
  if (command.status != 0) {
    std::cerr << "primus-launch: " << s.command.front() << ": " << command.reason << "\n";
    return command.status;
  }
  if (s.nproc == 0) return slurm_launch(s, env, command);
  const std::uint32_t max_restarts = option_number(s.options, "primus-max-restarts", 1000);
  const int preempted = static_cast<int>(option_number(s.options, "primus-exit-preempted", 125));

  // The job directory: --primus-job-dir (or PRIMUS_JOB_DIR), else ./primus-local, so that the
  // same command in the same directory resumes.
  const auto given_dir = s.options.get("primus-job-dir");
  const std::filesystem::path job_path =
      absolute_from_here(given_dir ? given_dir->value : std::string("primus-local"));
  const JobDir job_dir(job_path);
  // The ranks get that directory as an absolute path (and their checkpoints below it, unless
  // --primus-ckpt-dir says otherwise).
  OptionLayer fixed;
  fixed.source = OptionSource::kSrun;
  fixed.values["primus-job-dir"] = job_path.string();
  std::vector<OptionLayer> layers = s.layers;
  layers.push_back(fixed);
  const ResolvedOptions options = ResolvedOptions::resolve(layers);

  const std::uint32_t allocation = job_dir.next_allocation();
  EventLog events(job_dir.events_file(), allocation);
  const std::string node = this_hostname();

  OneMachineJob job;
  job.nproc = s.nproc;
  job.hostname = node;
  job.job_id = "local-" + std::to_string(::getpid());
  job.submit_dir = std::filesystem::current_path().string();
  job.port_seed = static_cast<std::uint64_t>(::getpid());
  job.job_secret = os::make_job_secret();
  // Before any thread starts: every thread must have the stop signals blocked, so that they
  // reach the signalfd only.
  block_launcher_signals();
  // The ranks report on this machine's loopback: heartbeats, checkpoints, hangs.
  ControlServer control("127.0.0.1", 0, job.job_secret, s.nproc, [](const std::string& line) {
    std::cerr << "primus-launch: control channel: " << line << "\n";
  });
  const std::optional<std::chrono::milliseconds> hang_timeout = hang_timeout_of(s.options);

  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Reaper reaper;
  JobMonitor monitor(monitor_setup(options, env, job_path, job.job_id, allocation, node), events);

  std::string command_text;
  for (const std::string& word : s.command)
    command_text += (command_text.empty() ? "" : " ") + word;
  events.write(
      {"launched",
       std::nullopt,
       node,
       {{"nproc", std::to_string(s.nproc)}, {"command", command_text}, {"mode", "one machine"}}});
  if (!dataset_ready(options, job_path, events, node)) return kExitUsage;
  const std::filesystem::path ckpt_root =
      resolve_ckpt_dir(options, job.submit_dir, job_path.string());
  const std::optional<std::string> given_resume = lookup(env, "PRIMUS_RESUME");
  for (std::uint32_t attempt = 0;; ++attempt) {
    events.set_attempt(attempt);
    job.restart_count = attempt;
    const std::optional<std::string> resume = resolve_resume(ckpt_root, given_resume, events, node);
    AttemptSetup setup;
    setup.executable = command.path;
    setup.argv = s.command;
    setup.log_dir = job_dir.attempt_logs(allocation, attempt);
    setup.label = s.label;
    setup.stop_request = job_dir.stop_request_file();
    setup.node = node;
    for (std::uint32_t rank = 0; rank < s.nproc; ++rank) {
      Environment rank_env = env;
      rank_env.erase("PRIMUS_JOB_SECRET");
      for (const auto& [name, value] : one_machine_environment(job, rank, env, options))
        rank_env[name] = value;
      rank_env["PRIMUS_LAUNCH_RESTARTS"] = std::to_string(attempt);
      rank_env["PRIMUS_CONTROL"] = control.address();
      if (resume) {
        rank_env["PRIMUS_RESUME"] = *resume;
      } else {
        rank_env.erase("PRIMUS_RESUME");
      }
      std::vector<std::string> list;
      list.reserve(rank_env.size());
      for (const auto& [name, value] : rank_env) {
        std::string entry = name;
        entry += '=';
        entry += value;
        list.push_back(std::move(entry));
      }
      setup.envs.push_back(std::move(list));
    }
    setup.control = &control;
    setup.attempt = attempt;
    monitor.start_attempt(attempt, s.nproc);
    setup.monitor = &monitor;
    setup.hang_timeout = hang_timeout;
    setup.stop_grace = stop_grace_of(options);
    setup.preempted_status = preempted;
    DataTasks data(s.nproc);  // every attempt opens the queue again, from its checkpoint
    if (dynamic_data(options)) setup.data = &data;
    const AttemptResult result = run_attempt(setup, reaper, events);
    AttemptFacts facts;
    facts.ends = result.ends;
    facts.world_size = s.nproc;
    facts.stop_seen = result.stop_requested;
    facts.hung = result.hung;
    facts.lost_peers = result.lost_peers;
    JobSituation situation;
    situation.attempt = attempt;
    situation.max_restarts = max_restarts;
    situation.preempted_status = preempted;
    RankFailures no_nodes(1);  // one machine: no node to exclude
    const Action action = after_attempt(situation, facts, no_nodes);
    Supervision supervision(events, monitor, nullptr);
    supervision.node = node;
    supervision.job_id = job.job_id;
    supervision.allocation = allocation;
    supervision.attempt = attempt;
    supervision.max_restarts = max_restarts;
    supervision.preempted_status = preempted;
    supervision.log_dir = setup.log_dir;
    supervision.resume = resume;
    if (carry_out(action, facts, supervision)) continue;
    return action.exit_status;
  }
}

}  // namespace
}  // namespace primus::launch

int main(int argc, char** argv) {
  using namespace primus::launch;
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args.front() == "status") {
      return status_command(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    if (!args.empty() && args.front() == "report") {
      return report_command(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    if (!args.empty() && args.front() == "stop") {
      return stop_command(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    return launch(args);
  } catch (const std::exception& e) {
    std::cerr << "primus-launch: " << e.what() << "\n";
    return kExitUsage;
  }
}
