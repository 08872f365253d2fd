// A rejoin's generation notice and the launcher's word to kill a hung rank, as the task wrapper
// reads them, and the replacement's environment (control_protocol.hpp). Rare (once per rejoin), so
// a document is fine here.
#include <nlohmann/json.hpp>

#include <array>
#include <string>
#include <string_view>

#include "control/control_protocol.hpp"

namespace primus::launch {

std::optional<GenerationNotice> parse_generation_notice(std::string_view line, std::string& error) {
  const nlohmann::json doc = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (!doc.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  const auto type = doc.find("type");
  if (type == doc.end() || !type->is_string() || type->get<std::string>() != "generation") {
    error = "not a generation notice";
    return std::nullopt;
  }
  GenerationNotice notice;
  const auto generation = doc.find("generation");
  if (generation == doc.end() || !generation->is_number_unsigned() ||
      generation->get<std::uint64_t>() == 0 || generation->get<std::uint64_t>() > (1U << 30)) {
    error = "generation: expected a number from 1";
    return std::nullopt;
  }
  notice.generation = generation->get<std::uint32_t>();
  const std::array<std::pair<const char*, std::uint16_t*>, 2> ports = {
      {{"master_port", &notice.master_port}, {"primus_port", &notice.primus_port}}};
  for (const auto& [name, port] : ports) {
    const auto value = doc.find(name);
    if (value == doc.end() || !value->is_number_unsigned() || value->get<std::uint64_t>() == 0 ||
        value->get<std::uint64_t>() > 65535) {
      error = std::string(name) + ": expected a port from 1 to 65535";
      return std::nullopt;
    }
    *port = static_cast<std::uint16_t>(value->get<std::uint64_t>());
  }
  const auto resume = doc.find("resume");
  if (resume == doc.end() || !resume->is_string() || resume->get<std::string>().empty()) {
    error = "resume: expected the checkpoint to go on from";
    return std::nullopt;
  }
  notice.resume = resume->get<std::string>();
  return notice;
}

namespace {

bool is_line_of_type(std::string_view line, std::string_view wanted) {
  const nlohmann::json doc = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (!doc.is_object()) return false;
  const auto type = doc.find("type");
  return type != doc.end() && type->is_string() && type->get<std::string>() == wanted;
}

}  // namespace

bool is_kill_line(std::string_view line) {
  return is_line_of_type(line, "kill");
}

bool is_standby_line(std::string_view line) {
  return is_line_of_type(line, "standby");
}

std::vector<std::string> replacement_environment(const std::vector<std::string>& base,
                                                 const GenerationNotice& notice) {
  const std::array<std::pair<std::string_view, std::string>, 5> set = {
      {{"PRIMUS_GENERATION", std::to_string(notice.generation)},
       {"MASTER_PORT", std::to_string(notice.master_port)},
       {"PRIMUS_PORT", std::to_string(notice.primus_port)},
       {"PRIMUS_BOOTSTRAP", "tcp"},
       {"PRIMUS_RESUME", notice.resume}}};
  std::vector<std::string> env;
  env.reserve(base.size() + set.size());
  for (const std::string& entry : base) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [key, value] : set)
      replaced = replaced || name == key;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [key, value] : set)
    env.push_back(std::string(key) + "=" + value);
  return env;
}

}  // namespace primus::launch
