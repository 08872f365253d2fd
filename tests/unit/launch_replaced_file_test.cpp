// ReplacedFile (launcher/monitor/replaced_file.hpp): status.json's versions, each whole for its
// readers, written into the previous version's file when no one has that open. Real files in
// the temporary directory; the reuse is checked where that is a local file system (as here).
#include "monitor/replaced_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>

namespace primus::launch {
namespace {

bool is_local(const std::filesystem::path& dir) {
  struct statfs about {};
  if (::statfs(dir.c_str(), &about) != 0) return false;
  const auto type = static_cast<unsigned long>(about.f_type);
  return type == EXT4_SUPER_MAGIC || type == TMPFS_MAGIC || type == XFS_SUPER_MAGIC ||
         type == BTRFS_SUPER_MAGIC;
}

// Where the files go: the temporary directory, or /dev/shm where that one is not on a local
// file system (a container's overlay), so that the reuse is tested there too.
std::filesystem::path test_dir() {
  const std::filesystem::path temp = std::filesystem::temp_directory_path();
  return !is_local(temp) && is_local("/dev/shm") ? std::filesystem::path("/dev/shm") : temp;
}

bool dir_is_local() {
  return is_local(test_dir());
}

std::filesystem::path fresh_path(const std::string& name) {
  const std::filesystem::path path =
      test_dir() / ("primus-replaced-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".previous");
  return path;
}

std::string read_fd(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()))) > 0)
    text.append(buffer, static_cast<std::size_t>(n));
  return text;
}

std::string read_path(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

ino_t inode_of(const std::filesystem::path& path) {
  struct stat about {};
  return ::stat(path.c_str(), &about) == 0 ? about.st_ino : 0;
}

// A version that shows whether it is whole: its number at both ends, and a length of its own.
std::string version(int n) {
  return "version " + std::to_string(n) + " " +
         std::string(static_cast<std::size_t>(n % 7) * 900, 'x') + " end " + std::to_string(n) +
         "\n";
}

bool whole_version(const std::string& text) {
  const auto space = text.find(' ', 8);
  if (text.rfind("version ", 0) != 0 || space == std::string::npos) return false;
  return text == version(std::stoi(text.substr(8, space - 8)));
}

TEST(LaunchReplacedFile, EveryReaderKeepsTheVersionItOpenedWhole) {
  const std::filesystem::path path = fresh_path("readers");
  {
    ReplacedFile file(path);
    ASSERT_TRUE(file.write(version(1)));
    const int first = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(first, 0);
    ASSERT_TRUE(file.write(version(2)));
    const int second = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(second, 0);
    for (int n = 3; n <= 6; ++n)
      ASSERT_TRUE(file.write(version(n)));
    EXPECT_EQ(read_fd(first), version(1));
    EXPECT_EQ(read_fd(second), version(2));
    ::close(first);
    ::close(second);
    EXPECT_EQ(read_path(path), version(6));
    EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  // The job's end leaves the last version and nothing beside it.
  EXPECT_EQ(read_path(path), version(6));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".previous"));
  std::filesystem::remove(path);
}

TEST(LaunchReplacedFile, ThePreviousFileIsRewrittenWhenNoOneHasItOpen) {
  if (!dir_is_local())
    GTEST_SKIP() << "neither the temporary directory nor /dev/shm is on a local file system";
  const std::filesystem::path path = fresh_path("reuse");
  ReplacedFile file(path);
  std::set<ino_t> inodes;
  for (int n = 1; n <= 8; ++n) {
    ASSERT_TRUE(file.write(version(n)));
    inodes.insert(inode_of(path));
    EXPECT_EQ(read_path(path), version(n));
  }
  // The first version has nothing to take the place of, the second nothing to rewrite; every
  // later one goes into the file of the one before the current.
  EXPECT_EQ(file.created(), 2u);
  EXPECT_EQ(file.reused(), 6u);
  EXPECT_EQ(inodes.size(), 2u);

  // A reader of the version that becomes the previous one keeps it: the next version is a
  // new file, and the reuse resumes after.
  const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(file.write(version(9)));
  ASSERT_TRUE(file.write(version(10)));
  EXPECT_EQ(read_fd(reader), version(8));
  EXPECT_EQ(file.created(), 3u);
  ::close(reader);
  ASSERT_TRUE(file.write(version(11)));
  EXPECT_EQ(file.reused(), 8u);
  EXPECT_EQ(read_path(path), version(11));
  std::filesystem::remove(path);
}

// Readers that open and read as fast as they can while versions follow each other: each read
// is one version, whole, from its first byte to its last however long the reader takes (a
// reader that opens the file being rewritten waits for its lease).
TEST(LaunchReplacedFile, ConcurrentReadersSeeOnlyWholeVersions) {
  const std::filesystem::path path = fresh_path("concurrent");
  ReplacedFile file(path);
  ASSERT_TRUE(file.write(version(0)));
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, torn{0};
  std::string example;
  std::thread reader([&] {
    while (!done.load()) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        ++torn;  // the file must always be there
        continue;
      }
      // The start of it, a pause long enough for a few versions to follow, then all of it.
      char start[24] = {};
      const ssize_t got = ::pread(fd, start, sizeof start, 0);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      const std::string text = read_fd(fd);
      ::close(fd);
      ++reads;
      if (got <= 0 ||
          text.compare(0, static_cast<std::size_t>(got), start, static_cast<std::size_t>(got)) !=
              0 ||
          !whole_version(text)) {
        if (torn.fetch_add(1) == 0) example = text.substr(0, 40);
      }
    }
  });
  for (int n = 1; n <= 3000; ++n)
    ASSERT_TRUE(file.write(version(n)));
  done.store(true);
  reader.join();
  EXPECT_EQ(torn.load(), 0) << "e.g. '" << example << "'";
  EXPECT_GT(reads.load(), 0);
  if (dir_is_local()) {
    EXPECT_GT(file.reused(), 0u);
  }
  std::filesystem::remove(path);
}

TEST(LaunchReplacedFile, AnUnwritableDirectoryIsAFailureAndLeavesNothing) {
  ReplacedFile file("/proc/no/such/status.json");
  EXPECT_FALSE(file.write("{}\n"));
}

}  // namespace
}  // namespace primus::launch
