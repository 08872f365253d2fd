#include "primus/data/format.hpp"

#include <cstdio>

#include "../common/crc32c.hpp"

namespace primus::data {
std::string crc_text(std::uint32_t crc) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", crc);
  return text;
}

std::uint32_t mask_crc(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  return mask_crc(crc32c(data, size));
}

std::uint64_t load_u64le(const std::uint8_t* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

std::uint32_t load_u32le(const std::uint8_t* bytes) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

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

}  // namespace primus::data
