#include "supervise/events.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <iostream>

#include "primus/common/error.hpp"
#include "primus/common/json_text.hpp"

namespace primus::launch {

std::string event_line(const Event& event, const std::string& time, std::uint32_t allocation,
                       std::uint32_t attempt) {
  std::string line = "{\"time\": " + json_quote(time) + ", \"event\": " + json_quote(event.event) +
                     ", \"allocation\": " + std::to_string(allocation) +
                     ", \"attempt\": " + std::to_string(attempt);
  if (event.rank) line += ", \"rank\": " + std::to_string(*event.rank);
  if (event.node) line += ", \"node\": " + json_quote(*event.node);
  if (!event.details.empty()) {
    line += ", \"details\": {";
    bool first = true;
    for (const auto& [key, value] : event.details) {
      if (!first) line += ", ";
      line += json_quote(key) + ": " + json_quote(value);
      first = false;
    }
    line += "}";
  }
  return line + "}\n";
}

std::string utc_now_ms() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[40] = {};
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(ms.count()));
  return text;
}

EventLog::EventLog(const std::filesystem::path& path, std::uint32_t allocation)
    : path_(path), allocation_(allocation) {
  fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd_) throw Error("cannot open " + path.string() + ": " + std::strerror(errno));
}

void EventLog::write(const Event& event) {
  const std::string line = event_line(event, utc_now_ms(), allocation_, attempt_);
  // One write per line with O_APPEND: a line is never torn by another writer's.
  const ssize_t n = ::write(fd_.get(), line.data(), line.size());
  if (n == static_cast<ssize_t>(line.size()) || warned_) return;
  warned_ = true;
  std::cerr << "primus-launch: warning: cannot append to " << path_.string() << ": "
            << (n < 0 ? std::strerror(errno) : "short write") << "\n";
}

std::string seconds_since(std::chrono::steady_clock::time_point since) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - since)
                      .count();
  std::string text = std::to_string(ms / 1000) + ".";
  const std::string fraction = std::to_string(1000 + ms % 1000);
  return text + fraction.substr(1);
}

}  // namespace primus::launch
