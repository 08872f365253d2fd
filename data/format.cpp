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

}  // namespace primus::data
