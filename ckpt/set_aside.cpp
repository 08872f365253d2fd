// A checkpoint root moved aside (store.hpp, set_aside): --primus-fresh's one implementation, for
// primus-launch (through `primus-ckpt set-aside`) and for a plain script (primus._ckpt).
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "fs.hpp"
#include "primus/ckpt/store.hpp"
#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

std::string utc_stamp(std::time_t now) {
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &parts);
  return text;
}

}  // namespace

std::string set_aside_name(const std::string& root_name, std::time_t now, int attempt) {
  std::string name = root_name + ".old-" + utc_stamp(now);
  if (attempt > 1) name += "-" + std::to_string(attempt);
  return name;
}

std::optional<std::filesystem::path> set_aside(const std::filesystem::path& root) {
  const std::filesystem::path clean = root.lexically_normal();
  const std::filesystem::path path =
      clean.has_filename() ? clean : clean.parent_path();  // "ckpt/" names ckpt
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw Error(path.string() + ": cannot look at it: " + std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode)) {
    throw Error(path.string() + ": not a directory (a checkpoint root is one); nothing was moved");
  }
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
  const std::time_t now = std::time(nullptr);
  for (int attempt = 1; attempt <= 100; ++attempt) {
    const std::filesystem::path target = parent / set_aside_name(path.filename(), now, attempt);
    // Never over another run's set-aside checkpoints (two fresh starts within a second).
    if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) {
      const os::UniqueFd dir = fs::open_directory(parent);
      fs::fsync_fd(dir.get(), parent);
      return target;
    }
    if (errno != EEXIST) {
      throw Error(path.string() + ": cannot move it aside to " + target.string() + ": " +
                  std::strerror(errno));
    }
  }
  throw Error(path.string() + ": cannot move it aside: 100 names " + path.filename().string() +
              ".old-" + utc_stamp(now) + "-N are taken");
}

}  // namespace primus::ckpt
