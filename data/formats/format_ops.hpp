// One record format of a dataset, as libprimus-data uses it: a row of data/formats/format_table.cpp
// for each FormatKind (internal). Everything the dataset, the index and the reader need to know of
// a format is here, so that no other file branches on the format: how its index is scanned and
// named, what a sound index of it looks like, where a record's bytes lie in its frame, and what is
// checked when it is read. Adding a format: its FormatKind value and name
// (common/record_format.cpp, which the SPANK plugin parses with), one file here defining its row,
// the row in the table, and its line in docs/user-guide.md ("Record formats").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "../file_index.hpp"
#include "../index_scan.hpp"
#include "primus/data/format.hpp"

namespace primus::data {

// Reads one file's bytes from start to end, in pieces of any size, and finds where its records
// start (index_scan.hpp's IndexScanner holds one). Throws RecordError.
class FormatScanner {
 public:
  virtual ~FormatScanner() = default;
  // `data` continues the bytes fed so far; `position` is the file offset of data[0].
  virtual void feed(const std::uint8_t* data, std::size_t size, std::uint64_t position,
                    ScannedIndex& index) = 0;
  // The end of the file, `position` bytes in: throws RecordError for a truncated record.
  virtual void finish(std::uint64_t position, ScannedIndex& index) = 0;
};

struct FormatOps {
  FormatKind kind;
  // The suffix of its cached index files (.NAME<suffix>); empty for a format whose records lie at
  // computed places and need no index.
  std::string_view index_suffix;
  // The fewest bytes a record's frame has (what a sound index is checked against).
  std::uint64_t least_frame;
  // Whether a file may end without its last record's terminator (the index's flag).
  bool may_end_unterminated;
  // A new scanner; null for a format with no index.
  std::unique_ptr<FormatScanner> (*scanner)();
  // The records of a file of `size` bytes, for a format with no index; throws Error naming `path`
  // when the size cannot hold whole records. Null for an indexed format.
  std::uint64_t (*count_records)(const RecordFormat& format, const std::string& path,
                                 std::uint64_t size);
  // Where record `local` of a file (its frame, and its bytes within the frame).
  void (*locate)(const RecordFormat& format, const Dataset::FileIndex& index, std::uint64_t local,
                 RecordLocation& where);
  // What is wrong with one whole frame as read, or nullopt; null when a frame carries no check.
  std::optional<std::string> (*check)(const std::uint8_t* frame, std::size_t size);

  bool indexed() const { return scanner != nullptr; }
};

// The row of `kind`; throws Error for a value that is no format (a damaged or future index).
const FormatOps& format_ops(FormatKind kind);

// The rows, each defined in its format's file.
extern const FormatOps kLinesFormat;
extern const FormatOps kFixedFormat;
extern const FormatOps kTfrecordFormat;

}  // namespace primus::data
