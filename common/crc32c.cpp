#include "crc32c.hpp"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace primus {

void Crc32c::update(const void* data, std::size_t size) {
  // crc32_iscsi takes an int length: feed it at most 1 GiB at a time.
  constexpr std::size_t kStep = std::size_t{1} << 30;
  auto* bytes = static_cast<unsigned char*>(const_cast<void*>(data));
  while (size > 0) {
    const std::size_t n = std::min(size, kStep);
    state_ = crc32_iscsi(bytes, static_cast<int>(n), state_);
    bytes += n;
    size -= n;
  }
}

std::uint32_t crc32c(const void* data, std::size_t size) {
  Crc32c crc;
  crc.update(data, size);
  return crc.value();
}

std::string crc_hex(std::uint32_t crc) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(8, '0');
  for (int i = 7; i >= 0; --i) {
    text[static_cast<std::size_t>(i)] = kHex[crc & 0xFU];
    crc >>= 4;
  }
  return text;
}

std::optional<std::uint32_t> parse_crc_hex(std::string_view text) {
  if (text.size() != 8) return std::nullopt;
  std::uint32_t value = 0;
  for (const char c : text) {
    std::uint32_t digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<std::uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<std::uint32_t>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
    value = (value << 4) | digit;
  }
  return value;
}

}  // namespace primus
