#include "monitor/replaced_file.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <utility>

#include "primus/os/unique_fd.hpp"

namespace primus::launch {
namespace {

// File systems whose leases see every reader (they are on this machine). On a shared one (NFS,
// Lustre, GPFS) a reader on another node holds no lease here, so a version is never rewritten.
bool local_file_system(int fd) {
  struct statfs about {};
  if (::fstatfs(fd, &about) != 0) return false;
  switch (static_cast<unsigned long>(about.f_type)) {
    case EXT4_SUPER_MAGIC:  // ext2, ext3 and ext4 share it
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case TMPFS_MAGIC:
      return true;
    default:
      return false;
  }
}

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// `from` takes `to`'s name and `to` `from`'s, at once; where there is nothing to exchange with
// (the first version) or the file system cannot, `from` is renamed over `to`. Whether `from`'s
// name now holds `to`'s old version.
enum class Placed { kExchanged, kRenamed, kFailed };
Placed place(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
    return Placed::kExchanged;
  }
  return std::rename(from.c_str(), to.c_str()) == 0 ? Placed::kRenamed : Placed::kFailed;
}

}  // namespace

ReplacedFile::ReplacedFile(std::filesystem::path path)
    : path_(std::move(path)), previous_(path_.string() + ".previous") {}

ReplacedFile::~ReplacedFile() {
  if (have_previous_) ::unlink(previous_.c_str());
}

bool ReplacedFile::write(const std::string& text) {
  if (have_previous_ && rewrite_previous(text)) return true;
  return write_new(text);
}

// The previous version's file, rewritten in place under a write lease, then exchanged with the
// current one. False, with nothing changed, when another descriptor has it open, when it is not
// this launcher's plain file, or on a file system that is not local.
bool ReplacedFile::rewrite_previous(const std::string& text) {
  const os::UniqueFd fd(::open(previous_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return false;
  struct stat about {};
  if (::fstat(fd.get(), &about) != 0 || !S_ISREG(about.st_mode) || about.st_uid != ::geteuid() ||
      about.st_nlink != 1 || !local_file_system(fd.get())) {
    return false;
  }
  // A reader that opens the file while the lease is held breaks it: the kernel signals the
  // holder and holds the open until the lease goes. SIGURG, ignored unless handled, instead of
  // SIGIO, which would end the launcher.
  if (::fcntl(fd.get(), F_SETSIG, SIGURG) != 0 || ::fcntl(fd.get(), F_SETLEASE, F_WRLCK) != 0) {
    return false;  // someone has it open (EAGAIN), or no leases here
  }
  // Over the old text, then cut to the new length: the file's pages are overwritten, not freed
  // and allocated again (no reader can see the mix: an open waits for the lease).
  const bool written =
      write_all(fd.get(), text) && ::ftruncate(fd.get(), static_cast<off_t>(text.size())) == 0;
  ::fcntl(fd.get(), F_SETLEASE, F_UNLCK);
  if (!written) {
    have_previous_ = false;  // a partial file: write_new removes it
    return false;
  }
  switch (place(previous_, path_)) {
    case Placed::kExchanged:
      ++reused_;
      return true;
    case Placed::kRenamed:  // the current version was gone
      have_previous_ = false;
      ++reused_;
      return true;
    case Placed::kFailed:
      break;
  }
  have_previous_ = false;
  return false;
}

bool ReplacedFile::write_new(const std::string& text) {
  // A previous version someone still reads keeps its data until they close it; a file left
  // by a launcher that died goes.
  ::unlink(previous_.c_str());
  have_previous_ = false;
  os::UniqueFd fd(
      ::open(previous_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return false;
  const bool written = write_all(fd.get(), text);
  if (!written || ::close(fd.release()) != 0) {
    ::unlink(previous_.c_str());
    return false;
  }
  switch (place(previous_, path_)) {
    case Placed::kExchanged:
      have_previous_ = true;
      break;
    case Placed::kRenamed:
      break;
    case Placed::kFailed:
      ::unlink(previous_.c_str());
      return false;
  }
  ++created_;
  return true;
}

bool replace_file(const std::filesystem::path& path, const std::string& text) {
  return ReplacedFile(path).write(text);
}

}  // namespace primus::launch
