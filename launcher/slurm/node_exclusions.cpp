#include "slurm/node_exclusions.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

namespace primus::launch {
namespace {

std::optional<Exclusion> entry(const nlohmann::json& item) {
  if (!item.is_object()) return std::nullopt;
  const auto node = item.find("node");
  if (node == item.end() || !node->is_string() || node->get<std::string>().empty()) {
    return std::nullopt;
  }
  Exclusion e;
  e.node = node->get<std::string>();
  if (const auto it = item.find("reason"); it != item.end() && it->is_string())
    e.reason = it->get<std::string>();
  if (const auto it = item.find("time"); it != item.end() && it->is_string())
    e.time = it->get<std::string>();
  if (const auto it = item.find("allocation"); it != item.end() && it->is_number_unsigned())
    e.allocation = it->get<std::uint32_t>();
  if (const auto it = item.find("attempt"); it != item.end() && it->is_number_unsigned())
    e.attempt = it->get<std::uint32_t>();
  return e;
}

}  // namespace

std::string exclusions_document(const std::vector<Exclusion>& exclusions) {
  nlohmann::json list = nlohmann::json::array();
  for (const Exclusion& e : exclusions) {
    list.push_back({{"node", e.node},
                    {"reason", e.reason},
                    {"time", e.time},
                    {"allocation", e.allocation},
                    {"attempt", e.attempt}});
  }
  return nlohmann::json{{"excluded", list}}.dump(2) + "\n";
}

std::optional<std::vector<Exclusion>> parse_exclusions_document(const std::string& text) {
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  if (!parsed.is_object()) return std::nullopt;
  const auto list = parsed.find("excluded");
  if (list == parsed.end() || !list->is_array()) return std::nullopt;
  std::vector<Exclusion> all;
  std::set<std::string> seen;
  for (const nlohmann::json& item : *list) {
    const auto e = entry(item);
    if (e && seen.insert(e->node).second) all.push_back(*e);
  }
  return all;
}

std::vector<Exclusion> NodeExclusions::load() const {
  std::ifstream in(file_);
  if (!in) return {};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto all = parse_exclusions_document(text);
  if (!all) {
    std::cerr << "primus-launch: " << file_.string()
              << " is not a list of excluded nodes; no node is excluded\n";
    return {};
  }
  return *all;
}

std::set<std::string> NodeExclusions::nodes() const {
  std::set<std::string> nodes;
  for (const Exclusion& e : load())
    nodes.insert(e.node);
  return nodes;
}

bool NodeExclusions::add(const Exclusion& exclusion) const {
  std::vector<Exclusion> all = load();
  for (const Exclusion& e : all)
    if (e.node == exclusion.node) return true;
  all.push_back(exclusion);
  const std::string text = exclusions_document(all);
  const std::filesystem::path temporary = file_.string() + ".tmp";
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int error = errno;
  if (fd >= 0) ::close(fd);
  if (ok && ::rename(temporary.c_str(), file_.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    std::cerr << "primus-launch: cannot record the exclusion of " << exclusion.node << " in "
              << file_.string() << ": " << std::strerror(error)
              << " (it holds for this launch only)\n";
  }
  return ok;
}

}  // namespace primus::launch
