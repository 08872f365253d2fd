// The record starts of one file as a dataset holds them: mapped from a cached index, or built
// now and kept in memory (internal to libprimus-data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "primus/data/dataset.hpp"

namespace primus::data {

struct Dataset::FileIndex {
  FileIndex() = default;
  ~FileIndex();
  FileIndex(const FileIndex&) = delete;
  FileIndex& operator=(const FileIndex&) = delete;

  std::uint64_t records = 0;
  const std::uint64_t* starts = nullptr;  // records + 1 values; null for fixed-size records
  bool last_line_unterminated = false;
  std::vector<std::uint64_t> owned;  // the starts, when built now
  void* map = nullptr;               // the cached index, when mapped
  std::size_t map_size = 0;
};

// What a thread reads files through while it indexes them (1 MiB): made once per thread and
// reused for each file, its bytes left uninitialised. A 4 MiB buffer made for each file cost a
// page fault per 4 KiB and its zeroing: 15 % of an index build's CPU on a VM where a fault costs
// about 10 us. Cold builds of 1 GiB in 16 files (medians of 7 to 9, against a raw read in the
// same rounds): 0.28-0.29 s before; reused, 4 MiB 0.233 s, 1 MiB 0.195 and 0.209 s, 256 KiB
// 0.207 and 0.212 s.
class ScanBuffer {
 public:
  ScanBuffer();
  std::uint8_t* data() const { return bytes_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_;
  std::unique_ptr<std::uint8_t[]> bytes_;
};

// Opens, checks and indexes one file (the cached index when it is valid and trusted, else by
// reading the file through `buffer`). `file` gets size, records, origin and index_path. Throws
// Error naming the file (and the byte offset of a bad record).
std::unique_ptr<Dataset::FileIndex> index_file(const std::string& path, const OpenOptions& options,
                                               DataFile& file, const ScanBuffer& buffer);

}  // namespace primus::data
