// Fuzz target for the manifest and rank-index parsers (ckpt/manifest.cpp, libFuzzer;
// standalone_main.cpp replays inputs without it). Any text either parses or throws
// CorruptCheckpoint; a parsed manifest must survive a round trip through to_json. Anything else
// (another exception, a failed check, a sanitizer report, a stack overflow) aborts. The input is
// also tried as a manifest's body with the right checksum around it, so that the fuzzer reaches
// the validation behind the checksum (an attacker can always compute it). Seeded with real
// manifests and indexes (tests/fuzz/corpus/manifest); crashes found are kept there.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../../ckpt/crc32c.hpp"
#include "primus/ckpt/manifest.hpp"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "manifest fuzz: %s\n", what.c_str());
  std::abort();
}

// Parses `text` with `parse`; what parses must come back the same through to_json and parse
// again. `what` names the parser in a failure.
template <typename Parse>
void round_trip(std::string_view text, Parse parse, const char* what) {
  try {
    const std::string again = primus::ckpt::to_json(parse(text, "fuzz"));
    if (primus::ckpt::to_json(parse(again, "round trip")) != again) {
      fail(std::string("a value parsed by ") + what + " does not survive to_json and parsing");
    }
  } catch (const primus::ckpt::CorruptCheckpoint&) {
  } catch (const std::exception& e) {
    fail(std::string(what) + " threw another exception: " + e.what());
  }
}

void parse_both(std::string_view text) {
  round_trip(text, primus::ckpt::parse_manifest, "parse_manifest");
  round_trip(text, primus::ckpt::parse_rank_index, "parse_rank_index");
}

// The input's JSON (nested at most 16 deep, so that dump() here cannot overflow the stack) as the
// body of a manifest with the right checksum; empty when it is not JSON.
std::string with_checksum(std::string_view text) {
  struct TooDeep {};
  using nlohmann::json;
  try {
    const json body =
        json::parse(text.begin(), text.end(), [](int depth, json::parse_event_t, json&) {
          if (depth > 16) throw TooDeep{};
          return true;
        });
    const std::string dumped = body.dump();
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x",
                  static_cast<unsigned>(primus::ckpt::crc32c(dumped.data(), dumped.size())));
    return json({{"manifest", body}, {"crc32c", crc}}).dump();
  } catch (const json::exception&) {
  } catch (const TooDeep&) {
  }
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  parse_both(text);
  const std::string wrapped = with_checksum(text);
  if (!wrapped.empty()) parse_both(wrapped);
  return 0;
}
