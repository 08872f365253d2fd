// Reading one rank file of a checkpoint: its index, its tensors' parts (checked against their
// CRC32C) and its state. Every failure is a CorruptCheckpoint naming the file and dataset.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hdf5.hpp"
#include "pipelined_read.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/manifest.hpp"
#include "primus/os/unique_fd.hpp"

namespace primus::ckpt {

class RankFile {
 public:
  explicit RankFile(const std::filesystem::path& path);

  const RankIndex& index() const { return index_; }
  const std::filesystem::path& path() const { return path_; }

  // The whole part into out (exactly its byte size), verified.
  void read(const std::string& dataset, DType dtype, const Shape& shape, std::uint32_t crc,
            void* out, std::size_t bytes) const;
  // Several whole parts, each as read() reads and verifies it; those that can be read directly
  // in one pass over the file, in its order (read_with_checksums), the others one by one.
  struct PartRead {
    std::string dataset;
    DType dtype;
    Shape shape;
    std::uint32_t crc;
    void* out;
    std::size_t bytes;
  };
  void read_all(const std::vector<PartRead>& parts) const;
  // That the part is a dataset of this file of the dtype and shape, whose storage can hold what
  // it claims (cheap: nothing is read; quick verification, before anything is allocated).
  void check(const std::string& dataset, DType dtype, const Shape& shape) const;
  // Reads the part slab by slab (bounded memory) and checks its CRC32C.
  void verify(const std::string& dataset, DType dtype, const Shape& shape, std::uint32_t crc) const;

  std::map<std::string, StateValue> state() const;
  // What state() checks before it reads or allocates anything: every state value is a dataset of
  // this file whose storage can hold what its dataspace claims (cheap; quick verification).
  void check_state() const;

  // Tells the kernel that the whole file is about to be read (POSIX_FADV_WILLNEED), so that
  // a cold read streams instead of waiting on each chunk in turn.
  void advise_reading_all() const;

 private:
  h5::Handle open_checked(const std::string& dataset, DType dtype, const Shape& shape) const;
  void check_plain(const std::string& dataset, hid_t handle, std::uint64_t bytes) const;
  // Reads an unfiltered chunked dataset whose chunks are contiguous ranges of the array straight
  // from the file with pread, in large requests and outside HDF5's global lock, returning its
  // CRC32C; nothing (and nothing read) when the layout is another one.
  std::optional<std::uint32_t> read_direct(const std::string& dataset, hid_t handle,
                                           const Shape& shape, std::size_t element, void* out,
                                           std::size_t bytes) const;
  // The pieces of such a read (8 MiB at most each, into `out`); nothing where the layout is
  // another one.
  std::optional<std::vector<ReadPiece>> direct_pieces(const std::string& dataset, hid_t handle,
                                                      const Shape& shape, std::size_t element,
                                                      void* out, std::size_t bytes) const;
  std::map<std::string, StateValue> read_state(bool read_values) const;
  [[noreturn]] void corrupt(const std::string& what) const;

  std::filesystem::path path_;
  std::uint64_t size_ = 0;
  bool direct_ok_ = false;  // no user block: HDF5 addresses are file offsets
  os::UniqueFd fd_;
  h5::Handle file_;
  RankIndex index_;
};

}  // namespace primus::ckpt
