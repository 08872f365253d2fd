#include "primus/common/parse_number.hpp"

namespace primus {

std::optional<std::uint64_t> take_unsigned(std::string_view text, std::size_t& pos,
                                           std::uint64_t max) {
  std::size_t end = pos;
  std::uint64_t value = 0;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') {
    const auto digit = static_cast<std::uint64_t>(text[end] - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++end;
  }
  if (end == pos) return std::nullopt;
  pos = end;
  return value;
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t max) {
  std::size_t pos = 0;
  const auto value = take_unsigned(text, pos, max);
  if (!value || pos != text.size()) return std::nullopt;
  return value;
}

}  // namespace primus
