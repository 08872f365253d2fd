#include "primus/common/record_format.hpp"

#include "primus/common/parse_number.hpp"

namespace primus {
namespace {

constexpr std::uint64_t kMaxFixedRecord = std::uint64_t{1} << 30;

}  // namespace

std::optional<RecordFormat> parse_format(std::string_view text) {
  for (const FormatName& row : kFormatNames) {
    if (!row.sized) {
      if (text == row.name) return RecordFormat{row.kind, 0};
      continue;
    }
    if (text.size() <= row.name.size() || text.substr(0, row.name.size()) != row.name ||
        text[row.name.size()] != ':') {
      continue;
    }
    const auto size = parse_unsigned(text.substr(row.name.size() + 1), kMaxFixedRecord);
    if (!size || *size == 0 || *size > kMaxFixedRecord) return std::nullopt;
    return RecordFormat{row.kind, *size};
  }
  return std::nullopt;
}

std::string to_string(const RecordFormat& format) {
  for (const FormatName& row : kFormatNames) {
    if (row.kind != format.kind) continue;
    std::string text(row.name);
    if (row.sized) text += ":" + std::to_string(format.record_size);
    return text;
  }
  return "?";
}

}  // namespace primus
