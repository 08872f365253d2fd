// The messages of the control channel (pure: text in, values out). After the handshake
// (primus/collectives/control.hpp) a rank and its task wrapper send JSON lines, one object
// each, with a "type":
//   hello      {"type": "hello", "attempt": k, "node": ..., "pid": n[, "step": "<job>.<step>"]}
//   heartbeat  {"type": "heartbeat", "steps": n[, "samples": n, "step_seconds": x,
//               "rss_bytes": n, "cpu_seconds": x]}
//   event      {"type": "event", "event": "stop-signal" | "checkpoint-started" |
//               "checkpoint-committed", "step": n[, "path": ..., "signal": ...]}
//   exception  {"type": "exception", "exception": "ValueError", "message": ..., "where": ...}
//   goodbye    {"type": "goodbye", "reason": ...}
//   exit       {"type": "exit", "wait_status": n}   (the task wrapper: how its rank ended)
//   data       {"type": "data", "op": ...}          (the dynamic split: data_tasks.hpp)
// Who sent it is the connection's (the handshake proved the rank), never a field of the line.
// Unknown types and fields are ignored, so that either end may grow; a malformed line is an
// error of that connection only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace primus::launch {

// The longest line accepted; a connection that sends more without a newline is dropped.
// (8 MiB: the dynamic split's queue opens with one size per split.)
constexpr std::size_t kMaxControlLine = 8 << 20;

enum class ReportKind { kHello, kHeartbeat, kEvent, kException, kGoodbye, kExit, kData, kOther };

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
  std::optional<double> cpu_seconds;
  // event
  std::string event;
  std::string path;
  std::string signal;
  // exception
  std::string exception;
  std::string message;
  std::string where;
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

// The lines a wrapper sends (for the wrapper and the tests).
std::string wrapper_hello_line(std::uint32_t attempt, const std::string& node, std::int64_t pid,
                               const std::string& step);
std::string wrapper_exit_line(int wait_status);

}  // namespace primus::launch
