// The nodes a job keeps its ranks off (docs/architecture.md, "Node failures"): lost nodes and
// nodes where ranks failed, with the reason. They live in the job directory
// (excluded-nodes.json: {"excluded": [{"node", "reason", "time", "allocation", "attempt"}, ...]},
// replaced atomically), so that every later attempt and every later allocation of the job avoids
// them. OS adapter; the document's format is pure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace primus::launch {

struct Exclusion {
  std::string node;
  std::string reason;  // "lost: State=DOWN ...", "ranks 2 and 5 failed there"
  std::string time;    // ISO 8601 UTC
  std::uint32_t allocation = 0;
  std::uint32_t attempt = 0;
};

// The document (pure), and back: the entries with a node name, the first of each node, in order;
// nullopt for a text that is not such a document.
std::string exclusions_document(const std::vector<Exclusion>& exclusions);
std::optional<std::vector<Exclusion>> parse_exclusions_document(const std::string& text);

class NodeExclusions {
 public:
  explicit NodeExclusions(std::filesystem::path file) : file_(std::move(file)) {}
  // Every exclusion recorded so far (the first of each node), in order; none, after a line on
  // stderr, when the file is not such a document.
  std::vector<Exclusion> load() const;
  std::set<std::string> nodes() const;
  // Records one more (a node already there keeps its first reason): a temporary file, synced,
  // renamed over the file. False, after a line on stderr, when it cannot be written (the
  // exclusion then holds for this launch only).
  bool add(const Exclusion& exclusion) const;

 private:
  std::filesystem::path file_;
};

}  // namespace primus::launch
