#include "fs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "primus/common/error.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::ckpt::fs {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw Error(what + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

void fsync_path(const std::filesystem::path& path) {
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail("cannot open", path);
  if (::fsync(fd.get()) != 0) fail("cannot fsync", path);
  if (::close(fd.release()) != 0) fail("cannot close", path);
}

void replace_file(const std::filesystem::path& path, const std::string& contents) {
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  {
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    os::UniqueFd fd(::open(temporary.c_str(), flags, 0600));
    if (fd.get() < 0 && errno == EEXIST && ::unlink(temporary.c_str()) == 0) {
      fd.reset(::open(temporary.c_str(), flags, 0600));
    }
    if (fd.get() < 0) fail("cannot create", temporary);
    std::size_t done = 0;
    while (done < contents.size()) {
      const ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int saved = errno;
        ::unlink(temporary.c_str());
        errno = saved;
        fail("cannot write", temporary);
      }
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) {
      const int saved = errno;
      ::unlink(temporary.c_str());
      errno = saved;
      fail("cannot fsync", temporary);
    }
    if (::close(fd.release()) != 0) fail("cannot close", temporary);
  }
  rename_path(temporary, path);
}

std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) fail("cannot open", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("cannot stat", path);
  if (!S_ISREG(st.st_mode)) throw Error(path.string() + " is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    throw Error(path.string() + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string contents(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::read(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read", path);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  contents.resize(done);
  return contents;
}

os::UniqueFd make_private_directory(const std::filesystem::path& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) fail("cannot create", path);
  os::UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      throw Error(path.string() +
                  " exists and is not a directory (a symbolic link?): refusing "
                  "to write a checkpoint there");
    }
    fail("cannot open", path);
  }
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) fail("cannot stat", path);
  if (st.st_uid != ::geteuid()) {
    throw Error(path.string() + " belongs to user " + std::to_string(st.st_uid) +
                ", not to this job's user: refusing to write a checkpoint into it");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw Error(path.string() + " can be written by others (mode " +
                std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                std::to_string(st.st_mode & 7) + "): refusing to write a checkpoint into it");
  }
  return dir;
}

void mark_in_use(int dir) {
  while (::flock(dir, LOCK_SH) != 0 && errno == EINTR) {
  }
}

bool in_use(const std::filesystem::path& path) {
  os::UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) return false;
  if (::flock(dir.get(), LOCK_EX | LOCK_NB) == 0) return false;  // released when dir closes
  return errno == EWOULDBLOCK;
}

os::UniqueFd create_new_file(int dir, const std::filesystem::path& dir_path,
                             const std::string& name) {
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  os::UniqueFd fd(::openat(dir, name.c_str(), flags, 0600));
  if (fd.get() < 0 && errno == EEXIST && ::unlinkat(dir, name.c_str(), 0) == 0) {
    fd.reset(::openat(dir, name.c_str(), flags, 0600));
  }
  if (fd.get() < 0) fail("cannot create", dir_path / name);
  return fd;
}

void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw Error("cannot rename " + from.string() + " to " + to.string() + ": " +
                std::strerror(errno));
  }
}

std::uint64_t file_size(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) fail("cannot stat", path);
  if (!S_ISREG(st.st_mode)) throw Error(path.string() + " is not a regular file");
  return static_cast<std::uint64_t>(st.st_size);
}

void remove_tree(const std::filesystem::path& path) {
  std::error_code error;
  // remove_all removes symbolic links themselves, never what they point at.
  std::filesystem::remove_all(path, error);
  if (error) throw Error("cannot remove " + path.string() + ": " + error.message());
}

}  // namespace primus::ckpt::fs
