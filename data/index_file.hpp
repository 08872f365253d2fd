// The cached index of one data file, as it is stored (beside the data or in a cache directory):
// a header naming the file's identity (size, mtime and ctime in nanoseconds, inode, device), the
// record starts, and a CRC-32C of it all. Reading it checks everything (the CRC, that the starts
// rise and end at the file's size, that the identity is the file's as it is now), so a stale,
// torn or forged index is refused, never used. Pure: the bytes come from data/index_cache.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "index_scan.hpp"
#include "primus/data/format.hpp"

namespace primus::data {

// What identifies a file's contents without reading them: a change of any of these invalidates
// its index (docs/architecture.md).
struct FileIdentity {
  std::uint64_t size = 0;
  std::uint64_t mtime_ns = 0;
  std::uint64_t ctime_ns = 0;
  std::uint64_t inode = 0;
  std::uint64_t device = 0;
  bool operator==(const FileIdentity& other) const {
    return size == other.size && mtime_ns == other.mtime_ns && ctime_ns == other.ctime_ns &&
           inode == other.inode && device == other.device;
  }
};

inline constexpr std::size_t kIndexHeaderSize = 72;

std::vector<std::uint8_t> serialize_index(FormatKind kind, const FileIdentity& identity,
                                          const ScannedIndex& index);

// A checked view of a stored index: starts points into the bytes given (records + 1 values).
struct IndexView {
  std::uint64_t records = 0;
  const std::uint64_t* starts = nullptr;
  bool last_line_unterminated = false;
};

// nullopt and `why` set when the bytes are not a sound index of a file of `kind` with `identity`.
// `bytes` must be 8-byte aligned (mmap's are).
std::optional<IndexView> parse_index(const std::uint8_t* bytes, std::size_t size, FormatKind kind,
                                     const FileIdentity& identity, std::string* why);

// Whether the starts describe whole records of a file of `size` bytes: from 0, rising, each
// frame long enough for its format, ending at `size`.
bool starts_are_sound(FormatKind kind, const std::uint64_t* starts, std::uint64_t records,
                      std::uint64_t size, bool last_line_unterminated);

}  // namespace primus::data
