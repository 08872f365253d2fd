// primus-launch: one per allocation, it starts and supervises the ranks of a job (docs/man/
// primus-launch.1, docs/architecture.md "The launcher and its control channel"). This is the
// one-machine mode: --nproc N ranks on this machine, with the rank environment the plugin gives
// ranks under srun; the Slurm mode follows.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "../common/cli/command_line.hpp"
#include "command_path.hpp"
#include "events.hpp"
#include "job_dir.hpp"
#include "local_attempt.hpp"
#include "outcome.hpp"
#include "primus/common.hpp"
#include "primus/os/job_secret.hpp"
#include "reaper.hpp"

extern char** environ;

namespace primus::launch {
namespace {

constexpr const char* kUsage =
    "Usage: primus-launch [options] --nproc N -- COMMAND [ARGS...]\n"
    "       primus-launch stop [JOBDIR]\n"
    "\n"
    "Starts COMMAND once per rank with the rank environment of primus(7) (RANK, WORLD_SIZE,\n"
    "LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...), supervises the ranks and ends them together.\n"
    "  --nproc N          N ranks on this machine (outside a Slurm allocation)\n"
    "  --label            prefix every output line with '<rank>: '\n"
    "  --help, --version\n"
    "Every --primus option of srun and sbatch is accepted (see primus(7)); PRIMUS_* variables\n"
    "apply below them. Among them: --primus-max-restarts=N (start the ranks again after a\n"
    "failure, default 0), --primus-exit-preempted=STATUS (75), --primus-job-dir=PATH\n"
    "(default ./primus-local: logs, events.jsonl, checkpoints).\n"
    "\n"
    "stop [JOBDIR]: asks the launcher of the job in JOBDIR (default $PRIMUS_JOB_DIR, else\n"
    "./primus-local) to stop its ranks gracefully; they save and exit, and it exits 75.\n"
    "\n"
    "Exit status: 0 the ranks finished; 75 they stopped as asked; 2 a usage or configuration\n"
    "error; 126/127 COMMAND cannot run or is not found; otherwise the first failing rank's\n"
    "status (128+N for signal N).\n";

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

// The last `count` lines of a file, for the root cause.
std::vector<std::string> last_lines(const std::filesystem::path& path, std::size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > count) lines.pop_front();
  }
  return {lines.begin(), lines.end()};
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
    throw cli::UsageError("stop " + dir +
                          ": stopping a Slurm job by its id needs the Slurm mode of "
                          "primus-launch, which is not built yet; give the job directory");
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
  if (!parsed.has("nproc")) {
    throw cli::UsageError(
        in_allocation
            ? "inside a Slurm allocation primus-launch starts the ranks with srun, which this "
              "version does not do yet: give --nproc N outside the allocation, or use srun "
              "--primus"
            : "--nproc N is required outside a Slurm allocation (how many ranks to start)");
  }
  s.nproc = static_cast<std::uint32_t>(*parse_unsigned(*parsed.value("nproc"), 4096));
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

int launch(const std::vector<std::string>& args) {
  const Environment env = process_environment();
  Settings s = parse(args, env);
  const ResolvedCommand command = resolve_command(s.command.front(), std::getenv("PATH"));
  if (command.status != 0) {
    std::cerr << "primus-launch: " << s.command.front() << ": " << command.reason << "\n";
    return command.status;
  }
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

  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Reaper reaper;
  block_launcher_signals();

  std::string command_text;
  for (const std::string& word : s.command)
    command_text += (command_text.empty() ? "" : " ") + word;
  events.write(
      {"launched",
       std::nullopt,
       node,
       {{"nproc", std::to_string(s.nproc)}, {"command", command_text}, {"mode", "one machine"}}});
  for (std::uint32_t attempt = 0;; ++attempt) {
    events.set_attempt(attempt);
    job.restart_count = attempt;
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
    const AttemptResult result = run_attempt(setup, reaper, events);
    const Outcome outcome = judge(result.ends, result.stop_requested, preempted);
    const Decision decision = decide(outcome, attempt, max_restarts, preempted);
    if (outcome.verdict == Verdict::kFailed && outcome.cause) {
      const RankEnd& cause = *outcome.cause;
      const std::filesystem::path log = setup.log_dir / rank_log_name(cause.rank);
      std::cerr << "primus-launch: rank " << cause.rank << " on " << node
                << " failed first: " << describe(cause.wait_status) << " (attempt " << attempt
                << "); the last lines of " << log.string() << ":\n";
      for (const std::string& line : last_lines(log, 10))
        std::cerr << "  | " << line << "\n";
    }
    if (decision.restart) {
      std::cerr << "primus-launch: starting the ranks again (restart " << attempt + 1 << " of "
                << max_restarts << ")\n";
      events.set_attempt(attempt + 1);
      events.write({"restarted", std::nullopt, node, {{"restart", std::to_string(attempt + 1)}}});
      continue;
    }
    switch (outcome.verdict) {
      case Verdict::kFinished:
        events.write({"finished", std::nullopt, node, {{"exit_status", "0"}}});
        break;
      case Verdict::kStopped:
        events.write({"finished",
                      std::nullopt,
                      node,
                      {{"exit_status", std::to_string(decision.exit_status)},
                       {"reason", "the ranks stopped as asked"}}});
        break;
      case Verdict::kFailed:
        events.write(
            {"failed",
             outcome.cause ? std::optional<std::uint32_t>(outcome.cause->rank) : std::nullopt,
             node,
             {{"exit_status", std::to_string(decision.exit_status)},
              {"status", outcome.cause ? describe(outcome.cause->wait_status) : ""}}});
        break;
    }
    return decision.exit_status;
  }
}

}  // namespace
}  // namespace primus::launch

int main(int argc, char** argv) {
  using namespace primus::launch;
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args.front() == "stop") {
      return stop_command(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    return launch(args);
  } catch (const std::exception& e) {
    std::cerr << "primus-launch: " << e.what() << "\n";
    return kExitUsage;
  }
}
