// The messages of the control channel (pure: text in, values out). After the handshake
// (primus/collectives/control.hpp) a rank and its task wrapper send JSON lines, one object
// each, with a "type": hello, heartbeat, scalars, event, exception, goodbye, exit (the wrapper:
// how its rank ended) and data (the dynamic split). Their kinds, senders and fields are defined
// once, in launcher/control/messages.json; tests/unit/launch_messages_test.cpp and
// tests/python/test_messages.py hold this parser, the wrapper and the ranks to it.
// Who sent a line is the connection's (the handshake proved the rank), never a field of it.
// Unknown types and fields are ignored, so that either end may grow; a malformed line is an
// error of that connection only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace primus::launch {

// The longest line accepted; a connection that sends more without a newline is dropped.
// (8 MiB: the dynamic split's queue opens with one size per split.)
constexpr std::size_t kMaxControlLine = 8 << 20;

enum class ReportKind {
  kHello,
  kHeartbeat,
  kEvent,
  kException,
  kGoodbye,
  kExit,
  kData,
  kScalars,
  kOther
};

// What a node's local rank 0 reports of its node (from /proc).
struct NodeReport {
  std::optional<double> cpu_usage_ratio;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_available_bytes;
  std::optional<std::uint64_t> network_receive_bytes_total;
  std::optional<std::uint64_t> network_transmit_bytes_total;
};

struct Report {
  ReportKind kind = ReportKind::kOther;
  std::uint32_t rank = 0;
  bool wrapper = false;  // from the rank's task wrapper, not the rank itself
  // hello
  std::optional<std::uint32_t> attempt;
  std::string node;
  std::int64_t pid = 0;
  std::string step;  // "<job>.<step>", from a wrapper under srun
  // heartbeat (steps also in events)
  std::optional<std::uint64_t> steps;
  std::optional<double> step_seconds;
  std::optional<std::uint64_t> rss_bytes;
  std::optional<std::uint64_t> rejoin_memory_bytes;  // the committed step kept in memory
  std::optional<double> cpu_seconds;
  std::optional<std::uint64_t> samples;
  std::optional<double> last_step_time;  // UNIX time, the rank's clock
  std::optional<double> wait_seconds;    // median wait in should_stop()'s agreement
  std::optional<std::uint64_t> gpu_memory_bytes;
  std::optional<double> gpu_utilization_ratio;
  std::optional<NodeReport> node_stats;
  // A training loop's plan (primus.train): the steps of the whole run, counted as `steps` is
  // (from the job's start: a rank that resumed counts from the checkpoint's step).
  std::optional<std::uint64_t> total_steps;
  // scalars (step in `steps`; values by name; non-finite as NaN or +-inf)
  std::optional<double> time;
  std::vector<std::pair<std::string, double>> values;
  // event
  std::string event;
  std::optional<std::uint32_t> generation;  // "rejoinable", "rejoin-waiting" (a rejoin's)
  std::optional<double> restore_seconds;    // "rejoinable" after a rejoin: the rank's restore
  std::string restore_source;               // and where it came from (memory, broadcast, file)
  std::string replacement;  // a task wrapper's replacement event: standby or started
  std::string path;
  std::string signal;
  // exception
  std::string exception;
  std::string message;
  std::string where;
  // The rank whose connection the reporting rank lost (a PeerFailure of primus.comm, in this
  // exception or earlier): its failure caused this one.
  std::optional<std::uint32_t> peer;
  // goodbye
  std::string reason;
  // exit
  int wait_status = 0;
  // data: the whole line, for DataTasks
  std::string payload;
};

// One line (without its newline) from the connection of `rank` (wrapper: its task wrapper).
// nullopt with `error` set when it is not a JSON object with a known shape.
std::optional<Report> parse_report(std::string_view line, std::uint32_t rank, bool wrapper,
                                   std::string& error);

// Cuts a byte stream into lines. feed() returns the complete lines so far; false in `ok` when
// a line grew past kMaxControlLine.
class LineSplitter {
 public:
  std::vector<std::string> feed(std::string_view bytes, bool& ok);

 private:
  std::string partial_;
};

// The notice of a rejoin's new generation to a surviving rank (python/primus/_rejoin.py):
// {"type": "generation", "generation", "master_port", "primus_port", "resume"}.
std::string generation_notice(std::uint32_t generation, std::uint16_t master_port,
                              std::uint16_t primus_port, const std::string& resume);

// A generation notice as its receivers read it: a surviving rank (python/primus/_rejoin.py)
// and, under srun, the task wrapper of the failed rank, which starts the replacement in its
// task (notice_parse.cpp).
struct GenerationNotice {
  std::uint32_t generation = 0;
  std::uint16_t master_port = 0;
  std::uint16_t primus_port = 0;
  std::string resume;
};
// nullopt with `error` set when `line` is not a generation notice with every field valid.
std::optional<GenerationNotice> parse_generation_notice(std::string_view line, std::string& error);
// The replacement's environment: `base` ("NAME=value" entries, the failed rank's) with the
// notice's generation, ports and resume point, and the TCP bootstrap (a PMIx namespace
// belongs to the step's first processes).
std::vector<std::string> replacement_environment(const std::vector<std::string>& base,
                                                 const GenerationNotice& notice);

// The launcher's word to a task wrapper under srun that its rank hung and is to be killed, for a
// rejoin to replace it: {"type": "kill", "reason"}.
std::string kill_rank_line(const std::string& reason);
// Whether `line` is that word (notice_parse.cpp).
bool is_kill_line(std::string_view line);

// The launcher's word to every task wrapper under srun, once every rank is up and a rejoin could
// come: the first task of each node starts the node's standby (node_standby.hpp):
// {"type": "standby"}.
std::string standby_line();
// Whether `line` is that word (notice_parse.cpp).
bool is_standby_line(std::string_view line);

// The lines a wrapper sends (for the wrapper and the tests).
std::string wrapper_hello_line(std::uint32_t attempt, const std::string& node, std::int64_t pid,
                               const std::string& step);
std::string wrapper_exit_line(int wait_status);
// A rejoin's replacement started by this wrapper: `standby` (the node's standby's fork) or
// `started` (a new process).
std::string wrapper_replacement_line(bool from_standby);
// What a task wrapper says when slurmstepd sends the step a stop signal (a preemption, a
// --signal, scancel --signal), so that the launcher learns of it even from ranks that do not
// report (a plain script) or that ignore the signal.
std::string wrapper_signal_line(const std::string& signal);

}  // namespace primus::launch
