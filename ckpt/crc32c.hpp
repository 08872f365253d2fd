// The checkpoints' CRC32C is the project's one implementation (common/crc32c.hpp).
#pragma once

#include "../common/crc32c.hpp"

namespace primus::ckpt {

using primus::Crc32c;
using primus::crc32c;
using primus::crc_hex;
using primus::parse_crc_hex;

}  // namespace primus::ckpt
