// The control channel's lines that the launcher and the task wrapper write, and the line
// splitter (control_protocol.hpp; a line's parse is report_parse.cpp's).
#include "control/control_protocol.hpp"

#include "primus/common/json_text.hpp"

namespace primus::launch {

std::vector<std::string> LineSplitter::feed(std::string_view bytes, bool& ok) {
  ok = true;
  std::vector<std::string> lines;
  partial_.append(bytes);
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(partial_.substr(start, nl - start));
  }
  partial_.erase(0, start);
  if (partial_.size() > kMaxControlLine) {
    ok = false;
    partial_.clear();
  }
  return lines;
}

std::string generation_notice(std::uint32_t generation, std::uint16_t master_port,
                              std::uint16_t primus_port, const std::string& resume) {
  return "{\"type\": \"generation\", \"generation\": " + std::to_string(generation) +
         ", \"master_port\": " + std::to_string(master_port) +
         ", \"primus_port\": " + std::to_string(primus_port) +
         ", \"resume\": " + json_quote(resume) + "}";
}

std::string kill_rank_line(const std::string& reason) {
  return "{\"type\": \"kill\", \"reason\": " + json_quote(reason) + "}";
}

std::string standby_line() {
  return "{\"type\": \"standby\"}";
}

std::string wrapper_hello_line(std::uint32_t attempt, const std::string& node, std::int64_t pid,
                               const std::string& step) {
  return "{\"type\": \"hello\", \"attempt\": " + std::to_string(attempt) +
         ", \"node\": " + json_quote(node) + ", \"pid\": " + std::to_string(pid) +
         ", \"step\": " + json_quote(step) + "}\n";
}

std::string wrapper_signal_line(const std::string& signal) {
  return "{\"type\": \"event\", \"event\": \"stop-signal\", \"signal\": " + json_quote(signal) +
         "}\n";
}

std::string wrapper_exit_line(int wait_status) {
  return "{\"type\": \"exit\", \"wait_status\": " + std::to_string(wait_status) + "}\n";
}

std::string wrapper_replacement_line(bool from_standby) {
  return std::string("{\"type\": \"event\", \"event\": \"replacement\", \"replacement\": \"") +
         (from_standby ? "standby" : "started") + "\"}\n";
}

}  // namespace primus::launch
