// The text of Slurm hostlists (internal to common/: hostlist.cpp and hostlist_parse.cpp): the
// limits, the characters, numbers read as C's strtoul reads them, zero padding, Slurm's natural
// comparison of prefixes, and the scanners the parser uses.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace primus::hostlist_text {

inline constexpr std::size_t kNone = std::string_view::npos;
inline constexpr std::uint64_t kUint64Max = std::numeric_limits<std::uint64_t>::max();

// Slurm 22.05 limits.
inline constexpr std::uint64_t kMaxHostsInRange = 65536;    // "lo-hi" inside brackets
inline constexpr std::uint64_t kMaxPrefixValues = 65536;    // values of a bracket before the last
inline constexpr std::size_t kMaxRangesInBracket = 262144;  // Slurm exits beyond this
inline constexpr std::size_t kMaxHosts = INT_MAX;           // Slurm counts hosts in an int
// Primus limits, far beyond any real cluster, where Slurm crashes, hangs or runs out of memory.
inline constexpr std::uint64_t kMaxNumber =
    kUint64Max - 1;  // Slurm saturates at 2^64-1, then crashes
inline constexpr std::size_t kMaxPrefixBytes = std::size_t{1} << 24;  // bytes of generated prefixes

inline bool is_separator(char c) {
  return c == ',' || c == ' ' || c == '\t';
}
inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_c_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

inline std::uint64_t range_count(std::uint64_t lo, std::uint64_t hi) {
  return hi - lo + 1;
}

// A number read as C's strtoul(text, &end, 10) reads it: leading white space, an optional sign,
// then digits. Too large a value saturates at 2^64-1; a '-' negates modulo 2^64.
struct CNumber {
  std::uint64_t value = 0;
  std::size_t end = 0;  // one past the last digit; the start position when there is no digit
};
CNumber read_c_number(std::string_view s, std::size_t begin, std::size_t end);

// The next position of one character at or after a position; the positions asked for never
// decrease, so the text is scanned once in all.
class ForwardFinder {
 public:
  ForwardFinder(std::string_view text, char c) : text_(text), c_(c) {}
  std::size_t next(std::size_t from) {
    if (!valid_ || (found_ != kNone && found_ < from)) {
      found_ = text_.find(c_, from);
      valid_ = true;
    }
    return found_;
  }

 private:
  std::string_view text_;
  char c_;
  std::size_t found_ = kNone;
  bool valid_ = false;
};

// The text for an error message: control characters (a NUL would end what()) as \xNN.
std::string printable(std::string_view text);

// Where digits were expected in [begin, end): after any white space and sign.
std::size_t digits_expected_at(std::string_view s, std::size_t begin, std::size_t end);

// Digits of `n`; the zeros that pad it to `width`; `n` appended so padded.
std::size_t count_digits(std::uint64_t n);
std::size_t zero_padding(std::uint64_t n, int width);
void append_number(std::string& out, std::uint64_t n, int width);

// Slurm compares prefixes with strnatcmp(): white space is ignored, and two digit runs met at
// the same point must be identical.
bool natural_equal(std::string_view a, std::string_view b);

// Slurm joins numbers of different zero-padded widths when one of the widths can serve both
// numbers without changing either's padding. Returns the width the joined range keeps.
std::optional<int> joined_width(std::uint64_t first, int first_width, std::uint64_t next,
                                int next_width);

// The first (last) `c` in [begin, end), or kNone.
std::size_t find_in(std::string_view s, char c, std::size_t begin, std::size_t end);
std::size_t rfind_in(std::string_view s, char c, std::size_t begin, std::size_t end);

// a * b, or 2^64-1 when that overflows.
std::uint64_t saturating_multiply(std::uint64_t a, std::uint64_t b);

}  // namespace primus::hostlist_text
