#include "primus/common/environment.hpp"

namespace primus {
namespace {

void append_line(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out += '=';
  if (is_secret_variable(name)) {
    out += "<redacted>";
  } else {
    out.append(value);
  }
  out += '\n';
}

}  // namespace

std::optional<std::string> lookup(const Environment& env, std::string_view name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

bool is_secret_variable(std::string_view name) {
  return name == "PRIMUS_JOB_SECRET";
}

std::string format_environment(const EnvList& vars) {
  std::string out;
  for (const auto& [name, value] : vars)
    append_line(out, name, value);
  return out;
}

std::string format_environment(const Environment& vars) {
  std::string out;
  for (const auto& [name, value] : vars)
    append_line(out, name, value);
  return out;
}

}  // namespace primus
