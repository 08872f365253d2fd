// The record starts of one file as a dataset holds them: mapped from a cached index, or built
// now and kept in memory (internal to libprimus-data).
#pragma once

#include <cstdint>
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

// Opens, checks and indexes one file (the cached index when it is valid and trusted, else by
// reading the file). `file` gets size, records, origin and index_path. Throws Error naming the
// file (and the byte offset of a bad record).
std::unique_ptr<Dataset::FileIndex> index_file(const std::string& path, const OpenOptions& options,
                                               DataFile& file);

}  // namespace primus::data
