// Fuzz target for primus::Hostlist::parse (libFuzzer; tests/fuzz/standalone_main.cpp replays
// inputs without it). Any text either parses or throws ParseError with a position inside the
// text; a parsed list must agree with itself: size() == expand().size(), at(i) == expand()[i],
// and parse(compress()) names the same hosts wherever Slurm's compressed form can be read back.
// Anything else (another exception, a failed check, a sanitizer report) aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "primus/common/error.hpp"
#include "primus/common/hostlist.hpp"

namespace {

// Lists are expanded only up to this many hosts; larger ones are checked by sampling at().
constexpr std::size_t kMaxExpanded = std::size_t{1} << 14;
constexpr std::size_t kSamples = 64;

[[noreturn]] void fail(std::string_view text, const std::string& what) {
  std::fprintf(stderr, "hostlist fuzz: %s\n  input (%zu bytes): '", what.c_str(), text.size());
  for (unsigned char c : text)
    std::fprintf(stderr, c >= 32 && c < 127 ? "%c" : "\\x%02x", c);
  std::fprintf(stderr, "'\n");
  std::abort();
}

#define CHECK(condition)                                       \
  do {                                                         \
    if (!(condition)) fail(text, "check failed: " #condition); \
  } while (0)

// Slurm's compressed form reads back as the same hosts unless a name is empty or holds a bracket,
// a separator or white space (Slurm then splits, renames or joins hosts differently).
bool plain_names(const std::vector<std::string>& hosts) {
  for (const std::string& host : hosts) {
    if (host.empty()) return false;
    for (char c : host) {
      if (c == '[' || c == ']' || c == ',' || c == ' ' || (c >= '\t' && c <= '\r')) return false;
    }
  }
  return true;
}

// Reading Slurm's compressed form back may also hit a limit: joined ranges past 65536 hosts or
// 262144 items, or a prefix ending in digits that runs into the number ("n193" and 00000932...
// print as one 26-digit number, 2^64 or more).
bool limit_of_reading_back(const primus::ParseError& e) {
  const std::string message = e.what();
  return message.find("hosts in one range") != std::string::npos ||
         message.find("ranges in one bracket") != std::string::npos ||
         message.find("expected a number below") != std::string::npos;
}

void check_round_trip(std::string_view text, const primus::Hostlist& list,
                      const std::vector<std::string>& hosts) {
  if (!plain_names(hosts)) return;
  const std::string compressed = list.compress();
  try {
    const primus::Hostlist again = primus::Hostlist::parse(compressed);
    if (again.expand() != hosts)
      fail(text, "parse(compress()) differs; compress() = " + compressed);
  } catch (const primus::ParseError& e) {
    if (!limit_of_reading_back(e)) fail(text, std::string("parse(compress()) threw: ") + e.what());
  }
}

void check_small(std::string_view text, const primus::Hostlist& list) {
  const std::vector<std::string> hosts = list.expand();
  CHECK(hosts.size() == list.size());
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (list.at(i) != hosts[i]) fail(text, "at(" + std::to_string(i) + ") != expand()[i]");
  }
  check_round_trip(text, list, hosts);
}

// Too large to expand: at() must answer (not throw) across the list, and compress() must work.
void check_large(std::string_view text, const primus::Hostlist& list) {
  const std::size_t last = list.size() - 1;
  for (std::size_t k = 0; k <= kSamples; ++k)
    (void)list.at(last / kSamples * k);
  (void)list.at(last);
  CHECK(!list.compress().empty());
}

void check_list(std::string_view text, const primus::Hostlist& list) {
  CHECK(list.empty() == (list.size() == 0));
  bool threw = false;
  try {
    (void)list.at(list.size());
  } catch (const std::out_of_range&) {
    threw = true;
  }
  CHECK(threw);
  if (list.size() <= kMaxExpanded) {
    check_small(text, list);
  } else {
    check_large(text, list);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    primus::Hostlist list;
    try {
      list = primus::Hostlist::parse(text);
    } catch (const primus::ParseError& e) {
      CHECK(e.position() <= text.size());
      CHECK(std::string_view(e.what()).find("at position") != std::string_view::npos);
      return 0;
    }
    check_list(text, list);
  } catch (const std::exception& e) {
    fail(text, std::string("unexpected exception: ") + e.what());
  }
  return 0;
}
