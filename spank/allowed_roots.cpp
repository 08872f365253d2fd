#include "allowed_roots.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "primus/common/error.hpp"

namespace primus::spank {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string real_path(const std::string& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return {};
  return buffer;
}

bool is_under(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

}  // namespace

std::string canonical_path(const std::string& path, const std::string& base) {
  const std::string absolute = !path.empty() && path.front() == '/' ? path : base + "/" + path;
  // Resolve the longest existing prefix, then append the rest component by component.
  std::vector<std::string> parts = split(absolute, '/');
  parts.erase(std::remove_if(parts.begin(), parts.end(),
                             [](const std::string& part) { return part.empty() || part == "."; }),
              parts.end());
  std::string resolved = "/";
  std::size_t i = 0;
  for (; i < parts.size(); ++i) {
    if (parts[i] == "..") {
      resolved += "/..";
      resolved = real_path(resolved);
      if (resolved.empty()) resolved = "/";
      continue;
    }
    const std::string next = real_path((resolved == "/" ? "" : resolved) + "/" + parts[i]);
    if (next.empty()) break;
    resolved = next;
  }
  for (; i < parts.size(); ++i) {
    if (parts[i] == "..") {
      const std::size_t slash = resolved.find_last_of('/');
      resolved = slash == 0 ? "/" : resolved.substr(0, slash);
    } else {
      resolved = (resolved == "/" ? "" : resolved) + "/" + parts[i];
    }
  }
  return resolved;
}

void check_under_roots(const std::string& what, const std::string& path, const std::string& base,
                       const std::string& roots) {
  if (roots.empty()) return;
  const std::string canonical = canonical_path(path, base);
  for (const std::string& root : split(roots, ':')) {
    const std::string real_root = real_path(root);
    if (is_under(canonical, real_root.empty() ? root : real_root)) return;
  }
  throw Error(what + ": '" + path + "' resolves to '" + canonical +
              "', outside the directories this site allows (" + roots + ")");
}

void check_directories(const ResolvedOptions& options, const std::string& base) {
  const std::string roots = options.value_or("ckpt-roots", "");
  for (const char* name : {"primus-ckpt-dir", "primus-job-dir"}) {
    if (const auto dir = options.get(name)) {
      check_under_roots(option_display_name(*find_option(name), dir->source), dir->value, base,
                        roots);
    }
  }
}

}  // namespace primus::spank
