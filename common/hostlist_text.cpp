// The text of Slurm hostlists (hostlist_text.hpp).
#include "hostlist_text.hpp"

namespace primus::hostlist_text {
namespace {

// Slurm compares prefixes with strnatcmp(): white space is ignored, and two digit runs met at the
// same point must be identical.
std::size_t digit_run(std::string_view s, std::size_t i) {
  std::size_t j = i;
  while (j < s.size() && is_digit(s[j]))
    ++j;
  return j - i;
}

}  // namespace

// The text for an error message: control characters (a NUL would end what()) as \xNN.
std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

CNumber read_c_number(std::string_view s, std::size_t begin, std::size_t end) {
  std::size_t i = begin;
  while (i < end && is_c_space(s[i]))
    ++i;
  bool negative = false;
  if (i < end && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  const std::size_t first_digit = i;
  std::uint64_t value = 0;
  bool overflow = false;
  for (; i < end && is_digit(s[i]); ++i) {
    const unsigned digit = static_cast<unsigned>(s[i] - '0');
    if (overflow || value > (kUint64Max - digit) / 10) {
      overflow = true;
    } else {
      value = value * 10 + digit;
    }
  }
  if (i == first_digit) return {0, begin};
  if (overflow) return {kUint64Max, i};
  return {negative ? 0 - value : value, i};
}

// Where digits were expected in [begin, end): after any white space and sign.
std::size_t digits_expected_at(std::string_view s, std::size_t begin, std::size_t end) {
  std::size_t i = begin;
  while (i < end && is_c_space(s[i]))
    ++i;
  if (i < end && (s[i] == '+' || s[i] == '-')) ++i;
  return i;
}

std::size_t count_digits(std::uint64_t n) {
  std::size_t digits = 1;
  while (n /= 10)
    ++digits;
  return digits;
}

std::size_t zero_padding(std::uint64_t n, int width) {
  const std::size_t digits = count_digits(n);
  return static_cast<std::size_t>(width) > digits ? static_cast<std::size_t>(width) - digits : 0;
}

void append_number(std::string& out, std::uint64_t n, int width) {
  out.append(zero_padding(n, width), '0');
  out += std::to_string(n);
}

bool natural_equal(std::string_view a, std::string_view b) {
  std::size_t i = 0;
  std::size_t j = 0;
  for (;;) {
    while (i < a.size() && is_c_space(a[i]))
      ++i;
    while (j < b.size() && is_c_space(b[j]))
      ++j;
    if (i == a.size() || j == b.size()) return i == a.size() && j == b.size();
    if (is_digit(a[i]) && is_digit(b[j])) {
      const std::size_t run = digit_run(a, i);
      if (digit_run(b, j) != run || a.substr(i, run) != b.substr(j, run)) return false;
      i += run;
      j += run;
      continue;
    }
    if (a[i] != b[j]) return false;
    ++i;
    ++j;
  }
}

// Slurm joins numbers of different zero-padded widths when one of the widths can serve both
// numbers without changing either's padding. Returns the width the joined range keeps.
std::optional<int> joined_width(std::uint64_t first, int first_width, std::uint64_t next,
                                int next_width) {
  if (first_width == next_width) return first_width;
  const bool first_changes = zero_padding(first, first_width) != zero_padding(first, next_width);
  const bool next_changes = zero_padding(next, next_width) != zero_padding(next, first_width);
  if (first_changes && next_changes) return std::nullopt;
  return first_changes ? first_width : next_width;
}

std::size_t find_in(std::string_view s, char c, std::size_t begin, std::size_t end) {
  return s.substr(0, end).find(c, begin);
}

std::size_t rfind_in(std::string_view s, char c, std::size_t begin, std::size_t end) {
  for (std::size_t i = end; i > begin; --i) {
    if (s[i - 1] == c) return i - 1;
  }
  return kNone;
}

std::uint64_t saturating_multiply(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > kUint64Max / a) return kUint64Max;
  return a * b;
}

}  // namespace primus::hostlist_text
