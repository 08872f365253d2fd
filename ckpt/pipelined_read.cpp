#include "pipelined_read.hpp"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "crc32c.hpp"

namespace primus::ckpt {
namespace {

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

std::uint32_t read_then_checksum(int fd, const std::vector<ReadPiece>& pieces) {
  Crc32c crc;
  for (const ReadPiece& piece : pieces) {
    read_piece(fd, piece);
    crc.update(piece.into, piece.bytes);
  }
  return crc.value();
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

// Reads the pieces k with k % stride == first, in order, until done or another reader failed.
void read_share(int fd, const std::vector<ReadPiece>& pieces, std::size_t first, std::size_t stride,
                Handoff& handoff) {
  try {
    for (std::size_t k = first; k < pieces.size() && !handoff.failed(); k += stride) {
      read_piece(fd, pieces[k]);
      handoff.read(k);
    }
  } catch (...) {
    handoff.fail(std::current_exception());
  }
}

}  // namespace

std::uint32_t read_with_checksum(int fd, const std::vector<ReadPiece>& pieces, int readers) {
  if (pieces.size() < 2) return read_then_checksum(fd, pieces);
  const std::size_t stride = readers > 1 ? 2 : 1;
  Handoff handoff(pieces.size());
  Crc32c crc;
  std::thread summer;
  std::thread second_reader;
  try {
    summer = std::thread([&] {
      for (std::size_t k = 0; k < pieces.size() && handoff.wait_for(k); ++k)
        crc.update(pieces[k].into, pieces[k].bytes);
    });
    if (stride == 2) second_reader = std::thread([&] { read_share(fd, pieces, 1, 2, handoff); });
  } catch (const std::system_error&) {
    handoff.fail(std::make_exception_ptr(PieceReadError{EAGAIN}));
    if (summer.joinable()) summer.join();
    return read_then_checksum(fd, pieces);  // no thread to spare: one after the other
  }
  read_share(fd, pieces, 0, stride, handoff);
  if (second_reader.joinable()) second_reader.join();
  summer.join();
  if (const std::exception_ptr error = handoff.error()) std::rethrow_exception(error);
  return crc.value();
}

}  // namespace primus::ckpt
