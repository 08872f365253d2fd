#include "supervise/job_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::launch {
namespace {

std::string mode_text(mode_t mode) {
  return std::to_string((mode >> 6) & 7) + std::to_string((mode >> 3) & 7) +
         std::to_string(mode & 7);
}

// A directory of this user that only it can write, made where it is missing.
void private_directory(const std::filesystem::path& path, const std::string& what) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error("cannot create " + what + " " + path.string() + ": " + std::strerror(errno));
  }
  const os::UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) {
    throw Error(what + " " + path.string() + ": " +
                (errno == ELOOP || errno == ENOTDIR ? std::string("not a directory")
                                                    : std::string(std::strerror(errno))));
  }
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) {
    throw Error("cannot stat " + what + " " + path.string() + ": " + std::strerror(errno));
  }
  if (st.st_uid != ::geteuid()) {
    throw Error(what + " " + path.string() + " belongs to user " + std::to_string(st.st_uid) +
                ", not to you");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw Error(what + " " + path.string() + " can be written by others (mode " +
                mode_text(st.st_mode) + "); it holds the job's logs and stop requests");
  }
  if (::faccessat(dir.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    throw Error(what + " " + path.string() + " is not writable: " + std::strerror(errno));
  }
}

}  // namespace

std::string rank_log_name(std::uint32_t rank) {
  return "rank-" + std::to_string(rank) + ".log";
}

std::string rank_log_name(std::uint32_t rank, std::uint32_t generation) {
  if (generation == 0) return rank_log_name(rank);
  return "rank-" + std::to_string(rank) + ".gen-" + std::to_string(generation) + ".log";
}

JobDir::JobDir(std::filesystem::path path) : path_(std::move(path)) {
  private_directory(path_, "the job directory");
  private_directory(path_ / "logs", "the job directory's");
}

std::uint32_t JobDir::next_allocation() const {
  std::uint32_t next = 0;
  std::error_code error;
  for (std::filesystem::directory_iterator it(path_ / "logs", error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("alloc-", 0) != 0) continue;
    const auto n = parse_unsigned(std::string_view(name).substr(6), 1U << 30);
    if (n && *n + 1 > next) next = static_cast<std::uint32_t>(*n + 1);
  }
  return next;
}

std::filesystem::path JobDir::attempt_logs(std::uint32_t allocation, std::uint32_t attempt) const {
  const std::filesystem::path alloc = path_ / "logs" / ("alloc-" + std::to_string(allocation));
  private_directory(alloc, "the log folder");
  std::filesystem::path folder = alloc / ("attempt-" + std::to_string(attempt));
  private_directory(folder, "the log folder");
  return folder;
}

}  // namespace primus::launch
