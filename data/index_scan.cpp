#include "index_scan.hpp"

#include <isa-l/crc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace primus::data {

IndexScanner::IndexScanner(FormatKind kind) : kind_(kind) {
  if (kind == FormatKind::kFixed) throw Error("fixed-size records have no index to scan");
}

void IndexScanner::feed(const std::uint8_t* data, std::size_t size) {
  if (kind_ == FormatKind::kLines) {
    feed_lines(data, size);
  } else {
    feed_tfrecord(data, size);
  }
}

void IndexScanner::feed_lines(const std::uint8_t* data, std::size_t size) {
  const std::uint8_t* at = data;
  const std::uint8_t* const end = data + size;
  while (at < end) {
    const void* newline = std::memchr(at, '\n', static_cast<std::size_t>(end - at));
    if (newline == nullptr) break;
    at = static_cast<const std::uint8_t*>(newline) + 1;
    index_.starts.push_back(position_ + static_cast<std::uint64_t>(at - data));
  }
  position_ += size;
}

void IndexScanner::feed_tfrecord(const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    switch (part_) {
      case Part::kHeader: {
        const std::size_t take = std::min(size, kTfrecordHeader - pending_size_);
        std::memcpy(pending_ + pending_size_, data, take);
        if (pending_size_ == 0) record_start_ = position_;
        pending_size_ += take;
        data += take;
        size -= take;
        position_ += take;
        if (pending_size_ < kTfrecordHeader) break;
        const std::uint32_t stored = load_u32le(pending_ + 8);
        const std::uint32_t computed = masked_crc32c(pending_, 8);
        if (stored != computed) {
          throw RecordError(record_start_, "wrong CRC-32C of the record's length (stored " +
                                               crc_text(stored) + ", computed " +
                                               crc_text(computed) +
                                               "): not TFRecord framing, or a damaged file");
        }
        data_length_ = data_left_ = load_u64le(pending_);
        data_crc_state_ = 0xFFFFFFFFU;
        pending_size_ = 0;
        part_ = Part::kData;
        break;
      }
      case Part::kData: {
        // crc32_iscsi takes an int length.
        const std::size_t take = static_cast<std::size_t>(
            std::min<std::uint64_t>({size, data_left_, std::uint64_t{1} << 30}));
        if (take > 0) {
          data_crc_state_ =
              crc32_iscsi(const_cast<std::uint8_t*>(data), static_cast<int>(take), data_crc_state_);
        }
        data += take;
        size -= take;
        position_ += take;
        data_left_ -= take;
        if (data_left_ == 0) part_ = Part::kFooter;
        break;
      }
      case Part::kFooter: {
        const std::size_t take = std::min(size, kTfrecordFooter - pending_size_);
        std::memcpy(pending_ + pending_size_, data, take);
        pending_size_ += take;
        data += take;
        size -= take;
        position_ += take;
        if (pending_size_ < kTfrecordFooter) break;
        const std::uint32_t stored = load_u32le(pending_);
        const std::uint32_t computed = mask_crc(~data_crc_state_);
        if (stored != computed) {
          throw RecordError(record_start_, "wrong CRC-32C of the record's data (stored " +
                                               crc_text(stored) + ", computed " +
                                               crc_text(computed) + ")");
        }
        pending_size_ = 0;
        part_ = Part::kHeader;
        index_.starts.push_back(position_);
        break;
      }
    }
  }
}

ScannedIndex IndexScanner::finish() {
  if (kind_ == FormatKind::kLines) {
    if (index_.starts.back() != position_) {
      index_.starts.push_back(position_);
      index_.last_line_unterminated = true;
    }
    return std::move(index_);
  }
  if (part_ != Part::kHeader || pending_size_ != 0) {
    std::string what = "truncated record: the file ends " +
                       std::to_string(position_ - record_start_) + " bytes into it";
    if (part_ != Part::kHeader) {
      what += " (its length field says " + std::to_string(data_length_) + " bytes of data)";
    }
    throw RecordError(record_start_, what);
  }
  return std::move(index_);
}

ScannedIndex scan_records(FormatKind kind, const std::uint8_t* data, std::size_t size) {
  IndexScanner scanner(kind);
  scanner.feed(data, size);
  return scanner.finish();
}

}  // namespace primus::data
