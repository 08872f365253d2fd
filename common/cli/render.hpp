// What the tools print (primus-ckpt, primus-data): aligned text tables, sizes and values for
// people, and the one JSON document that --json prints instead; every cell and message made
// safe for a terminal.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace primus::cli {

using Json = nlohmann::ordered_json;

// Columns separated by two spaces; numeric columns right-aligned; the last column unpadded.
class Table {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells);  // one cell per column
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& out, const std::string& indent = "") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "512 B", "1.5 KiB", "3.0 GiB".
std::string human_bytes(std::uint64_t bytes);
// "1234 (1.2 KiB)": exact and readable.
std::string bytes_column(std::uint64_t bytes);
// The text quoted, control characters escaped, cut to about max_chars with "..." and its
// length: "\"{\\\"rank\\\": 0}\"" or "\"abc...\" (5000 chars)".
std::string quote_truncated(const std::string& text, std::size_t max_chars);
// A double as printed by diff: "0", "0.5", "1e-07", "nan".
std::string format_double(double value);

// Text that is safe on a terminal: C0 control characters (but newline and tab where
// keep_layout), DEL, C1 control characters (U+0080 to U+009F, which terminals also obey) and
// bytes that are not UTF-8 become \xNN escapes (a C1 character's two bytes each); backslashes
// stay as they are. Tensor names, state keys and manifest fields come from files that may be
// hostile: every table cell and message goes through this.
std::string printable(std::string_view text, bool keep_layout);

// Runs a tool's command, which writes its report to `out` and notes to `err`; prints both
// through printable(), stdout only when the command returns (an error leaves it empty, and
// stderr still shows what was noted before the error, which is rethrown). Returns its status.
int run_printing(const std::function<int(std::ostream& out, std::ostream& err)>& command);

// The document, indented, then a newline. Non-ASCII characters are written as \u escapes;
// invalid UTF-8 in strings is replaced, not fatal.
void print_json(std::ostream& out, const Json& document);

}  // namespace primus::cli
