// CRC32C (Castagnoli, as iSCSI, ext4 and TFRecord use it) with Intel ISA-L's crc32_iscsi: the one
// implementation, compiled into libprimus-ckpt and libprimus-data (internal, not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace primus {

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

}  // namespace primus
