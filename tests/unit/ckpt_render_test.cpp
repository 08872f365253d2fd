// primus-ckpt's output of names and fields from hostile files (common/cli/render.cpp, under
// ckpt/tools/render.hpp's names).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "tools/render.hpp"

namespace primus::ckpt::tool {
namespace {

bool has_control(const std::string& text, bool allow_layout) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (allow_layout && (c == '\n' || c == '\t')) continue;
    if (c < 0x20 || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      return true;
    }
  }
  return false;
}

TEST(CkptRender, ControlCharactersAreEscapedAndTextIsKept) {
  // ESC [ 2 J (clear screen), a C1 CSI as UTF-8 (U+009B), a raw C1 byte, a lone continuation
  // byte, an overlong '/', BEL, and text that must stay: UTF-8 letters and a backslash.
  const std::string hostile =
      "w\x1b[2J\xc2\x9b"
      "31m\x9b\x80\xc0\xaf\a\xc3\xa9\\";
  const std::string shown = printable(hostile, false);
  EXPECT_FALSE(has_control(shown, false)) << shown;
  EXPECT_EQ(shown, "w\\x1b[2J\\xc2\\x9b31m\\x9b\\x80\\xc0\\xaf\\x07\xc3\xa9\\");
  EXPECT_EQ(printable("a\nb\tc", true), "a\nb\tc");
  EXPECT_EQ(printable("a\nb\tc", false), "a\\x0ab\\x09c");
  EXPECT_EQ(printable("\xe2\x82\xac \xf0\x9f\x98\x80", false), "\xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(printable("\xed\xa0\x80", false), "\\xed\\xa0\\x80");  // a surrogate
}

TEST(CkptRender, TableCellsCannotFakeRowsOrDriveTheTerminal) {
  Table table({{"tensor"}, {"bytes", Table::Align::kRight}});
  table.add_row({"evil\nfake row\x1b]0;title\a", "12"});
  std::ostringstream out;
  table.print(out);
  const std::string text = out.str();
  EXPECT_FALSE(has_control(text, true)) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;  // header and one row
}

}  // namespace
}  // namespace primus::ckpt::tool
