#include "monitor/json_text.hpp"

#include <charconv>
#include <cmath>

#include "primus/common/json_text.hpp"

namespace primus::launch::json_text {

void append_string(std::string& out, std::string_view value) {
  append_json_string(out, value);
}

namespace {

void append_float_text(std::string& out, const char* text, const char* end) {
  const std::string_view digits(text, static_cast<std::size_t>(end - text));
  out.append(digits);
  if (digits.find_first_of(".e") == std::string_view::npos) out += ".0";
}

}  // namespace

void append_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char text[64];
  const auto done = std::to_chars(text, text + sizeof text, value);
  append_float_text(out, text, done.ptr);
}

void append_number(std::string& out, Rounded value) {
  if (!std::isfinite(value.value)) {
    out += "null";
    return;
  }
  char text[64];
  const auto done =
      std::to_chars(text, text + sizeof text, value.value, std::chars_format::general, 6);
  append_float_text(out, text, done.ptr);
}

void append_number(std::string& out, std::uint64_t value) {
  char text[24];
  const auto done = std::to_chars(text, text + sizeof text, value);
  out.append(text, done.ptr);
}

}  // namespace primus::launch::json_text
