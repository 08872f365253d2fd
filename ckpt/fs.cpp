#include "fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>
#include <vector>

#include "primus/common/error.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::ckpt::fs {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw Error(what + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

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

std::uint64_t file_size(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) fail("cannot stat", path);
  if (!S_ISREG(st.st_mode)) throw Error(path.string() + " is not a regular file");
  return static_cast<std::uint64_t>(st.st_size);
}

os::UniqueFd open_directory(const std::filesystem::path& path) {
  os::UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      throw Error(path.string() + " is not a directory (a symbolic link?)");
    }
    fail("cannot open", path);
  }
  return dir;
}

os::UniqueFd open_private_directory_at(int dir, const std::filesystem::path& dir_path,
                                       const std::string& name) {
  const std::filesystem::path path = dir_path / name;
  os::UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      throw Error(path.string() + " is not a directory (a symbolic link?)");
    }
    fail("cannot open", path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("cannot stat", path);
  if (st.st_uid != ::geteuid()) {
    throw Error(path.string() + " belongs to user " + std::to_string(st.st_uid) +
                ", not to this job's user");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw Error(path.string() + " can be written by others (mode " +
                std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                std::to_string(st.st_mode & 7) + ")");
  }
  return fd;
}

std::filesystem::path through(int dir, const std::string& name) {
  return std::filesystem::path("/proc/self/fd") / std::to_string(dir) / name;
}

bool is_same_at(int dir, const std::string& name, int fd) {
  struct stat named {};
  struct stat open {};
  if (::fstatat(dir, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (::fstat(fd, &open) != 0) return false;
  return named.st_dev == open.st_dev && named.st_ino == open.st_ino;
}

void replace_file_at(int dir, const std::filesystem::path& dir_path, const std::string& name,
                     const std::string& contents) {
  const std::string temporary = name + ".tmp";
  const std::filesystem::path shown = dir_path / temporary;
  {
    os::UniqueFd fd = create_new_file(dir, dir_path, temporary);
    std::size_t done = 0;
    while (done < contents.size()) {
      const ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int saved = errno;
        ::unlinkat(dir, temporary.c_str(), 0);
        errno = saved;
        fail("cannot write", shown);
      }
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) {
      const int saved = errno;
      ::unlinkat(dir, temporary.c_str(), 0);
      errno = saved;
      fail("cannot fsync", shown);
    }
    if (::close(fd.release()) != 0) fail("cannot close", shown);
  }
  rename_at(dir, dir_path, temporary, name);
}

std::optional<std::string> read_small_file_at(int dir, const std::string& name,
                                              std::uint64_t max_bytes) {
  os::UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return std::nullopt;
  }
  std::string contents(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::read(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  contents.resize(done);
  return contents;
}

void rename_at(int dir, const std::filesystem::path& dir_path, const std::string& from,
               const std::string& to) {
  if (::renameat(dir, from.c_str(), dir, to.c_str()) != 0) {
    throw Error("cannot rename " + (dir_path / from).string() + " to " + (dir_path / to).string() +
                ": " + std::strerror(errno));
  }
}

bool exchange_at(int dir, const std::filesystem::path& dir_path, const std::string& a,
                 const std::string& b) {
  if (::renameat2(dir, a.c_str(), dir, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  if (errno == EINVAL || errno == ENOSYS) return false;
  throw Error("cannot exchange " + (dir_path / a).string() + " and " + (dir_path / b).string() +
              ": " + std::strerror(errno));
}

void fsync_fd(int fd, const std::filesystem::path& path) {
  if (::fsync(fd) != 0) fail("cannot fsync", path);
}

void fsync_at(int dir, const std::filesystem::path& dir_path, const std::string& name) {
  const std::filesystem::path path = dir_path / name;
  os::UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) fail("cannot open", path);
  if (::fsync(fd.get()) != 0) fail("cannot fsync", path);
  if (::close(fd.release()) != 0) fail("cannot close", path);
}

namespace {

void remove_tree_below(int dir, const std::filesystem::path& dir_path, const std::string& name,
                       int depth);

// Empties the open directory `fd` (closed on return), depth first, through descriptors only.
void empty_directory(os::UniqueFd fd, const std::filesystem::path& path, int depth) {
  DIR* stream = ::fdopendir(fd.get());
  if (stream == nullptr) fail("cannot list", path);
  const int dir = fd.release();  // owned by the stream now
  struct CloseDir {
    void operator()(DIR* d) const { ::closedir(d); }
  };
  const std::unique_ptr<DIR, CloseDir> owner(stream);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(stream)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  if (errno != 0) fail("cannot list", path);
  for (const std::string& name : names)
    remove_tree_below(dir, path, name, depth + 1);
}

void remove_tree_below(int dir, const std::filesystem::path& dir_path, const std::string& name,
                       int depth) {
  if (::unlinkat(dir, name.c_str(), 0) == 0) return;  // a file or a link
  if (errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) fail("cannot remove", dir_path / name);
  if (depth > 256) throw Error("cannot remove " + (dir_path / name).string() + ": nested too deep");
  // A directory (Linux says EISDIR; POSIX allows EPERM): open it without following a link,
  // so that one swapped in since cannot lead elsewhere, empty it, then remove it.
  os::UniqueFd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (sub.get() < 0) {
    if (errno == ENOENT) return;
    fail("cannot open", dir_path / name);
  }
  empty_directory(std::move(sub), dir_path / name, depth);
  if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    fail("cannot remove", dir_path / name);
  }
}

}  // namespace

void remove_tree_at(int dir, const std::filesystem::path& dir_path, const std::string& name) {
  remove_tree_below(dir, dir_path, name, 0);
}

}  // namespace primus::ckpt::fs
