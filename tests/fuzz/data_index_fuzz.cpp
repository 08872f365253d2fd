// Fuzz target for the data index: the scanner of every indexed record format (data/formats/,
// through data/index_scan.cpp) and the stored-index reader (data/index_file.cpp), libFuzzer;
// standalone_main.cpp replays inputs without it. Any bytes either scan or throw RecordError; what
// scans must scan the same when fed in pieces, describe the file soundly, survive a round trip
// through a stored index, and pass every frame's check (TFRecord's CRCs). Any bytes given as a
// stored index are refused or describe a file of the size they claim. Anything else (another
// exception, a failed check, a sanitizer report) aborts. Seeded with TFRecord files, text and
// stored indexes (tests/fuzz/corpus/data-index); crashes found are kept there.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../data/formats/format_ops.hpp"
#include "../../data/index_file.hpp"
#include "../../data/index_scan.hpp"

namespace {

using primus::data::FileIdentity;
using primus::data::FormatKind;
using primus::data::RecordError;
using primus::data::ScannedIndex;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "data index fuzz: %s\n", what.c_str());
  std::abort();
}

std::uint64_t header_u64(const std::uint8_t* data, std::size_t size, std::size_t at) {
  std::uint64_t value = 0;
  if (at + 8 <= size) std::memcpy(&value, data + at, 8);
  return value;
}

void scan(FormatKind kind, const std::uint8_t* data, std::size_t size) {
  ScannedIndex whole;
  try {
    whole = primus::data::scan_records(kind, data, size);
  } catch (const RecordError& e) {
    if (e.offset() > size) fail("an error offset past the end: " + std::string(e.what()));
    return;
  }
  if (!primus::data::starts_are_sound(kind, whole.starts.data(), whole.records(), size,
                                      whole.last_line_unterminated)) {
    fail("a scan that does not describe the bytes");
  }
  // In pieces of a size taken from the data: the same index.
  primus::data::IndexScanner pieces(kind);
  const std::size_t piece = 1 + (size > 0 ? data[0] % 29 : 0);
  for (std::size_t at = 0; at < size; at += piece)
    pieces.feed(data + at, std::min(piece, size - at));
  if (pieces.finish().starts != whole.starts) fail("scanning in pieces gave another index");
  if (const auto check = primus::data::format_ops(kind).check) {
    for (std::uint64_t i = 0; i < whole.records(); ++i) {
      const auto fault = check(data + whole.starts[i],
                               static_cast<std::size_t>(whole.starts[i + 1] - whole.starts[i]));
      if (fault) fail("a scanned frame fails its check: " + *fault);
    }
  }
  const FileIdentity identity{size, 1, 2, 3, 4};
  const auto stored = primus::data::serialize_index(kind, identity, whole);
  std::string why;
  const auto view = primus::data::parse_index(stored.data(), stored.size(), kind, identity, &why);
  if (!view) fail("a stored index of a sound scan is refused: " + why);
  if (view->records != whole.records() ||
      std::memcmp(view->starts, whole.starts.data(), 8 * whole.starts.size()) != 0 ||
      view->last_line_unterminated != whole.last_line_unterminated) {
    fail("a stored index does not round-trip");
  }
}

void parse_stored(const std::uint8_t* data, std::size_t size) {
  // 8-byte aligned, as mmap gives it; the identity the header claims, so that the checks behind
  // it are reached (a forger writes whatever identity the file has).
  std::vector<std::uint64_t> aligned((size + 7) / 8);
  if (size > 0) std::memcpy(aligned.data(), data, size);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(aligned.data());
  const FileIdentity identity{header_u64(bytes, size, 24), header_u64(bytes, size, 32),
                              header_u64(bytes, size, 40), header_u64(bytes, size, 48),
                              header_u64(bytes, size, 56)};
  for (const primus::FormatName& row : primus::kFormatNames) {
    const FormatKind kind = row.kind;
    if (!primus::data::format_ops(kind).indexed()) continue;
    std::string why;
    const auto view = primus::data::parse_index(bytes, size, kind, identity, &why);
    if (!view) {
      if (why.empty()) fail("a refusal without a reason");
      continue;
    }
    if (view->starts[0] != 0 || view->starts[view->records] != identity.size) {
      fail("an accepted index that does not span the file");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    for (const primus::FormatName& row : primus::kFormatNames) {
      if (primus::data::format_ops(row.kind).indexed()) scan(row.kind, data, size);
    }
    parse_stored(data, size);
  } catch (const std::exception& e) {
    fail(std::string("unexpected exception: ") + e.what());
  }
  return 0;
}
