// Which rank commands a rejoin's standby can become (standby_program.hpp).
#include "local/standby_program.hpp"

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace primus::launch {
namespace {

// python, python3, python3.11 (a venv's and the system's interpreters alike).
bool is_python(const std::string& executable) {
  const std::string name = std::filesystem::path(executable).filename().string();
  const std::string stem = "python";
  if (name.compare(0, stem.size(), stem) != 0) return false;
  for (std::size_t i = stem.size(); i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (std::isdigit(c) == 0 && c != '.') return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<std::string>> python_program(const std::string& executable,
                                                       const std::vector<std::string>& argv) {
  if (!is_python(executable) || argv.size() < 2) return std::nullopt;
  const std::string& first = argv[1];
  if (first == "-m") {
    if (argv.size() < 3 || argv[2].empty() || argv[2][0] == '-') return std::nullopt;
  } else if (first.empty() || first[0] == '-') {
    return std::nullopt;  // -c, -u, -X ...: the interpreter's own options
  }
  return std::vector<std::string>(argv.begin() + 1, argv.end());
}

std::string standby_assignment(const std::vector<std::string>& program, const Environment& env) {
  nlohmann::json message;
  message["argv"] = program;
  nlohmann::json variables = nlohmann::json::object();
  for (const auto& [name, value] : env)
    variables[name] = value;
  message["env"] = std::move(variables);
  // Bytes that are not UTF-8 (an environment may hold any) are replaced, not refused.
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace primus::launch
