// CRC32C (Castagnoli, as iSCSI and ext4 use it) with Intel ISA-L's crc32_iscsi.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace primus::ckpt {

class Crc32c {
 public:
  void update(const void* data, std::size_t size);
  std::uint32_t value() const { return ~state_; }

 private:
  std::uint32_t state_ = 0xFFFFFFFFU;
};

std::uint32_t crc32c(const void* data, std::size_t size);
std::string crc_hex(std::uint32_t crc);  // 8 lower-case hex digits
std::optional<std::uint32_t> parse_crc_hex(std::string_view text);

}  // namespace primus::ckpt
