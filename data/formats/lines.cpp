// Text lines: a record is a line, its newline not part of it; the last line may lack one.
#include <cstring>

#include "format_ops.hpp"

namespace primus::data {
namespace {

class LinesScanner final : public FormatScanner {
 public:
  void feed(const std::uint8_t* data, std::size_t size, std::uint64_t position,
            ScannedIndex& index) override {
    const std::uint8_t* at = data;
    const std::uint8_t* const end = data + size;
    while (at < end) {
      const void* newline = std::memchr(at, '\n', static_cast<std::size_t>(end - at));
      if (newline == nullptr) break;
      at = static_cast<const std::uint8_t*>(newline) + 1;
      index.starts.push_back(position + static_cast<std::uint64_t>(at - data));
    }
  }

  void finish(std::uint64_t position, ScannedIndex& index) override {
    if (index.starts.back() != position) {
      index.starts.push_back(position);
      index.last_line_unterminated = true;
    }
  }
};

std::unique_ptr<FormatScanner> make_scanner() {
  return std::make_unique<LinesScanner>();
}

void locate(const RecordFormat& /*format*/, const Dataset::FileIndex& index, std::uint64_t local,
            RecordLocation& where) {
  where.frame_offset = where.offset = index.starts[local];
  where.frame_length = index.starts[local + 1] - index.starts[local];
  const bool unterminated = index.last_line_unterminated && local + 1 == index.records;
  where.length = where.frame_length - (unterminated ? 0 : 1);
}

}  // namespace

const FormatOps kLinesFormat{
    FormatKind::kLines, ".primus-lines-index", 1, true, make_scanner, nullptr, locate, nullptr};

}  // namespace primus::data
