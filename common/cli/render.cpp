// What the tools print (render.hpp).
#include "render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace primus::cli {

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& cell : cells)
    cell = printable(cell, false);
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream& out, const std::string& indent) const {
  std::vector<std::size_t> widths;
  for (const Column& column : columns_)
    widths.push_back(column.header.size());
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  }
  const auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const bool last = c + 1 == cells.size();
      const std::string padding(widths[c] - cells[c].size(), ' ');
      if (columns_[c].align == Align::kRight) {
        line += padding + cells[c];
      } else {
        line += cells[c];
        if (!last) line += padding;
      }
      if (!last) line += "  ";
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out << line << "\n";
  };
  std::vector<std::string> headers;
  for (const Column& column : columns_)
    headers.push_back(column.header);
  print_row(headers);
  for (const auto& row : rows_)
    print_row(row);
}

std::string human_bytes(std::uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string bytes_column(std::uint64_t bytes) {
  return std::to_string(bytes) + " (" + human_bytes(bytes) + ")";
}

std::string quote_truncated(const std::string& text, std::size_t max_chars) {
  std::size_t shown = std::min(text.size(), max_chars);
  // Never cut a UTF-8 character in two.
  while (shown > 0 && shown < text.size() &&
         (static_cast<unsigned char>(text[shown]) & 0xC0) == 0x80)
    --shown;
  std::string quoted = "\"";
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\t':
        quoted += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
          quoted += escaped;
        } else {
          quoted += static_cast<char>(c);
        }
    }
  }
  if (shown < text.size()) return quoted + "...\" (" + std::to_string(text.size()) + " chars)";
  return quoted + "\"";
}

std::string format_double(double value) {
  if (std::isnan(value)) return "nan";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

namespace {

// The length of the UTF-8 sequence at text[at] and its code point, or 0 when it is not one
// (overlong forms, surrogates and values past U+10FFFF are not).
std::size_t utf8_sequence(std::string_view text, std::size_t at, char32_t& code) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  std::size_t length = 0;
  char32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code = lead & 0x1FU, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code = lead & 0x0FU, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code = lead & 0x07U, min = 0x10000;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0U) != 0x80U) return 0;
    code = (code << 6) | (byte(at + i) & 0x3FU);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

void append_escape(std::string& out, unsigned char c) {
  char escaped[8];
  std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
  out += escaped;
}

}  // namespace

std::string printable(std::string_view text, bool keep_layout) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto c = static_cast<unsigned char>(text[at]);
    if (c < 0x80) {
      const bool layout = keep_layout && (c == '\n' || c == '\t');
      if ((c < 0x20 || c == 0x7F) && !layout) {
        append_escape(out, c);
      } else {
        out += static_cast<char>(c);
      }
      ++at;
      continue;
    }
    char32_t code = 0;
    const std::size_t length = utf8_sequence(text, at, code);
    if (length == 0 || (code >= 0x80 && code <= 0x9F)) {
      for (std::size_t i = 0; i < std::max<std::size_t>(length, 1); ++i)
        append_escape(out, static_cast<unsigned char>(text[at + i]));
      at += std::max<std::size_t>(length, 1);
      continue;
    }
    out.append(text.substr(at, length));
    at += length;
  }
  return out;
}

void print_json(std::ostream& out, const Json& document) {
  out << document.dump(2, ' ', true, Json::error_handler_t::replace) << "\n";
}

int run_printing(const std::function<int(std::ostream& out, std::ostream& err)>& command) {
  std::ostringstream out;
  std::ostringstream err;
  int status = 0;
  try {
    status = command(out, err);
  } catch (...) {
    std::cerr << printable(err.str(), true);
    throw;
  }
  std::cerr << printable(err.str(), true);
  std::cout << printable(out.str(), true) << std::flush;
  return status;
}

}  // namespace primus::cli
