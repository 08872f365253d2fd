#include "pipelined_read.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "crc32c.hpp"

namespace primus::ckpt {
namespace {

constexpr std::uint64_t kReadAhead = std::uint64_t{16} << 20;
constexpr std::uint64_t kReadAheadSlice = std::uint64_t{1} << 20;
constexpr std::uint64_t kInFlight = std::uint64_t{32} << 20;

void read_piece(int fd, const ReadPiece& piece) {
  std::size_t got = 0;
  while (got < piece.bytes) {
    const ssize_t n = ::pread(fd, piece.into + got, piece.bytes - got,
                              static_cast<off_t>(piece.file_offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw PieceReadError{errno};
    if (n == 0) throw PieceReadError{0};
    got += static_cast<std::size_t>(n);
  }
}

// The checksums of the segments (read_with_checksums), fed the pieces in order.
class SegmentSums {
 public:
  explicit SegmentSums(const std::vector<std::size_t>& ends) : ends_(ends) {}
  void add(std::size_t k, const ReadPiece& piece) {
    crc_.update(piece.into, piece.bytes);
    if (segment_ < ends_.size() && k + 1 == ends_[segment_]) {
      sums_.push_back(crc_.value());
      crc_ = Crc32c();
      ++segment_;
    }
  }
  std::vector<std::uint32_t> take() { return std::move(sums_); }

 private:
  const std::vector<std::size_t>& ends_;
  std::size_t segment_ = 0;
  Crc32c crc_;
  std::vector<std::uint32_t> sums_;
};

std::vector<std::uint32_t> read_then_checksum(int fd, const std::vector<ReadPiece>& pieces,
                                              const std::vector<std::size_t>& ends) {
  SegmentSums sums(ends);
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    read_piece(fd, pieces[k]);
    sums.add(k, pieces[k]);
  }
  return sums.take();
}

// The pieces read so far, handed from the reading threads to the checksum thread, which takes
// them in order.
class Handoff {
 public:
  explicit Handoff(std::size_t pieces) : done_(pieces, false) {}

  void read(std::size_t k) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_[k] = true;
      while (whole_ < done_.size() && done_[whole_])
        ++whole_;
    }
    changed_.notify_all();
  }
  void fail(std::exception_ptr error) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::move(error);
    }
    changed_.notify_all();
  }
  bool failed() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return error_ != nullptr;
  }
  // Waits until pieces [0, k] are whole; false when a reader failed first.
  bool wait_for(std::size_t k) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return whole_ > k || error_; });
    return whole_ > k;
  }
  std::exception_ptr error() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> done_;
  std::size_t whole_ = 0;  // pieces [0, whole_) are in memory
  std::exception_ptr error_;
};

// Asks the kernel (WILLNEED) for the file's bytes up to `until`, from where it asked last, a
// slice at a time: one call reads no more than the device's read-ahead window (read_ahead_kb).
class AskedAhead {
 public:
  explicit AskedAhead(int fd) : fd_(fd) {}
  void up_to(std::uint64_t from, std::uint64_t until) {
    for (std::uint64_t at = std::max(from, asked_); at < until; at += kReadAheadSlice) {
      ::posix_fadvise(fd_, static_cast<off_t>(at),
                      static_cast<off_t>(std::min(kReadAheadSlice, until - at)),
                      POSIX_FADV_WILLNEED);
    }
    asked_ = std::max(asked_, until);
  }

 private:
  int fd_;
  std::uint64_t asked_ = 0;
};

// Reads the pieces k with k % stride == first, in order, until done or another reader failed.
// One reader (from a disk) keeps kInFlight asked for ahead of the piece it reads, within its
// pieces: a read() of a whole 64 MiB tensor puts it all in flight at once, where 8 MiB pieces
// with only the kernel's read-ahead (8 MiB here) kept less, and lost to it where the disk's
// latency was longer.
void read_share(int fd, const std::vector<ReadPiece>& pieces, std::size_t first, std::size_t stride,
                Handoff& handoff) {
  AskedAhead ahead(fd);
  const std::uint64_t end = pieces.back().file_offset + pieces.back().bytes;
  try {
    for (std::size_t k = first; k < pieces.size() && !handoff.failed(); k += stride) {
      if (stride == 1) {
        const std::uint64_t from = pieces[k].file_offset + pieces[k].bytes;
        ahead.up_to(from, std::min(end, from + kInFlight));
      }
      read_piece(fd, pieces[k]);
      handoff.read(k);
    }
  } catch (...) {
    handoff.fail(std::current_exception());
  }
}

// From a disk, the file's next bytes are asked for as soon as the last piece is in: they are
// most often the next tensor's (a rank file holds them in the order they are loaded), and the
// disk reads them while this call finishes the last checksum and the caller moves on to the
// next tensor (opening it in HDF5, listing its chunks), where it stood idle before. As much as
// this call read, up to kReadAhead, asked for a slice at a time: one WILLNEED reads no more
// than the device's read-ahead window (read_ahead_kb: 8 MiB on this VM, 128 KiB by default).
// Measured on a cold page cache (1 GiB in 16 tensors, 6 interleaved rounds, on an evening when
// this VM's disk took 1 s for some reads of 0.28): 0.29 to 1.12 s without, 0.30 to 0.32 s with
// the next 8 MiB asked for (one call); in 8 tensors, 0.33 to 0.36 s without, 0.26 to 0.27 with
// (one round of 1.0 s each way). With 16 MiB asked for a slice at a time, the medians of 6
// rounds 0.305 s (16 tensors) and 0.295 s (8), a raw read()'s 0.28.
void ask_for_what_follows(int fd, const std::vector<ReadPiece>& pieces) {
  std::uint64_t bytes = 0;
  for (const ReadPiece& piece : pieces)
    bytes += piece.bytes;
  const ReadPiece& last = pieces.back();
  const std::uint64_t from = last.file_offset + last.bytes;
  const std::uint64_t wanted = std::min<std::uint64_t>(bytes, kReadAhead);
  for (std::uint64_t at = 0; at < wanted; at += kReadAheadSlice) {
    ::posix_fadvise(fd, static_cast<off_t>(from + at),
                    static_cast<off_t>(std::min(kReadAheadSlice, wanted - at)),
                    POSIX_FADV_WILLNEED);
  }
}

}  // namespace

std::uint32_t read_with_checksum(int fd, const std::vector<ReadPiece>& pieces, int readers) {
  if (pieces.empty()) return Crc32c().value();
  return read_with_checksums(fd, pieces, {pieces.size()}, readers).front();
}

std::vector<std::uint32_t> read_with_checksums(int fd, const std::vector<ReadPiece>& pieces,
                                               const std::vector<std::size_t>& ends, int readers) {
  if (pieces.size() < 2) return read_then_checksum(fd, pieces, ends);
  const std::size_t stride = readers > 1 ? 2 : 1;
  Handoff handoff(pieces.size());
  SegmentSums sums(ends);
  std::thread summer;
  std::thread second_reader;
  try {
    summer = std::thread([&] {
      for (std::size_t k = 0; k < pieces.size() && handoff.wait_for(k); ++k)
        sums.add(k, pieces[k]);
    });
    if (stride == 2) second_reader = std::thread([&] { read_share(fd, pieces, 1, 2, handoff); });
  } catch (const std::system_error&) {
    handoff.fail(std::make_exception_ptr(PieceReadError{EAGAIN}));
    if (summer.joinable()) summer.join();
    return read_then_checksum(fd, pieces, ends);  // no thread to spare: one after the other
  }
  read_share(fd, pieces, 0, stride, handoff);
  if (stride == 1) ask_for_what_follows(fd, pieces);
  if (second_reader.joinable()) second_reader.join();
  summer.join();
  if (const std::exception_ptr error = handoff.error()) std::rethrow_exception(error);
  return sums.take();
}

}  // namespace primus::ckpt
