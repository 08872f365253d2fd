// primus-launch status, report and stop (job_commands.hpp).
#include "cli/job_commands.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "../../common/cli/command_line.hpp"
#include "cli/launch_settings.hpp"
#include "cli/self_process.hpp"
#include "monitor/status.hpp"
#include "monitor/status_view.hpp"
#include "primus/common/error.hpp"
#include "primus/common/rank_env.hpp"
#include "slurm/slurm_queries.hpp"
#include "supervise/events.hpp"
#include "supervise/job_dir.hpp"

namespace primus::launch {
namespace {

// The last line a command printed that says something, whole (scontrol prints its cause last,
// after lines of how it looked for slurmctld).
std::string last_line(const std::string& output) {
  std::string last;
  std::size_t start = 0;
  while (start <= output.size()) {
    const std::size_t end = std::min(output.find('\n', start), output.size());
    const std::string line = output.substr(start, end - start);
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    start = end + 1;
  }
  return last.empty() ? std::string("no output") : last;
}

// The job directory of Slurm job JOBID as primus-launch makes it by default: primus-<JOBID> in
// the job's submit directory (scontrol's WorkDir).
std::string job_dir_of_slurm_job(const std::string& job) {
  const CommandOutput out =
      run_command({"scontrol", "show", "job", "-o", job}, std::chrono::seconds(30));
  if (out.status != 0) {
    throw Error("job " + job + ": scontrol show job failed (" + last_line(out.output) +
                "); after slurmctld forgets a job, or outside Slurm, give its job directory "
                "instead (on one machine ./primus-local)");
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

// The job directory that JOBID or JOBDIR (or nothing: $PRIMUS_JOB_DIR, else ./primus-local)
// names.
std::filesystem::path job_dir_operand(const std::string& operand) {
  std::string dir = operand;
  if (dir.empty()) {
    const char* env = std::getenv("PRIMUS_JOB_DIR");
    dir = env != nullptr && *env != '\0' ? env : default_job_dir_name("", true);
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
}  // namespace

int status_command(const std::vector<std::string>& args, const char* usage) {
  std::string operand;
  bool json = false;
  bool watch = false;
  double interval = 2;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
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
int report_command(const std::vector<std::string>& args, const char* usage) {
  std::string operand;
  std::vector<std::string> extra;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
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
  const std::string python = python_for_scripts();
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
  std::vector<char*> pointers(argv.size() + 1, nullptr);
  std::transform(argv.begin(), argv.end(), pointers.begin(),
                 [](std::string& arg) { return arg.data(); });
  ::execvp(python.c_str(), pointers.data());
  std::cerr << "primus-launch: report: cannot run " << python << ": " << std::strerror(errno)
            << " (set PRIMUS_PYTHON to a python3 with the primus package and matplotlib)\n";
  return errno == ENOENT ? 127 : 126;
}

int stop_command(const std::vector<std::string>& args, const char* usage) {
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
    std::cout << usage;
    return 0;
  }
  if (dir.empty()) {
    const char* env = std::getenv("PRIMUS_JOB_DIR");
    dir = env != nullptr && *env != '\0' ? env : default_job_dir_name("", true);
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

}  // namespace primus::launch
