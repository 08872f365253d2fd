// Fixed-size records (fixed:N): record i is bytes [i N, (i + 1) N) of its file; no index.
#include "format_ops.hpp"
#include "primus/common/error.hpp"

namespace primus::data {
namespace {

std::uint64_t count_records(const RecordFormat& format, const std::string& path,
                            std::uint64_t size) {
  const std::uint64_t tail = size % format.record_size;
  if (tail != 0) {
    throw Error(path + ": byte offset " + std::to_string(size - tail) +
                ": truncated record: the last " + std::to_string(tail) + " bytes are not a " +
                std::to_string(format.record_size) +
                "-byte record (fixed:" + std::to_string(format.record_size) + ")");
  }
  return size / format.record_size;
}

void locate(const RecordFormat& format, const Dataset::FileIndex& /*index*/, std::uint64_t local,
            RecordLocation& where) {
  where.frame_offset = where.offset = local * format.record_size;
  where.frame_length = where.length = format.record_size;
}

}  // namespace

const FormatOps kFixedFormat{FormatKind::kFixed, "",     1,      false, nullptr,
                             count_records,      locate, nullptr};

}  // namespace primus::data
