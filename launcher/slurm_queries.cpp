#include "slurm_queries.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <iostream>
#include <sstream>

#include "outcome.hpp"

namespace primus::launch {
namespace {

bool starts_a_key(const std::string& word) {
  const auto eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  if (std::isupper(static_cast<unsigned char>(word[0])) == 0) return false;
  return std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(eq), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':' || c == '/';
  });
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? abbrev : std::to_string(sig);
}

}  // namespace

std::map<std::string, std::string> parse_scontrol_record(const std::string& line) {
  std::map<std::string, std::string> record;
  std::istringstream words(line);
  std::string last;
  for (std::string word; words >> word;) {
    if (starts_a_key(word)) {
      const auto eq = word.find('=');
      last = word.substr(0, eq);
      record[last] = word.substr(eq + 1);
    } else if (!last.empty()) {
      record[last] += " " + word;
    }
  }
  return record;
}

JobFacts job_facts(const std::map<std::string, std::string>& record) {
  JobFacts facts;
  if (const auto it = record.find("JobState"); it != record.end()) facts.state = it->second;
  if (const auto it = record.find("PreemptTime"); it != record.end()) {
    facts.preempt_time = it->second;
    facts.preempted = !it->second.empty() && it->second != "None" && it->second != "Unknown";
  }
  if (const auto it = record.find("NumNodes"); it != record.end()) facts.num_nodes = it->second;
  if (const auto it = record.find("NumTasks"); it != record.end()) facts.num_tasks = it->second;
  return facts;
}

CommandOutput run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  CommandOutput result;
  int fds[2];
  if (argv.empty() || ::pipe2(fds, O_CLOEXEC) != 0) return result;
  std::vector<std::string> args = argv;
  std::vector<char*> pointers;
  pointers.reserve(args.size() + 1);
  for (std::string& arg : args)
    pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execvp(pointers[0], pointers.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const auto until = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fd{fds[0], POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    result.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = status;
  return result;
}

std::optional<JobFacts> query_job(const std::string& job) {
  const CommandOutput out =
      run_command({"scontrol", "show", "job", "-o", job}, std::chrono::seconds(30));
  if (out.status != 0) {
    std::cerr << "primus-launch: scontrol show job " << job << " failed: " << out.output;
    return std::nullopt;
  }
  return job_facts(parse_scontrol_record(out.output));
}

bool signal_job(const std::string& target, int sig) {
  const CommandOutput out =
      run_command({"scancel", "--signal=" + signal_name(sig), target}, std::chrono::seconds(30));
  if (out.status != 0) {
    std::cerr << "primus-launch: scancel --signal=" << signal_name(sig) << " " << target
              << " failed: " << out.output;
  }
  return out.status == 0;
}

bool cancel(const std::string& target) {
  const CommandOutput out = run_command({"scancel", target}, std::chrono::seconds(30));
  if (out.status != 0)
    std::cerr << "primus-launch: scancel " << target << " failed: " << out.output;
  return out.status == 0;
}

std::optional<std::string> requeue_job(const std::string& job) {
  const CommandOutput out = run_command({"scontrol", "requeue", job}, std::chrono::seconds(30));
  if (out.status == 0) return std::nullopt;
  return out.output.empty() ? std::string("scontrol requeue failed") : out.output;
}

}  // namespace primus::launch
