#include "index_scan.hpp"

#include "formats/format_ops.hpp"

namespace primus::data {

IndexScanner::IndexScanner(FormatKind kind) {
  const FormatOps& ops = format_ops(kind);
  if (!ops.indexed())
    throw Error("records at computed places (" + to_string(RecordFormat{kind, 1}) +
                "): no index to scan");
  format_ = ops.scanner();
}

IndexScanner::~IndexScanner() = default;

void IndexScanner::feed(const std::uint8_t* data, std::size_t size) {
  format_->feed(data, size, position_, index_);
  position_ += size;
}

ScannedIndex IndexScanner::finish() {
  format_->finish(position_, index_);
  return std::move(index_);
}

ScannedIndex scan_records(FormatKind kind, const std::uint8_t* data, std::size_t size) {
  IndexScanner scanner(kind);
  scanner.feed(data, size);
  return scanner.finish();
}

}  // namespace primus::data
