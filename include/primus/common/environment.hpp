// Environments as Primus reads and writes them, and the one function that prints them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace primus {

// Variables read (from a process, a SPANK job, a test).
using Environment = std::map<std::string, std::string, std::less<>>;

// Variables to set, in order.
using EnvList = std::vector<std::pair<std::string, std::string>>;

std::optional<std::string> lookup(const Environment& env, std::string_view name);

// True for variables whose value must never be printed (PRIMUS_JOB_SECRET).
bool is_secret_variable(std::string_view name);

// "NAME=value" lines, one per variable, secrets replaced by "<redacted>". Every dump of an
// environment that Primus prints goes through this function.
std::string format_environment(const EnvList& vars);
std::string format_environment(const Environment& vars);

}  // namespace primus
