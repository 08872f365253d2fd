#include "index_file.hpp"

#include <cstring>

#include "../common/crc32c.hpp"
#include "formats/format_ops.hpp"

namespace primus::data {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'I', 'M', 'U', 'S', 'I', 'X'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kTrailerSize = 8;  // the CRC-32C and 4 zero bytes
constexpr std::uint64_t kFlagUnterminated = 1;

void put(std::vector<std::uint8_t>& out, std::size_t at, const void* value, std::size_t size) {
  std::memcpy(out.data() + at, value, size);
}

template <typename T>
T get(const std::uint8_t* bytes, std::size_t at) {
  T value;
  std::memcpy(&value, bytes + at, sizeof value);
  return value;
}

}  // namespace

std::vector<std::uint8_t> serialize_index(FormatKind kind, const FileIdentity& identity,
                                          const ScannedIndex& index) {
  const std::uint64_t records = index.records();
  std::vector<std::uint8_t> out(kIndexHeaderSize + 8 * index.starts.size() + kTrailerSize);
  const auto kind_value = static_cast<std::uint32_t>(kind);
  const std::uint64_t flags = index.last_line_unterminated ? kFlagUnterminated : 0;
  put(out, 0, kMagic, 8);
  put(out, 8, &kVersion, 4);
  put(out, 12, &kind_value, 4);
  put(out, 16, &flags, 8);
  put(out, 24, &identity.size, 8);
  put(out, 32, &identity.mtime_ns, 8);
  put(out, 40, &identity.ctime_ns, 8);
  put(out, 48, &identity.inode, 8);
  put(out, 56, &identity.device, 8);
  put(out, 64, &records, 8);
  put(out, kIndexHeaderSize, index.starts.data(), 8 * index.starts.size());
  const std::uint32_t crc = crc32c(out.data(), out.size() - kTrailerSize);
  put(out, out.size() - kTrailerSize, &crc, 4);
  return out;
}

bool starts_are_sound(FormatKind kind, const std::uint64_t* starts, std::uint64_t records,
                      std::uint64_t size, bool last_line_unterminated) {
  if (starts[0] != 0 || starts[records] != size) return false;
  const FormatOps& ops = format_ops(kind);
  if (last_line_unterminated && (records == 0 || !ops.may_end_unterminated)) return false;
  const std::uint64_t least = ops.least_frame;
  for (std::uint64_t i = 0; i < records; ++i) {
    if (starts[i + 1] < starts[i] || starts[i + 1] - starts[i] < least) return false;
  }
  return true;
}

std::optional<IndexView> parse_index(const std::uint8_t* bytes, std::size_t size, FormatKind kind,
                                     const FileIdentity& identity, std::string* why) {
  const auto fail = [&](const char* reason) -> std::optional<IndexView> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  if (size < kIndexHeaderSize + 8 + kTrailerSize) return fail("shorter than an index");
  if (std::memcmp(bytes, kMagic, 8) != 0) return fail("not a Primus index");
  if (get<std::uint32_t>(bytes, 8) != kVersion) return fail("another version of the index");
  if (get<std::uint32_t>(bytes, 12) != static_cast<std::uint32_t>(kind)) {
    return fail("the index of another record format");
  }
  const std::uint64_t records = get<std::uint64_t>(bytes, 64);
  if (records != (size - kIndexHeaderSize - kTrailerSize) / 8 - 1 ||
      (size - kIndexHeaderSize - kTrailerSize) % 8 != 0) {
    return fail("its record count does not match its size");
  }
  if (get<std::uint32_t>(bytes, size - kTrailerSize) != crc32c(bytes, size - kTrailerSize) ||
      get<std::uint32_t>(bytes, size - kTrailerSize + 4) != 0) {
    return fail("wrong CRC-32C (a damaged index)");
  }
  const FileIdentity stored{get<std::uint64_t>(bytes, 24), get<std::uint64_t>(bytes, 32),
                            get<std::uint64_t>(bytes, 40), get<std::uint64_t>(bytes, 48),
                            get<std::uint64_t>(bytes, 56)};
  if (!(stored == identity)) return fail("stale: the file changed since it was indexed");
  const std::uint64_t flags = get<std::uint64_t>(bytes, 16);
  if ((flags & ~kFlagUnterminated) != 0) return fail("unknown flags");
  IndexView view;
  view.records = records;
  view.starts = reinterpret_cast<const std::uint64_t*>(bytes + kIndexHeaderSize);
  view.last_line_unterminated = (flags & kFlagUnterminated) != 0;
  if (view.last_line_unterminated && !format_ops(kind).may_end_unterminated) {
    return fail("unknown flags");
  }
  if (!starts_are_sound(kind, view.starts, records, identity.size, view.last_line_unterminated)) {
    return fail("record starts that do not describe the file");
  }
  return view;
}

}  // namespace primus::data
