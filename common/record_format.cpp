#include "primus/common/record_format.hpp"

#include "primus/common/parse_number.hpp"

namespace primus {
namespace {

constexpr std::uint64_t kMaxFixedRecord = std::uint64_t{1} << 30;

}  // namespace

std::optional<RecordFormat> parse_format(std::string_view text) {
  if (text == "lines") return RecordFormat{FormatKind::kLines, 0};
  if (text == "tfrecord") return RecordFormat{FormatKind::kTfrecord, 0};
  constexpr std::string_view kFixed = "fixed:";
  if (text.substr(0, kFixed.size()) != kFixed) return std::nullopt;
  const auto size = parse_unsigned(text.substr(kFixed.size()), kMaxFixedRecord);
  if (!size || *size == 0 || *size > kMaxFixedRecord) return std::nullopt;
  return RecordFormat{FormatKind::kFixed, *size};
}

std::string to_string(const RecordFormat& format) {
  switch (format.kind) {
    case FormatKind::kLines:
      return "lines";
    case FormatKind::kFixed:
      return "fixed:" + std::to_string(format.record_size);
    case FormatKind::kTfrecord:
      return "tfrecord";
  }
  return "?";
}

}  // namespace primus
