#include "status.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "primus/common/json_text.hpp"

namespace primus::launch {
namespace {

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

std::string status_json(const JobStatus& s) {
  std::string out = "{\"time\": " + json_quote(s.time) + ", \"job\": " + json_quote(s.job) +
                    ", \"state\": " + json_quote(s.state) +
                    ", \"allocation\": " + std::to_string(s.allocation) +
                    ", \"attempt\": " + std::to_string(s.attempt) +
                    ", \"checkpoint\": " + json_quote(s.checkpoint) + ", \"ranks\": [";
  for (std::size_t i = 0; i < s.ranks.size(); ++i) {
    const RankStatus& r = s.ranks[i];
    out += i == 0 ? "\n  " : ",\n  ";
    out += "{\"rank\": " + std::to_string(r.rank) + ", \"node\": " + json_quote(r.node) +
           ", \"state\": " + json_quote(r.state);
    if (r.steps) out += ", \"steps\": " + std::to_string(*r.steps);
    if (r.step_seconds) out += ", \"step_seconds\": " + number(*r.step_seconds);
    if (r.rss_bytes) out += ", \"rss_bytes\": " + std::to_string(*r.rss_bytes);
    if (r.cpu_seconds) out += ", \"cpu_seconds\": " + number(*r.cpu_seconds);
    if (r.seconds_since_report) {
      out += ", \"seconds_since_report\": " + number(*r.seconds_since_report);
    }
    if (!r.ended.empty()) out += ", \"ended\": " + json_quote(r.ended);
    out += "}";
  }
  out += s.ranks.empty() ? "]}\n" : "\n]}\n";
  return out;
}

bool write_status(const std::filesystem::path& path, const std::string& text) {
  const std::string temporary = path.string() + ".tmp";
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return false;
  }
  return true;
}

}  // namespace primus::launch
