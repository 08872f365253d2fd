// This process (self_process.hpp).
#include "cli/self_process.hpp"

#include <unistd.h>

#include <cstring>

#include "primus/common/error.hpp"

extern char** environ;

namespace primus::launch {

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::filesystem::path absolute_from_here(const std::string& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? std::filesystem::path(path) : absolute.lexically_normal();
}

Environment process_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    if (eq != nullptr) env[std::string(*entry, static_cast<std::size_t>(eq - *entry))] = eq + 1;
  }
  return env;
}

std::string self_executable() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Error("cannot find primus-launch's own path (/proc/self/exe)");
  return path.string();
}

}  // namespace primus::launch
