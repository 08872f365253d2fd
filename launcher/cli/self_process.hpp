// This process as primus-launch sees it: its host name, its executable, its environment, and
// paths given relative to where it was started.
#pragma once

#include <filesystem>
#include <string>

#include "primus/common/environment.hpp"

namespace primus::launch {

std::string this_hostname();
// `path` made absolute from the working directory, normalized (as given when that fails).
std::filesystem::path absolute_from_here(const std::string& path);
Environment process_environment();
// primus-launch's own path (/proc/self/exe); throws Error when it cannot be read.
std::string self_executable();

}  // namespace primus::launch
