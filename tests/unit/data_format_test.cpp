// The record formats' table: every name the option accepts (common/record_format.hpp, what the
// SPANK plugin parses with) has its row in libprimus-data (data/formats/) and the reverse, the
// values stored in index files never change, and each row is whole.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "../../data/formats/format_ops.hpp"
#include "primus/common/error.hpp"
#include "primus/data/format.hpp"

namespace primus::data {
namespace {

std::string name_of(const FormatName& row) {
  return std::string(row.name) + (row.sized ? ":24" : "");
}

TEST(DataFormatTable, EveryNameHasAWholeRow) {
  std::set<std::string_view> suffixes;
  for (const FormatName& row : kFormatNames) {
    SCOPED_TRACE(name_of(row));
    const auto format = parse_format(name_of(row));
    ASSERT_TRUE(format);
    EXPECT_EQ(format->kind, row.kind);
    EXPECT_EQ(to_string(*format), name_of(row));
    const FormatOps& ops = format_ops(row.kind);
    EXPECT_EQ(ops.kind, row.kind);
    EXPECT_NE(ops.locate, nullptr);
    EXPECT_GE(ops.least_frame, 1U);
    // An indexed format has a scanner and an index suffix of its own; any other counts its
    // records from the file's size, and its records have one size.
    EXPECT_EQ(ops.indexed(), ops.count_records == nullptr);
    EXPECT_EQ(ops.indexed(), !ops.index_suffix.empty());
    EXPECT_EQ(fixed_record_size(*format), ops.indexed() ? 0U : 24U);
    if (ops.indexed()) {
      EXPECT_TRUE(suffixes.insert(ops.index_suffix).second) << ops.index_suffix;
      EXPECT_NO_THROW(IndexScanner{row.kind});
    } else {
      EXPECT_THROW(IndexScanner{row.kind}, Error);
    }
  }
}

TEST(DataFormatTable, KeepsTheValuesStoredInIndexFiles) {
  // Index files written by any earlier Primus name their format by these values.
  EXPECT_EQ(static_cast<std::uint32_t>(FormatKind::kLines), 1U);
  EXPECT_EQ(static_cast<std::uint32_t>(FormatKind::kFixed), 2U);
  EXPECT_EQ(static_cast<std::uint32_t>(FormatKind::kTfrecord), 3U);
  EXPECT_EQ(format_ops(FormatKind::kLines).index_suffix, ".primus-lines-index");
  EXPECT_EQ(format_ops(FormatKind::kTfrecord).index_suffix, ".primus-tfrecord-index");
}

TEST(DataFormatTable, RefusesAValueThatIsNoFormat) {
  EXPECT_THROW(format_ops(static_cast<FormatKind>(0)), Error);
  EXPECT_THROW(format_ops(static_cast<FormatKind>(99)), Error);
  EXPECT_EQ(to_string(RecordFormat{static_cast<FormatKind>(99), 0}), "?");
}

}  // namespace
}  // namespace primus::data
