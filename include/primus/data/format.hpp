// The record formats of a dataset (docs/architecture.md, "Data distribution"): text lines,
// fixed-size records, and TFRecord framing (a little-endian 64-bit length, the masked CRC-32C of
// the length, the data, the masked CRC-32C of the data, as TensorFlow writes them). Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "primus/common/record_format.hpp"

namespace primus::data {

using primus::FormatKind;
using primus::kFormatExpected;
using primus::parse_format;
using primus::RecordFormat;
using primus::to_string;

// The size of every record of `format` (fixed:N), or 0 when the records' sizes vary.
std::uint64_t fixed_record_size(const RecordFormat& format);

// TFRecord framing: the header is the length and its masked CRC, the footer the data's.
inline constexpr std::size_t kTfrecordHeader = 12;
inline constexpr std::size_t kTfrecordFooter = 4;
inline constexpr std::size_t kTfrecordOverhead = kTfrecordHeader + kTfrecordFooter;

// TensorFlow's masking of a CRC-32C (so that a CRC of data holding CRCs is not trivial).
std::uint32_t mask_crc(std::uint32_t crc);
std::uint32_t masked_crc32c(const void* data, std::size_t size);

// "0x1234abcd", as messages show a CRC.
std::string crc_text(std::uint32_t crc);

std::uint64_t load_u64le(const std::uint8_t* bytes);
std::uint32_t load_u32le(const std::uint8_t* bytes);

// Checks one whole TFRecord frame (header, data, footer) of `size` bytes at `frame`: nullopt when
// it is sound, else what is wrong ("wrong CRC-32C of the data ...").
std::optional<std::string> check_tfrecord_frame(const std::uint8_t* frame, std::size_t size);

}  // namespace primus::data
