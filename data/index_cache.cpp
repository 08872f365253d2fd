// Indexes of data files, cached (OS adapter): beside the data as .NAME.primus-FORMAT-index when its
// directory is writable, else in the cache directory; written to a temporary name and renamed, so
// that any number of builders at once leave one whole index. A cached index is used only when it
// belongs to this user, nobody else can write it, and it is sound and current (index_file.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "file_index.hpp"
#include "formats/format_ops.hpp"
#include "index_file.hpp"
#include "index_scan.hpp"
#include "primus/common/error.hpp"
#include "primus/common/keyed_hash.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::data {
namespace {

constexpr std::size_t kScanBuffer = std::size_t{1} << 20;

std::string system_error(const std::string& path, const std::string& doing) {
  return path + ": " + doing + ": " + std::strerror(errno);
}

std::uint64_t nanoseconds(const struct timespec& time) {
  return static_cast<std::uint64_t>(time.tv_sec) * 1000000000ULL +
         static_cast<std::uint64_t>(time.tv_nsec);
}

FileIdentity identity_of(const struct stat& info) {
  return {static_cast<std::uint64_t>(info.st_size), nanoseconds(info.st_mtim),
          nanoseconds(info.st_ctim), static_cast<std::uint64_t>(info.st_ino),
          static_cast<std::uint64_t>(info.st_dev)};
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dir_name(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// The cache directory's name for a file: the hash of its absolute path (two files of one name
// in different directories differ), and its name for people.
// One index per format: reading a file as lines never replaces its TFRecord index.
std::string elsewhere_name(const std::string& path, const FormatOps& ops) {
  constexpr SipKey kKey = {'p', 'r', 'i', 'm', 'u', 's', ' ', 'i',
                           'n', 'd', 'e', 'x', ' ', 'd', 'i', 'r'};
  const std::string full = absolute(path);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(siphash24(kKey, full.data(), full.size())));
  return std::string(hash) + "-" + base_name(path) + std::string(ops.index_suffix);
}

// Maps a cached index and checks it; null when it is missing, not trusted, or not valid.
std::unique_ptr<Dataset::FileIndex> load_cached(const std::string& index_path, FormatKind kind,
                                                const FileIdentity& identity) {
  os::UniqueFd fd(::open(index_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return nullptr;
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::geteuid() ||
      (info.st_mode & (S_IWGRP | S_IWOTH)) != 0 || info.st_size <= 0) {
    return nullptr;
  }
  auto index = std::make_unique<Dataset::FileIndex>();
  index->map_size = static_cast<std::size_t>(info.st_size);
  void* map = ::mmap(nullptr, index->map_size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (map == MAP_FAILED) return nullptr;
  index->map = map;
  const auto view =
      parse_index(static_cast<const std::uint8_t*>(map), index->map_size, kind, identity, nullptr);
  if (!view) return nullptr;
  index->records = view->records;
  index->starts = view->starts;
  index->last_line_unterminated = view->last_line_unterminated;
  return index;
}

// Reads the whole file once; throws Error naming the file and the offset of a bad record.
ScannedIndex scan_file(const std::string& path, int fd, FormatKind kind, const ScanBuffer& buffer) {
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  IndexScanner scanner(kind);
  try {
    for (;;) {
      const ssize_t got = ::read(fd, buffer.data(), buffer.size());
      if (got < 0) {
        if (errno == EINTR) continue;
        throw Error(system_error(
            path, "read error at byte offset " + std::to_string(scanner.bytes_seen())));
      }
      if (got == 0) break;
      scanner.feed(buffer.data(), static_cast<std::size_t>(got));
    }
    return scanner.finish();
  } catch (const RecordError& e) {
    throw Error(path + ": " + e.what());
  }
}

bool write_whole(int fd, const std::vector<std::uint8_t>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    done += static_cast<std::size_t>(wrote);
  }
  return true;
}

// Writes the index under a temporary name in `dir` and renames it to `name`; false when it
// cannot (a read-only directory, a full disk): the index is then kept in memory only.
bool store(const std::string& dir, const std::string& name,
           const std::vector<std::uint8_t>& bytes) {
  std::string temp = dir + "/." + name + ".XXXXXX";
  if (name.front() == '.') temp = dir + "/" + name + ".XXXXXX";
  os::UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd) return false;
  const bool written = write_whole(fd.get(), bytes) && ::close(fd.release()) == 0;
  if (!written || ::rename(temp.c_str(), (dir + "/" + name).c_str()) != 0) {
    ::unlink(temp.c_str());
    return false;
  }
  return true;
}

// The cache directory, made (with its parents) 0700 where missing; it must be this user's and
// writable by nobody else.
bool make_private_dir(const std::string& dir) {
  for (std::size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    ::mkdir(dir.substr(0, slash).c_str(), 0700);
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat info {};
  return ::lstat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::geteuid() &&
         (info.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

}  // namespace

std::string default_index_cache_dir() {
  if (const char* job = std::getenv("PRIMUS_JOB_DIR"); job != nullptr && *job != '\0') {
    return std::string(job) + "/index";
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return std::string(xdg) + "/primus/index";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return std::string(home) + "/.cache/primus/index";
  }
  return "";
}

Dataset::FileIndex::~FileIndex() {
  if (map != nullptr) ::munmap(map, map_size);
}

ScanBuffer::ScanBuffer() : size_(kScanBuffer), bytes_(new std::uint8_t[kScanBuffer]) {}

std::unique_ptr<Dataset::FileIndex> index_file(const std::string& path, const OpenOptions& options,
                                               DataFile& file, const ScanBuffer& buffer) {
  file.path = path;
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw Error(system_error(path, "cannot open"));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw Error(system_error(path, "cannot stat"));
  if (!S_ISREG(info.st_mode)) throw Error(path + ": not a regular file");
  const FileIdentity identity = identity_of(info);
  file.size = identity.size;
  const RecordFormat& format = options.format;

  const FormatOps& ops = format_ops(format.kind);
  if (!ops.indexed()) {
    file.records = ops.count_records(format, path, identity.size);
    file.origin = IndexOrigin::kNone;
    auto index = std::make_unique<Dataset::FileIndex>();
    index->records = file.records;
    return index;
  }

  const std::string beside_dir = dir_name(path);
  const std::string beside_name = "." + base_name(path) + std::string(ops.index_suffix);
  const std::string elsewhere = elsewhere_name(path, ops);
  if (options.use_cache) {
    if (auto index = load_cached(beside_dir + "/" + beside_name, format.kind, identity)) {
      file.records = index->records;
      file.origin = IndexOrigin::kCachedBeside;
      file.index_path = beside_dir + "/" + beside_name;
      return index;
    }
    if (!options.cache_dir.empty()) {
      if (auto index = load_cached(options.cache_dir + "/" + elsewhere, format.kind, identity)) {
        file.records = index->records;
        file.origin = IndexOrigin::kCachedElsewhere;
        file.index_path = options.cache_dir + "/" + elsewhere;
        return index;
      }
    }
  }

  ScannedIndex scanned = scan_file(path, fd.get(), format.kind, buffer);
  struct stat after {};
  if (::fstat(fd.get(), &after) != 0 || !(identity_of(after) == identity)) {
    throw Error(path + ": the file changed while it was being indexed");
  }
  file.records = scanned.records();
  file.origin = IndexOrigin::kBuilt;
  if (options.use_cache) {
    const auto bytes = serialize_index(format.kind, identity, scanned);
    if (::access(beside_dir.c_str(), W_OK) == 0 && store(beside_dir, beside_name, bytes)) {
      file.index_path = beside_dir + "/" + beside_name;
    } else if (!options.cache_dir.empty() && make_private_dir(options.cache_dir) &&
               store(options.cache_dir, elsewhere, bytes)) {
      file.index_path = options.cache_dir + "/" + elsewhere;
    }
  }
  auto index = std::make_unique<Dataset::FileIndex>();
  index->records = scanned.records();
  index->last_line_unterminated = scanned.last_line_unterminated;
  index->owned = std::move(scanned.starts);
  index->starts = index->owned.data();
  return index;
}

}  // namespace primus::data
