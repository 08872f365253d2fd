// The names of the record formats of a dataset (--primus-data-format): lines, fixed:N or
// tfrecord. Here, in common/, so that the SPANK plugin and primus-launch check the option with
// the parser libprimus-data uses. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace primus {

enum class FormatKind : std::uint32_t { kLines = 1, kFixed = 2, kTfrecord = 3 };

struct RecordFormat {
  FormatKind kind = FormatKind::kLines;
  std::uint64_t record_size = 0;  // kFixed: bytes per record
  bool operator==(const RecordFormat& other) const {
    return kind == other.kind && record_size == other.record_size;
  }
};

// The names of the formats, one row each: the value stored in index files (never renumbered),
// and whether the name takes a record size (fixed:N). What libprimus-data does with each format
// is its row in data/formats/ (docs/architecture.md, "Where to add").
struct FormatName {
  std::string_view name;
  FormatKind kind;
  bool sized;
};
inline constexpr FormatName kFormatNames[] = {
    {"lines", FormatKind::kLines, false},
    {"fixed", FormatKind::kFixed, true},
    {"tfrecord", FormatKind::kTfrecord, false},
};

// "lines", "fixed:N" (N from 1 to 2^30 bytes) or "tfrecord"; nullopt for anything else.
std::optional<RecordFormat> parse_format(std::string_view text);
std::string to_string(const RecordFormat& format);
// What parse_format accepts, for messages.
inline constexpr std::string_view kFormatExpected =
    "lines, fixed:N (N-byte records, N from 1 to 1073741824) or tfrecord";

}  // namespace primus
