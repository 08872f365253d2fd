// Differential test: primus::Hostlist against the real `scontrol` of Slurm 22.05.
// For each list, `scontrol show hostnames LIST` must print exactly what expand() returns,
// `scontrol show hostlist LIST` exactly what compress() returns, and scontrol must reject exactly
// the lists that Hostlist::parse rejects, but for Primus's documented ceiling of
// Hostlist::kMaxRanges ranges, which only a list the test itself counts over it may hit.
// scontrol is required: without it the test fails. The random lists are seeded; set
// PRIMUS_HOSTLIST_SEED to replay a run. Nothing the test decides (which lists to run, whether a
// refusal is the ceiling's) comes from the parser under test: the sizes are the test's own.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "primus/common/error.hpp"
#include "primus/common/hostlist.hpp"

namespace primus {
namespace {

// ---- Running scontrol ------------------------------------------------------------------------

std::string find_scontrol() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/scontrol";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return access("/usr/bin/scontrol", X_OK) == 0 ? "/usr/bin/scontrol" : "";
}

struct Output {
  int status = -1;  // the wait status
  std::string out;
  std::string err;
};

// Reads both pipes until both close, so that neither can fill up and block the child.
bool drain(int out_fd, int err_fd, Output& output, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&output.out, &output.err};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  return true;
}

// scontrol with a slurm.conf of its own in a temporary directory.
class Scontrol {
 public:
  explicit Scontrol(std::string path) : path_(std::move(path)) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/primus-hostlist-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return;
    dir_ = pattern;
    std::ofstream conf(dir_ + "/slurm.conf");
    conf << "ClusterName=x\nSlurmctldHost=localhost\n";
    ready_ = static_cast<bool>(conf);
  }
  ~Scontrol() {
    if (dir_.empty()) return;
    std::remove((dir_ + "/slurm.conf").c_str());
    rmdir(dir_.c_str());
  }
  Scontrol(const Scontrol&) = delete;
  Scontrol& operator=(const Scontrol&) = delete;

  bool ready() const { return ready_; }

  struct Child {
    pid_t pid = -1;
    int out = -1;  // read ends of its stdout and stderr
    int err = -1;
  };

  // Starts `scontrol -- show WHAT LIST` (exec with argv, no shell; "--" so that a list starting
  // with '-' is not read as an option). Nothing when it cannot start.
  std::optional<Child> start(const std::string& what, const std::string& list) const {
    int out_pipe[2];
    int err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return std::nullopt;
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      close(out_pipe[0]);
      close(out_pipe[1]);
      return std::nullopt;
    }
    const std::string conf = "SLURM_CONF=" + dir_ + "/slurm.conf";
    std::vector<const char*> argv = {path_.c_str(), "--",         "show",
                                     what.c_str(),  list.c_str(), nullptr};
    std::vector<const char*> envp = {conf.c_str(), "LC_ALL=C", nullptr};
    // posix_spawn rather than fork: forking a sanitizer-instrumented test costs ~20 ms a call.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    pid_t pid = -1;
    const int spawned =
        posix_spawn(&pid, path_.c_str(), &actions, nullptr, const_cast<char* const*>(argv.data()),
                    const_cast<char* const*>(envp.data()));
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (spawned != 0) {
      close(out_pipe[0]);
      close(err_pipe[0]);
      return std::nullopt;
    }
    return Child{pid, out_pipe[0], err_pipe[0]};
  }

  // Collects a started scontrol; nothing when it takes more than 30 s.
  static std::optional<Output> finish(const Child& child) {
    Output output;
    const bool finished = drain(child.out, child.err, output, std::chrono::seconds(30));
    close(child.out);
    close(child.err);
    if (!finished) kill(child.pid, SIGKILL);
    waitpid(child.pid, &output.status, 0);
    if (!finished) return std::nullopt;
    return output;
  }

 private:
  std::string path_;
  std::string dir_;
  bool ready_ = false;
};

// ---- Comparing -------------------------------------------------------------------------------

std::string escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 32 && c < 127 && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char code[8];
      std::snprintf(code, sizeof code, "\\x%02x", c);
      out += code;
    }
  }
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    result.push_back(text.substr(start, end - start));
  }
  return result;
}

std::string joined(const std::vector<std::string>& hosts) {
  std::string out;
  for (std::size_t i = 0; i < hosts.size() && i < 40; ++i)
    out += (i ? " " : "") + escaped(hosts[i]);
  if (hosts.size() > 40) out += " ... (" + std::to_string(hosts.size()) + " hosts)";
  return out;
}

struct Counts {
  int valid = 0;
  int invalid = 0;
  int compared = 0;
  int failures = 0;
};

// What the test computed about a list on its own, never through Hostlist: an upper bound on the
// hosts it names (so on its ranges too: a range names one host at least), and a lower bound on
// its ranges before joining, what Hostlist::kMaxRanges limits. The defaults: nothing known.
struct Known {
  std::uint64_t max_hosts = UINT64_MAX;
  std::uint64_t min_ranges = 0;
};

struct Case {
  std::string list;
  Known known;
};

// Compares one list; returns a description of the difference, or nothing.
std::optional<std::string> compare(const Scontrol& scontrol, const std::string& list,
                                   const Known& known, Counts& counts) {
  // Both at once: the two runs overlap on a machine with more than one core.
  const std::optional<Scontrol::Child> names_run = scontrol.start("hostnames", list);
  const std::optional<Scontrol::Child> ranged_run = scontrol.start("hostlist", list);
  const std::optional<Output> names = names_run ? Scontrol::finish(*names_run) : std::nullopt;
  const std::optional<Output> ranged = ranged_run ? Scontrol::finish(*ranged_run) : std::nullopt;
  if (!names || !ranged) return "scontrol did not run or took more than 30 s";
  if (!WIFEXITED(names->status) || !WIFEXITED(ranged->status)) {
    return "scontrol crashed (wait status " + std::to_string(names->status) + ", " +
           std::to_string(ranged->status) + ")";
  }
  const bool slurm_valid = names->err.find("Invalid hostlist") == std::string::npos;
  const bool slurm_valid_ranged =
      WEXITSTATUS(ranged->status) == 0 && ranged->err.find("Invalid hostlist") == std::string::npos;
  if (slurm_valid != slurm_valid_ranged) return "scontrol hostnames and hostlist disagree";
  ++counts.compared;
  ++(slurm_valid ? counts.valid : counts.invalid);

  std::optional<Hostlist> mine;
  std::string error;
  try {
    mine = Hostlist::parse(list);
  } catch (const ParseError& e) {
    error = e.what();
    if (e.position() > list.size()) return "error position past the end: " + error;
  }
  if (!slurm_valid) {
    if (mine) return "scontrol rejects it, Primus accepts it as " + escaped(mine->compress());
    return std::nullopt;
  }
  const std::vector<std::string> slurm_hosts = lines(names->out);
  if (slurm_hosts.size() > known.max_hosts) {
    return "the test's own bound of " + std::to_string(known.max_hosts) + " hosts is below the " +
           std::to_string(slurm_hosts.size()) + " scontrol prints";
  }
  if (!mine) {
    // Primus's own ceiling (Hostlist::kMaxRanges ranges before joining) is refused by design,
    // even where Slurm still copes. Only that error, and only for a list that the test itself
    // counted over the ceiling: the number of ranges, not of hosts (a few long ranges name more
    // hosts than the ceiling and are far from it).
    const std::string ceiling =
        "expected at most " + std::to_string(Hostlist::kMaxRanges) + " ranges in the list";
    if (error.find(ceiling) != std::string::npos) {
      if (known.min_ranges > Hostlist::kMaxRanges) return std::nullopt;
      return "scontrol accepts it, Primus refuses it at its ceiling of " +
             std::to_string(Hostlist::kMaxRanges) + " ranges, but the test counts " +
             (known.max_hosts == UINT64_MAX && known.min_ranges == 0
                  ? std::string("nothing for it (no exemption without a count)")
                  : "at least " + std::to_string(known.min_ranges) + " and at most " +
                        std::to_string(known.max_hosts) + " ranges") +
             ": " + escaped(error);
    }
    return "scontrol accepts it, Primus rejects it: " + escaped(error);
  }
  if (known.min_ranges > Hostlist::kMaxRanges) {
    return "Primus accepts it, but its " + std::to_string(known.min_ranges) +
           " ranges (at least) are over its ceiling of " + std::to_string(Hostlist::kMaxRanges);
  }
  if (mine->expand() != slurm_hosts) {
    return "expansion differs\n  scontrol: " + joined(slurm_hosts) +
           "\n  primus:   " + joined(mine->expand());
  }
  std::string slurm_ranged = ranged->out;
  if (!slurm_ranged.empty() && slurm_ranged.back() == '\n') slurm_ranged.pop_back();
  if (mine->compress() != slurm_ranged) {
    return "compression differs\n  scontrol: " + escaped(slurm_ranged) +
           "\n  primus:   " + escaped(mine->compress());
  }
  return std::nullopt;
}

void check_all(const std::vector<Case>& cases, Counts& counts) {
  const std::string path = find_scontrol();
  ASSERT_FALSE(path.empty())
      << "scontrol (Slurm 22.05) is required for this test and was found neither on PATH nor "
         "as /usr/bin/scontrol: install slurm-client";
  const Scontrol scontrol(path);
  ASSERT_TRUE(scontrol.ready()) << "cannot write a slurm.conf in a temporary directory";
  for (const auto& [list, known] : cases) {
    if (const std::optional<std::string> difference = compare(scontrol, list, known, counts)) {
      ++counts.failures;
      ADD_FAILURE() << "list '" << escaped(list) << "': " << *difference;
      if (counts.failures >= 20) {
        ADD_FAILURE() << "stopping after 20 differences";
        return;
      }
    }
  }
}

// ---- The test's own count ----------------------------------------------------------------------

// Slurm's limits (docs/hostlist.md): hosts in one "lo-hi" item.
constexpr std::uint64_t kSlurmMaxHostsInItem = 65536;

bool is_list_separator(char c) {
  return c == ',' || c == ' ' || c == '\t';
}

std::uint64_t saturated_add(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

std::uint64_t saturated_multiply(std::uint64_t a, std::uint64_t b) {
  return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

// The number C's strtoul reads at the start of `text` (white space, a sign, digits; saturated,
// a '-' negating modulo 2^64); nothing when there is no digit.
std::optional<std::uint64_t> leading_number(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r')))
    ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  const std::size_t digits = i;
  std::uint64_t value = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    value = value > (UINT64_MAX - digit) / 10 ? UINT64_MAX : value * 10 + digit;
  }
  if (i == digits) return std::nullopt;
  return negative ? 0 - value : value;
}

// At least as many hosts as Slurm's item `text` names: 1 for "lo", hi - lo + 1 for "lo-hi", at
// most Slurm's limit (beyond it, and for anything it cannot read, Slurm names nothing).
std::uint64_t item_bound(std::string_view text) {
  const std::size_t dash = text.find('-');
  if (dash == std::string_view::npos) return 1;
  const std::optional<std::uint64_t> lo = leading_number(text.substr(0, dash));
  const std::optional<std::uint64_t> hi = leading_number(text.substr(dash + 1));
  if (!lo || !hi || *hi < *lo) return 1;
  return *hi - *lo >= kSlurmMaxHostsInItem ? kSlurmMaxHostsInItem : *hi - *lo + 1;
}

// An upper bound on the hosts that Slurm's grammar (docs/hostlist.md) can make of `list`, from
// the text alone: never through the parser under test. Entries end at a separator outside
// brackets: here where no '[' of the entry so far has its first ']' beyond it, which never ends
// an entry where Slurm's rule would not (it may end one fewer times). An entry names the
// product of its bracket groups' values, each group being a '[', the comma-separated items after
// it and a ']' before the next '['; so within an entry, at most the product over its '[' of
// (1 + the items' hosts from there to the next '['), less one, plus one host for each entry
// without a group (at most one per separator, plus one). A range names a host at least, so this
// bounds the ranges too.
std::uint64_t host_bound(std::string_view list) {
  std::uint64_t total = 0;
  std::size_t begin = 0;
  while (begin < list.size()) {
    // The entry [begin, end): up to a separator not covered by a bracket span.
    std::size_t covered_to = 0;  // one past the first ']' after the last '[' seen
    bool open_bracket = false;
    std::size_t end = begin;
    for (; end < list.size(); ++end) {
      const char c = list[end];
      if (c == '[') {
        const std::size_t close = list.find(']', end + 1);
        open_bracket = true;
        covered_to = close == std::string_view::npos ? list.size() : close + 1;
      }
      if (is_list_separator(c) && (!open_bracket || end >= covered_to)) break;
    }
    const std::string_view entry = list.substr(begin, end - begin);
    std::uint64_t separators = 0;
    for (const char c : entry)
      separators += is_list_separator(c) ? 1 : 0;
    std::uint64_t product = 1;
    for (std::size_t open = entry.find('['); open != std::string_view::npos;) {
      const std::size_t next = entry.find('[', open + 1);
      const std::string_view group =
          entry.substr(open + 1, (next == std::string_view::npos ? entry.size() : next) - open - 1);
      std::uint64_t values = 0;
      for (std::size_t item = 0;;) {
        const std::size_t comma = group.find(',', item);
        const std::size_t length =
            comma == std::string_view::npos ? group.size() - item : comma - item;
        values = saturated_add(values, item_bound(group.substr(item, length)));
        if (comma == std::string_view::npos) break;
        item = comma + 1;
      }
      product = saturated_multiply(product, saturated_add(values, 1));
      open = next;
    }
    total = saturated_add(total, saturated_add(product, separators));
    begin = end + 1;
  }
  return total;
}

// ---- Random lists ----------------------------------------------------------------------------

// Realistic hostlists (prefixes, padded numbers, brackets with comma lists and ranges, several
// bracket groups, duplicates, comma and space separators), a third of them deliberately broken,
// each with the generator's own bound on its hosts (host_bound()).
class ListGenerator {
 public:
  explicit ListGenerator(std::uint64_t seed) : rng_(seed) {}

  Case next() {
    for (;;) {
      std::string list = build();
      if (chance(35)) list = break_(list);
      const std::uint64_t bound = host_bound(list);
      if (acceptable(list, bound)) return {list, Known{bound, 0}};
    }
  }

 private:
  bool chance(int percent) { return pick(100) < static_cast<std::uint64_t>(percent); }
  std::uint64_t pick(std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng_);
  }
  template <typename T>
  const T& one_of(const std::vector<T>& items) {
    return items[pick(items.size())];
  }

  std::string build() {
    std::string list;
    if (chance(5)) list += one_of<std::string>({",", " ", ", "});
    const std::uint64_t entries = 1 + pick(6);
    std::vector<std::string> made;
    for (std::uint64_t i = 0; i < entries; ++i) {
      if (i > 0) list += separator();
      made.push_back(!made.empty() && chance(10) ? one_of(made) : entry());
      list += made.back();
    }
    if (chance(5)) list += one_of<std::string>({",", " ", ",,"});
    return list;
  }

  std::string separator() {
    return one_of<std::string>({",", ",", ",", ",", ",", ",", ",", " ", " ", ", ", ",,", "\t"});
  }

  std::string prefix() {
    return one_of<std::string>({"n", "n", "node", "gpu", "cn-", "rack1-n", "a.b", "x_y", "c", "",
                                "tux", "compute-0-", "r0", "login"});
  }

  std::string number(std::uint64_t value) {
    std::string digits = std::to_string(value);
    if (chance(25)) digits.insert(0, 1 + pick(3), '0');
    return digits;
  }

  std::uint64_t value() {
    if (chance(80)) return pick(120);
    if (chance(80)) return pick(1000000);
    return pick(1000000000000ull);
  }

  std::string item(bool small) {
    const std::uint64_t lo = value();
    if (chance(45)) return number(lo);
    std::uint64_t span = small ? pick(3) : pick(20);
    if (!small && chance(1)) span = chance(50) ? 65535 : 65536;  // the limit, and one past it
    std::string hi = number(lo + span);
    if (chance(3) && lo > 0) hi = number(lo - 1);  // decreasing
    return number(lo) + "-" + hi;
  }

  std::string bracket(bool small) {
    std::string text = "[";
    const std::uint64_t items = 1 + pick(small ? 2 : 4);
    for (std::uint64_t i = 0; i < items; ++i)
      text += (i ? "," : "") + item(small);
    return text + "]";
  }

  std::string entry() {
    const std::uint64_t kind = pick(100);
    if (kind < 30) return prefix() + (chance(85) ? number(value()) : std::string("x"));
    if (kind < 35) return number(value());
    std::string text = prefix();
    const std::uint64_t groups = chance(80) ? 1 : (chance(75) ? 2 : 3);
    for (std::uint64_t g = 1; g < groups; ++g) {
      text += bracket(true) + one_of<std::string>({"c", "-n", "s", "_", ""});
    }
    return text + bracket(false);
  }

  std::string break_(std::string list) {
    const std::size_t at = pick(list.size() + 1);
    switch (pick(4)) {
      case 0:
        return list.insert(at, one_of<std::string>({"[", "]", "-", ",", "x", "--", " ", "+", "a",
                                                    "[]", "]]", "[[", "0", "]b", ",,", " 1"}));
      case 1:
        return at < list.size() ? list.erase(at, 1) : list;
      case 2:
        return list.substr(0, at);
      default: {
        const std::size_t close = list.rfind(']', at);
        return close == std::string::npos ? list : list.insert(close + 1, "b");
      }
    }
  }

  // No list that scontrol would read as a file name, no digit run that Primus refuses on
  // purpose (2^64-1 and above), and no product too large to print quickly: the generator's
  // own bound, which also keeps every list far below Primus's ceiling of ranges.
  static bool acceptable(const std::string& list, std::uint64_t bound) {
    if (!list.empty() && list[0] == '/') return false;
    int run = 0;
    for (char c : list) {
      run = (c >= '0' && c <= '9') ? run + 1 : 0;
      if (run >= 19) return false;
    }
    return bound <= kMaxHostsPrinted;
  }
  static constexpr std::uint64_t kMaxHostsPrinted = 70000;
  static_assert(kMaxHostsPrinted < Hostlist::kMaxRanges);

  std::mt19937_64 rng_;
};

std::uint64_t seed_from_environment() {
  if (const char* text = std::getenv("PRIMUS_HOSTLIST_SEED"))
    return std::strtoull(text, nullptr, 10);
  return std::random_device{}();
}

TEST(HostlistDifferential, RandomListsMatchScontrol) {
  const std::uint64_t seed = seed_from_environment();
  std::cout << "hostlist differential: seed " << seed << " (PRIMUS_HOSTLIST_SEED=" << seed
            << " replays it)" << std::endl;
  RecordProperty("seed", std::to_string(seed));
  ListGenerator generator(seed);
  constexpr int kLists = 1000;
  std::vector<Case> lists;
  lists.reserve(kLists);
  for (int i = 0; i < kLists; ++i)
    lists.push_back(generator.next());
  Counts counts;
  check_all(lists, counts);
  std::cout << "hostlist differential: " << lists.size() << " lists, " << counts.valid << " valid, "
            << counts.invalid << " invalid, " << counts.compared << " compared, " << counts.failures
            << " differences" << std::endl;
  EXPECT_GE(counts.compared, kLists);
  EXPECT_GE(counts.valid, 300);
  EXPECT_GE(counts.invalid, 100);
}

// The corner cases found by experiment (docs/hostlist.md), checked against scontrol every run.
TEST(HostlistDifferential, CornerCasesMatchScontrol) {
  const std::vector<std::string> lists = {"a[01-03,7],b[1-2]c[3-4]",
                                          "b[1-2]c[3-4]",
                                          "a[1-2]b[1-2]c[1-2]",
                                          "n3,n1,n2,n1",
                                          "a[1-2]b",
                                          "a[1-2",
                                          "a[1-2 b",
                                          "[1-2",
                                          "[1-2,[3",
                                          "[1-2],[3",
                                          "[",
                                          "a,[,b",
                                          "]",
                                          "x]",
                                          "[]",
                                          "[[1]]",
                                          "a[[1]",
                                          "a[1][2]",
                                          "a]b[1]",
                                          "x[1]y]z[2]",
                                          "x[a,[1],b]",
                                          "a[1 [2]b[3]",
                                          "a[x]b[1-2]c[3],d",
                                          "a[1-40000,1-40000]b[1-2]c[5]",
                                          "a[1-40000,1-40000]b[1]",
                                          "n[1, 2]",
                                          "n[+1-3]",
                                          "n[1a-3]",
                                          "n[1-3a]",
                                          "n[1a]",
                                          "n[ 1- +3]",
                                          "n[1-]",
                                          "n[-]",
                                          "n[- 1]",
                                          "n[1--3]",
                                          "n[0- -0]",
                                          "n[1-2,]",
                                          "n[,1]",
                                          "n[1x]",
                                          "n[1-800000]",
                                          "n[1-65536]",
                                          "n[1-65537]",
                                          "n[1-65536],n[65537-65538]",
                                          "n[10-9]",
                                          "n9,n10",
                                          "n09,n10",
                                          "n9,n010",
                                          "n[9-10]",
                                          "n[09-10]",
                                          "n01,n1,n2",
                                          "n[001-3]",
                                          "n[1-003]",
                                          "a,,b",
                                          " ",
                                          "",
                                          "a1\tb2 c3",
                                          "a[1-2]]",
                                          "a[1-2] b",
                                          "n[1-2],n[3-4]",
                                          "n[1-2]n[3]",
                                          "123",
                                          "123,124",
                                          "007",
                                          "login,gpu-a,007,123",
                                          "-1,-2",
                                          "a\v1,a2",
                                          "a\v[1-2],b,a[4-5]",
                                          "a\r1,a 2",
                                          "n18446744073709551614",
                                          "n[18446744073709551613-18446744073709551614]",
                                          "rack[001-003]n[1-2]",
                                          "n[2,1]m[2,1]",
                                          "a[1,1]b[2,1]"};
  // The test's bound holds on these too (compare() checks it against scontrol's count).
  std::vector<Case> cases;
  for (const std::string& list : lists)
    cases.push_back({list, Known{host_bound(list), 0}});
  Counts counts;
  check_all(cases, counts);
  std::cout << "hostlist differential: " << lists.size() << " corner cases, " << counts.valid
            << " valid, " << counts.invalid << " invalid, " << counts.compared << " compared"
            << std::endl;
}

// Primus's ceiling of Hostlist::kMaxRanges ranges before joining, at it and beyond it, with the
// ranges counted here by hand (each value of the earlier bracket, times each item of the last,
// is one range): only a list over it may be refused, and a list over it must be. Many hosts in
// few ranges are no reason to refuse.
TEST(HostlistDifferential, OnlyListsOverTheRangeCeilingAreRefused) {
  constexpr std::uint64_t kValues = 65536;  // a[1-65536]
  static_assert(kValues * 4 == Hostlist::kMaxRanges);
  const std::vector<Case> cases = {
      // 262144 ranges (a1b1, a1b2, ... one range each before joining): at the ceiling.
      {"a[1-65536]b[1,2,3,4]", {kValues * 4, kValues * 4}},
      // 327680 ranges: over it, refused by Primus, printed by scontrol.
      {"a[1-65536]b[1,2,3,4,5]", {kValues * 5, kValues * 5}},
      // 262154 hosts in 5 ranges: far below it.
      {"n[1-65536],m[1-65536],o[1-65536],p[1-65536],q[1-10]", {kValues * 4 + 10, 5}},
  };
  Counts counts;
  check_all(cases, counts);
  EXPECT_EQ(counts.valid, 3);
}

}  // namespace
}  // namespace primus
