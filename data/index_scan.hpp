// The index of one file's record boundaries, found by reading the file once from start to end
// (in pieces of any size): where every record starts, and for TFRecord every CRC checked. Pure;
// data/index_cache.cpp feeds it a file, the fuzz target any bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "primus/common/error.hpp"
#include "primus/data/format.hpp"

namespace primus::data {

// A fault in a data file: `offset` is the byte offset of the record at fault.
class RecordError : public Error {
 public:
  RecordError(std::uint64_t offset, const std::string& what)
      : Error("byte offset " + std::to_string(offset) + ": " + what), offset_(offset) {}
  std::uint64_t offset() const noexcept { return offset_; }

 private:
  std::uint64_t offset_;
};

// Record boundaries: record i is bytes [starts[i], starts[i + 1]) of the file (its frame: with
// the newline for lines, with header and footer for TFRecord); starts.back() is the file size.
struct ScannedIndex {
  std::vector<std::uint64_t> starts{0};
  bool last_line_unterminated = false;  // lines: the file does not end with a newline
  std::uint64_t records() const { return starts.size() - 1; }
};

class FormatScanner;

// The scanner of a format with an index (data/formats/format_ops.hpp); throws Error for a format
// with none (fixed-size records) and RecordError for a fault in the bytes.
class IndexScanner {
 public:
  explicit IndexScanner(FormatKind kind);
  ~IndexScanner();
  IndexScanner(const IndexScanner&) = delete;
  IndexScanner& operator=(const IndexScanner&) = delete;
  void feed(const std::uint8_t* data, std::size_t size);
  // The end of the file: throws RecordError for a truncated record.
  ScannedIndex finish();
  std::uint64_t bytes_seen() const { return position_; }

 private:
  std::unique_ptr<FormatScanner> format_;
  ScannedIndex index_;
  std::uint64_t position_ = 0;  // bytes fed so far
};

// The whole of `size` bytes at once.
ScannedIndex scan_records(FormatKind kind, const std::uint8_t* data, std::size_t size);

}  // namespace primus::data
