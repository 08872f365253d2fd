#include "slurm/slurm_queries.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "primus/common/hostlist.hpp"
#include "primus/common/parse_number.hpp"
#include "supervise/outcome.hpp"

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
    facts.preempted_at = parse_slurm_time(it->second);
  }
  if (const auto it = record.find("Partition"); it != record.end()) facts.partition = it->second;
  if (const auto it = record.find("NumNodes"); it != record.end()) facts.num_nodes = it->second;
  if (const auto it = record.find("NumTasks"); it != record.end()) facts.num_tasks = it->second;
  if (const auto it = record.find("Comment"); it != record.end() && it->second != "(null)") {
    facts.comment = it->second;
  }
  if (const auto it = record.find("EndTime"); it != record.end()) {
    facts.end_time = parse_slurm_time(it->second);
  }
  if (const auto it = record.find("NodeList"); it != record.end() && it->second != "(null)") {
    facts.node_list = it->second;
  }
  if (const auto it = record.find("ExcNodeList"); it != record.end() && it->second != "(null)") {
    facts.excluded = it->second;
  }
  return facts;
}

std::optional<std::time_t> parse_slurm_time(const std::string& text) {
  std::tm parts{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &parts);
  if (end == nullptr || *end != '\0') return std::nullopt;
  parts.tm_isdst = -1;  // whatever the zone says for that date
  const std::time_t seconds = std::mktime(&parts);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  return seconds;
}

std::optional<JobFacts> query_job(const std::string& job, bool idle) {
  const CommandOutput out = run_command({"scontrol", "show", "job", "-o", job},
                                        std::chrono::seconds(30), /*shielded=*/false, idle);
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

namespace {
constexpr std::string_view kJobDirComment = "primus-job-dir=";
}  // namespace

std::string job_dir_comment(const std::string& job_dir) {
  return std::string(kJobDirComment) + job_dir;
}

std::optional<std::string> job_dir_from_comment(const std::string& comment) {
  if (comment.rfind(kJobDirComment, 0) != 0 || comment.size() == kJobDirComment.size()) {
    return std::nullopt;
  }
  return comment.substr(kJobDirComment.size());
}

std::optional<std::string> set_job_comment(const std::string& job, const std::string& text) {
  const CommandOutput out =
      run_command({"scontrol", "update", "JobId=" + job, "Comment=" + text},
                  std::chrono::seconds(30), /*shielded=*/false, /*idle=*/true);
  if (out.status == 0) return std::nullopt;
  return out.output.empty() ? std::string("scontrol update failed") : out.output;
}

std::vector<std::string> primus_plugstack_arguments(const std::string& plugstack) {
  std::istringstream lines(plugstack);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::vector<std::string> all;
    for (std::string word; words >> word;)
      all.push_back(word);
    if (all.size() < 2 || (all[0] != "required" && all[0] != "optional")) continue;
    const std::string& path = all[1];
    const auto slash = path.rfind('/');
    if (path.substr(slash == std::string::npos ? 0 : slash + 1) != "primus.so") continue;
    return {all.begin() + 2, all.end()};
  }
  return {};
}

std::optional<std::string> site_setting(const std::string& key) {
  const CommandOutput out = run_command({"scontrol", "show", "config"}, std::chrono::seconds(30));
  if (out.status != 0) return std::nullopt;
  std::istringstream lines(out.output);
  std::string path;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("PlugStackConfig", 0) != 0) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) break;
    path = line.substr(line.find_first_not_of(' ', eq + 1));
    break;
  }
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string& argument : primus_plugstack_arguments(text)) {
    if (argument.rfind(key + "=", 0) == 0) return argument.substr(key.size() + 1);
  }
  return std::nullopt;
}

std::optional<std::chrono::seconds> grace_time(const std::map<std::string, std::string>& record) {
  const auto it = record.find("GraceTime");
  if (it == record.end()) return std::nullopt;
  const auto seconds = parse_unsigned(it->second, 1U << 30);
  if (!seconds) return std::nullopt;
  return std::chrono::seconds(*seconds);
}

std::optional<std::chrono::seconds> query_grace_time(const std::string& partition) {
  if (partition.empty()) return std::nullopt;
  const CommandOutput out =
      run_command({"scontrol", "-o", "show", "partition", partition}, std::chrono::seconds(30));
  if (out.status != 0) return std::nullopt;
  return grace_time(parse_scontrol_record(out.output));
}

std::optional<std::map<std::string, std::string>> query_node(const std::string& node) {
  const CommandOutput out =
      run_command({"scontrol", "show", "node", "-o", node}, std::chrono::seconds(30));
  if (out.status != 0) {
    std::cerr << "primus-launch: scontrol show node " << node << " failed: " << out.output;
    return std::nullopt;
  }
  return parse_scontrol_record(out.output);
}

std::optional<std::chrono::seconds> slurmd_timeout(const std::string& config) {
  std::istringstream lines(config);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("SlurmdTimeout", 0) != 0) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) return std::nullopt;
    std::istringstream value(line.substr(eq + 1));
    std::string number;
    value >> number;
    const auto seconds = parse_unsigned(number, 1U << 30);
    if (!seconds) return std::nullopt;
    return std::chrono::seconds(*seconds);
  }
  return std::nullopt;
}

std::optional<std::chrono::seconds> query_slurmd_timeout() {
  const CommandOutput out = run_command({"scontrol", "show", "config"}, std::chrono::seconds(30));
  if (out.status != 0) return std::nullopt;
  return slurmd_timeout(out.output);
}

std::string merged_exclusions(const std::string& current, const std::vector<std::string>& more) {
  std::vector<std::string> hosts;
  if (!current.empty()) {
    try {
      hosts = Hostlist::parse(current).expand();
    } catch (const std::exception&) {
      hosts.clear();
    }
  }
  for (const std::string& host : more)
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  std::sort(hosts.begin(), hosts.end());
  Hostlist list;
  for (const std::string& host : hosts)
    list.push_host(host);
  return list.compress();
}

std::optional<std::string> requeue_job(const std::string& job,
                                       const std::vector<std::string>& excluded) {
  if (excluded.empty()) {
    const CommandOutput out = run_command({"scontrol", "requeue", job}, std::chrono::seconds(30));
    if (out.status == 0) return std::nullopt;
    return out.output.empty() ? std::string("scontrol requeue failed") : out.output;
  }
  const auto before = query_job(job);
  const std::string list = merged_exclusions(before ? before->excluded : "", excluded);
  const CommandOutput hold =
      run_command({"scontrol", "requeuehold", job}, std::chrono::seconds(30), true);
  if (hold.status != 0) {
    return "scontrol requeuehold failed: " +
           (hold.output.empty() ? std::string("no message") : hold.output);
  }
  std::string problems;
  const CommandOutput update =
      run_command({"scontrol", "update", "JobId=" + job, "ExcNodeList=" + list},
                  std::chrono::seconds(30), true);
  if (update.status != 0) {
    problems = "scontrol update ExcNodeList=" + list + " failed (" + update.output +
               "); the job may be given those nodes again. ";
  }
  const CommandOutput release =
      run_command({"scontrol", "release", job}, std::chrono::seconds(30), true);
  if (release.status != 0) {
    problems += "scontrol release " + job + " failed (" + release.output +
                "): the job is held; release it with scontrol release " + job;
  }
  if (problems.empty()) return std::nullopt;
  return problems;
}

}  // namespace primus::launch
