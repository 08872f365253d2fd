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

std::optional<std::filesystem::path> installed_part(const std::vector<std::filesystem::path>& dirs,
                                                    const std::string& name, int mode) {
  for (const std::filesystem::path& dir : dirs) {
    const std::filesystem::path path = dir / name;
    if (::access(path.c_str(), mode) == 0) return path.lexically_normal();
  }
  return std::nullopt;
}

std::string listed_dirs(const std::vector<std::filesystem::path>& dirs) {
  std::string out;
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    if (i > 0) out += i + 1 == dirs.size() ? " and " : ", ";
    out += dirs[i].lexically_normal().string();
  }
  return out;
}

}  // namespace primus::launch
