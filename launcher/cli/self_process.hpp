// This process as primus-launch sees it: its host name, its executable, its environment, and
// paths given relative to where it was started.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "primus/common/environment.hpp"

namespace primus::launch {

std::string this_hostname();
// `path` made absolute from the working directory, normalized (as given when that fails).
std::filesystem::path absolute_from_here(const std::string& path);
Environment process_environment();
// primus-launch's own path (/proc/self/exe); throws Error when it cannot be read.
std::string self_executable();

// One of primus-launch's installed parts (primus-task, the metrics module): `name` in the first
// of `dirs` where this process may access it with `mode` (access(2)), normalized; nullopt when
// none. The dirs go from the build tree beside primus-launch, through the install beside its
// bin directory (an install moved whole, or `make install prefix=...`), to where configure put
// it.
std::optional<std::filesystem::path> installed_part(const std::vector<std::filesystem::path>& dirs,
                                                    const std::string& name, int mode);
// "A, B and C": the dirs, for the error that says where it was looked for.
std::string listed_dirs(const std::vector<std::filesystem::path>& dirs);

}  // namespace primus::launch
