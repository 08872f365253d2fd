#include "supervise/attempt_report.hpp"

#include <deque>
#include <fstream>
#include <iostream>

#include "supervise/job_dir.hpp"

namespace primus::launch {

std::vector<std::string> last_lines(const std::filesystem::path& path, std::size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > count) lines.pop_front();
  }
  return {lines.begin(), lines.end()};
}

void print_root_cause(const RankEnd& cause, const std::string& node,
                      const std::filesystem::path& log_dir, std::uint32_t attempt,
                      const std::string& what) {
  const std::filesystem::path log = log_dir / rank_log_name(static_cast<std::uint32_t>(cause.rank));
  std::cerr << "primus-launch: rank " << cause.rank << " on " << node << " " << what << ": "
            << describe(cause.wait_status) << " (attempt " << attempt << "); the last lines of "
            << log.string() << ":\n";
  for (const std::string& line : last_lines(log, 10))
    std::cerr << "  | " << line << "\n";
}

void explain_lost_peer(int rank, const std::string& node, int peer, const std::string& peer_node) {
  std::cerr << "primus-launch: rank " << rank << " (" << node << ") failed because rank " << peer
            << " (" << peer_node << ") closed its connection; rank " << peer
            << " is the root cause\n";
}

void explain_stopped_while_starting(const Outcome& outcome,
                                    const std::optional<std::string>& resume) {
  if (outcome.verdict != Verdict::kStopped || outcome.stopped_while_starting.empty()) return;
  std::string ranks;
  for (const int rank : outcome.stopped_while_starting)
    ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
  std::cerr << "primus-launch: the stop came while the ranks were starting (rank " << ranks
            << " had not returned from primus.init()): nothing was saved in this attempt; the "
            << "job resumes from " << resume.value_or("the start (no checkpoint yet)") << "\n";
}

}  // namespace primus::launch
