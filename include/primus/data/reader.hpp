// Reads records of a dataset by number, in the order asked (the order of a rank's share): the
// records of a batch that lie next to each other in a file are read with one pread, the next
// batch can be announced to the kernel ahead of time (readahead), and every TFRecord frame's two
// CRCs are checked. Thread-compatible: one reader per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "primus/data/dataset.hpp"

namespace primus::data {

// The records of one read: record i is `length(i)` bytes at `data(i)`. Reused from read to
// read, its buffer only grows (and is never zeroed): keep one per reader loop.
class RecordBatch {
 public:
  std::size_t size() const { return offsets_.size(); }
  const std::uint8_t* data(std::size_t i) const { return storage_.get() + offsets_[i]; }
  std::uint64_t length(std::size_t i) const { return lengths_[i]; }

 private:
  friend class RecordReader;
  std::uint8_t* reserve(std::size_t bytes);
  std::unique_ptr<std::uint8_t[]> storage_;
  std::size_t capacity_ = 0;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::uint64_t> lengths_;
};

class RecordReader {
 public:
  explicit RecordReader(std::shared_ptr<const Dataset> dataset);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Reads records ids[0..count) into `out` (replacing what it held). Throws Error naming the
  // file and byte offset of a record that cannot be read or fails its CRCs.
  void read(const std::uint64_t* ids, std::size_t count, RecordBatch& out);
  // Tells the kernel these records will be read soon (posix_fadvise WILLNEED); never fails.
  void prefetch(const std::uint64_t* ids, std::size_t count);

  const Dataset& dataset() const { return *dataset_; }

 private:
  struct Run {
    std::uint32_t file = 0;
    std::uint64_t begin = 0;  // byte range of the file
    std::uint64_t end = 0;
    std::size_t first = 0;  // the records ids[first, last) lie in it
    std::size_t last = 0;
  };
  int descriptor(std::uint32_t file);
  // Where each record lies and the runs of neighbours, for ids[0..count).
  void plan_runs(const std::uint64_t* ids, std::size_t count, std::uint64_t max_run);

  std::shared_ptr<const Dataset> dataset_;
  std::vector<RecordLocation> where_;
  std::vector<Run> runs_;
  std::vector<int> fds_;                   // per file, -1 until opened
  std::vector<std::uint32_t> open_order_;  // files with an open descriptor, oldest first
};

}  // namespace primus::data
