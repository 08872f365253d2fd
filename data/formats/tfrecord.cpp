// TFRecord framing (include/primus/data/format.hpp): a frame is the length, its masked CRC-32C,
// the data and the data's masked CRC-32C; a record is the data. Both CRCs are checked when the
// index is built and again on every read.
#include <isa-l/crc.h>

#include <algorithm>
#include <cstring>

#include "format_ops.hpp"

namespace primus::data {

std::optional<std::string> check_tfrecord_frame(const std::uint8_t* frame, std::size_t size) {
  if (size < kTfrecordOverhead) return "a record shorter than its framing";
  const std::uint64_t length = load_u64le(frame);
  if (length != size - kTfrecordOverhead) {
    return "the length field says " + std::to_string(length) + " bytes, the index " +
           std::to_string(size - kTfrecordOverhead) + " (the file changed since it was indexed)";
  }
  const std::uint32_t length_crc = masked_crc32c(frame, 8);
  if (length_crc != load_u32le(frame + 8)) {
    return "wrong CRC-32C of the length (stored " + crc_text(load_u32le(frame + 8)) +
           ", computed " + crc_text(length_crc) + ")";
  }
  const std::uint32_t data_crc = masked_crc32c(frame + kTfrecordHeader, length);
  const std::uint32_t stored = load_u32le(frame + kTfrecordHeader + length);
  if (data_crc != stored) {
    return "wrong CRC-32C of the data (stored " + crc_text(stored) + ", computed " +
           crc_text(data_crc) + ")";
  }
  return std::nullopt;
}

namespace {

// The frames of a stream fed in pieces: the part of the current frame seen so far, and the
// running CRC of its data.
class TfrecordScanner final : public FormatScanner {
 public:
  void feed(const std::uint8_t* data, std::size_t size, std::uint64_t position,
            ScannedIndex& index) override {
    while (size > 0) {
      std::size_t took = 0;
      switch (part_) {
        case Part::kHeader:
          took = take_header(data, size, position);
          break;
        case Part::kData:
          took = take_data(data, size);
          break;
        case Part::kFooter:
          took = take_footer(data, size);
          if (part_ == Part::kHeader) index.starts.push_back(position + took);
          break;
      }
      data += took;
      size -= took;
      position += took;
    }
  }

  void finish(std::uint64_t position, ScannedIndex& /*index*/) override {
    if (part_ == Part::kHeader && pending_size_ == 0) return;
    std::string what = "truncated record: the file ends " +
                       std::to_string(position - record_start_) + " bytes into it";
    if (part_ != Part::kHeader) {
      what += " (its length field says " + std::to_string(data_length_) + " bytes of data)";
    }
    throw RecordError(record_start_, what);
  }

 private:
  std::size_t take_header(const std::uint8_t* data, std::size_t size, std::uint64_t position) {
    const std::size_t take = std::min(size, kTfrecordHeader - pending_size_);
    if (pending_size_ == 0) record_start_ = position;
    std::memcpy(pending_ + pending_size_, data, take);
    pending_size_ += take;
    if (pending_size_ < kTfrecordHeader) return take;
    const std::uint32_t stored = load_u32le(pending_ + 8);
    const std::uint32_t computed = masked_crc32c(pending_, 8);
    if (stored != computed) {
      throw RecordError(record_start_, "wrong CRC-32C of the record's length (stored " +
                                           crc_text(stored) + ", computed " + crc_text(computed) +
                                           "): not TFRecord framing, or a damaged file");
    }
    data_length_ = data_left_ = load_u64le(pending_);
    data_crc_state_ = 0xFFFFFFFFU;
    pending_size_ = 0;
    part_ = Part::kData;
    return take;
  }

  std::size_t take_data(const std::uint8_t* data, std::size_t size) {
    // crc32_iscsi takes an int length.
    const auto take = static_cast<std::size_t>(
        std::min<std::uint64_t>({size, data_left_, std::uint64_t{1} << 30}));
    if (take > 0) {
      data_crc_state_ =
          crc32_iscsi(const_cast<std::uint8_t*>(data), static_cast<int>(take), data_crc_state_);
    }
    data_left_ -= take;
    if (data_left_ == 0) part_ = Part::kFooter;
    return take;
  }

  std::size_t take_footer(const std::uint8_t* data, std::size_t size) {
    const std::size_t take = std::min(size, kTfrecordFooter - pending_size_);
    std::memcpy(pending_ + pending_size_, data, take);
    pending_size_ += take;
    if (pending_size_ < kTfrecordFooter) return take;
    const std::uint32_t stored = load_u32le(pending_);
    const std::uint32_t computed = mask_crc(~data_crc_state_);
    if (stored != computed) {
      throw RecordError(record_start_, "wrong CRC-32C of the record's data (stored " +
                                           crc_text(stored) + ", computed " + crc_text(computed) +
                                           ")");
    }
    pending_size_ = 0;
    part_ = Part::kHeader;
    return take;
  }

  enum class Part { kHeader, kData, kFooter } part_ = Part::kHeader;
  std::uint8_t pending_[kTfrecordHeader] = {};
  std::size_t pending_size_ = 0;
  std::uint64_t record_start_ = 0;
  std::uint64_t data_left_ = 0;
  std::uint64_t data_length_ = 0;
  std::uint32_t data_crc_state_ = 0xFFFFFFFFU;
};

std::unique_ptr<FormatScanner> make_scanner() {
  return std::make_unique<TfrecordScanner>();
}

void locate(const RecordFormat& /*format*/, const Dataset::FileIndex& index, std::uint64_t local,
            RecordLocation& where) {
  where.frame_offset = index.starts[local];
  where.frame_length = index.starts[local + 1] - index.starts[local];
  where.offset = where.frame_offset + kTfrecordHeader;
  where.length = where.frame_length - kTfrecordOverhead;
}

}  // namespace

const FormatOps kTfrecordFormat{FormatKind::kTfrecord,
                                ".primus-tfrecord-index",
                                kTfrecordOverhead,
                                false,
                                make_scanner,
                                nullptr,
                                locate,
                                check_tfrecord_frame};

}  // namespace primus::data
