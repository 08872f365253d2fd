// read_with_checksum (ckpt/pipelined_read.hpp): a tensor's pieces read from a real file by one
// or two threads while a third checksums them in order; every byte in place, the CRC32C of the
// whole, and a clear failure (no hang, no thread left) for a short file or a bad descriptor.
#include "pipelined_read.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "crc32c.hpp"

namespace primus::ckpt {
namespace {

class PipelinedReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("primus-pipelined-" + std::to_string(::getpid()) + ".bin");
    content_.resize(3 * 1000 * 1000 + 17);
    std::uint32_t x = 12345;
    for (auto& byte : content_) {
      x = x * 1103515245U + 12345U;
      byte = static_cast<unsigned char>(x >> 24);
    }
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, content_.data(), content_.size()), static_cast<ssize_t>(content_.size()));
    ::close(fd);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    ::close(fd_);
    std::filesystem::remove(path_);
  }

  // The file from `from` on, into out, in pieces of `piece` bytes (the last one shorter).
  std::vector<ReadPiece> pieces_of(std::vector<unsigned char>& out, std::size_t from,
                                   std::size_t piece) const {
    std::vector<ReadPiece> pieces;
    for (std::size_t at = 0; at < out.size(); at += piece)
      pieces.push_back({out.data() + at, std::min(piece, out.size() - at), from + at});
    return pieces;
  }

  std::filesystem::path path_;
  std::vector<unsigned char> content_;
  int fd_ = -1;
};

TEST_F(PipelinedReadTest, EveryPieceInPlaceAndTheChecksumOfTheWholeWithOneOrTwoReaders) {
  for (const int readers : {1, 2}) {
    for (const std::size_t piece : {std::size_t{1}, std::size_t{4096}, std::size_t{65537},
                                    std::size_t{1} << 20, content_.size()}) {
      const std::size_t from = 1001;
      std::vector<unsigned char> out(content_.size() - from -
                                     (piece == 1 ? content_.size() - 5000 : 0));
      const std::uint32_t crc = read_with_checksum(fd_, pieces_of(out, from, piece), readers);
      ASSERT_TRUE(std::equal(out.begin(), out.end(), content_.begin() + static_cast<long>(from)))
          << readers << " readers, pieces of " << piece;
      EXPECT_EQ(crc, crc32c(content_.data() + from, out.size()))
          << readers << " readers, pieces of " << piece;
    }
  }
}

// Several tensors' pieces in one pass (read_with_checksums): each segment's CRC32C is that of its
// own bytes, whatever the readers and however many pieces a segment has (one, several, all but
// one), and every byte lands in place.
TEST_F(PipelinedReadTest, OnePassOverSeveralSegmentsGivesEachItsOwnChecksum) {
  for (const int readers : {1, 2}) {
    const std::size_t piece = 65537;
    std::vector<unsigned char> out(content_.size() - 3);
    const std::vector<ReadPiece> pieces = pieces_of(out, 3, piece);
    ASSERT_GT(pieces.size(), 8U);
    const std::vector<std::size_t> ends = {1, 2, 6, pieces.size() - 1, pieces.size()};
    const std::vector<std::uint32_t> sums = read_with_checksums(fd_, pieces, ends, readers);
    ASSERT_TRUE(std::equal(out.begin(), out.end(), content_.begin() + 3)) << readers;
    ASSERT_EQ(sums.size(), ends.size()) << readers;
    std::size_t begin = 0;
    for (std::size_t s = 0; s < ends.size(); ++s) {
      const std::size_t from = begin * piece;
      const std::size_t to = std::min(ends[s] * piece, out.size());
      EXPECT_EQ(sums[s], crc32c(out.data() + from, to - from))
          << readers << " readers, segment " << s;
      begin = ends[s];
    }
    // One segment: what read_with_checksum returns.
    EXPECT_EQ(read_with_checksums(fd_, pieces, {pieces.size()}, readers).front(),
              crc32c(content_.data() + 3, out.size()))
        << readers;
  }
}

TEST_F(PipelinedReadTest, AFileThatEndsInsideAPieceIsAFailureWhateverTheReaders) {
  for (const int readers : {1, 2}) {
    std::vector<unsigned char> out(content_.size());
    // The last pieces lie beyond the end of the file.
    try {
      read_with_checksum(fd_, pieces_of(out, 4096, 1 << 18), readers);
      ADD_FAILURE() << readers << " readers: no error";
    } catch (const PieceReadError& e) {
      EXPECT_EQ(e.error, 0) << readers << " readers";
    }
  }
}

TEST_F(PipelinedReadTest, AReadErrorIsReportedWithItsErrno) {
  const int closed = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(closed, 0);
  ::close(closed);  // a descriptor no longer open
  for (const int readers : {1, 2}) {
    std::vector<unsigned char> out(1 << 20);
    try {
      read_with_checksum(closed, pieces_of(out, 0, 1 << 16), readers);
      ADD_FAILURE() << readers << " readers: no error";
    } catch (const PieceReadError& e) {
      EXPECT_EQ(e.error, EBADF) << readers << " readers";
    }
  }
}

// Whether the page at `offset` of fd's file is in the page cache.
bool resident(int fd, std::uint64_t offset) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  void* const mapped =
      ::mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset / page * page));
  if (mapped == MAP_FAILED) return false;
  unsigned char in = 0;
  const bool known = ::mincore(mapped, page, &in) == 0;
  ::munmap(mapped, page);
  return known && (in & 1) != 0;
}

// After reading 24 MiB from a disk, the 16 MiB that follow are asked for: a page 12 MiB past
// the last piece (beyond the kernel's own read-ahead of a sequential stream: read_ahead_kb,
// 128 KiB by default, 8 MiB on this VM) comes into the page cache without being read; with
// two readers (the page cache's case) nothing is asked for.
TEST(PipelinedRead, OneReaderAsksForTheBytesThatFollowItsLastPiece) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("primus-ahead-" + std::to_string(::getpid()) + ".bin");
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::vector<unsigned char> content(56 * kMiB, 7);
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (const int readers : {2, 1}) {
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    if (resident(fd, 36 * kMiB)) {
      GTEST_SKIP() << "this file system keeps the file in the page cache (tmpfs?)";
    }
    std::vector<unsigned char> out(24 * kMiB);
    std::vector<ReadPiece> pieces;
    for (std::size_t at = 0; at < out.size(); at += 2 * kMiB)
      pieces.push_back({out.data() + at, 2 * kMiB, at});
    read_with_checksum(fd, pieces, readers);
    bool came = false;
    for (int wait = 0; wait < 200 && !came; ++wait) {
      came = resident(fd, 36 * kMiB);
      if (!came) ::usleep(5000);
    }
    EXPECT_EQ(came, readers == 1) << readers << " readers";
  }
  ::close(fd);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace primus::ckpt
