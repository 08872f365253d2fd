// Hand-checked tests of primus::Hostlist. Every expected value below was confirmed with
// Slurm 22.05.8 (`scontrol show hostnames` / `scontrol show hostlist`).
#include "primus/common/hostlist.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "primus/common/error.hpp"

namespace primus {
namespace {

using Hosts = std::vector<std::string>;

Hosts expand(const std::string& text) {
  return Hostlist::parse(text).expand();
}
std::string compress(const std::string& text) {
  return Hostlist::parse(text).compress();
}

// The ParseError thrown for `text`; fails the test when parsing succeeds.
ParseError parse_error(const std::string& text) {
  try {
    Hostlist::parse(text);
  } catch (const ParseError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ParseError for '" << text << "'";
  return ParseError("none", 0);
}

TEST(HostlistExpand, SingleBracketWithCommaListAndPaddedRange) {
  EXPECT_EQ(expand("a[01-03,7]"), (Hosts{"a01", "a02", "a03", "a7"}));
}

TEST(HostlistExpand, SeveralBracketGroupsInOneName) {
  EXPECT_EQ(expand("b[1-2]c[3-4]"), (Hosts{"b1c3", "b1c4", "b2c3", "b2c4"}));
  EXPECT_EQ(expand("a[01-03,7],b[1-2]c[3-4]"),
            (Hosts{"a01", "a02", "a03", "a7", "b1c3", "b1c4", "b2c3", "b2c4"}));
}

TEST(HostlistExpand, ThreeGroupsVaryTheLeftmostFastestBeforeTheLast) {
  // Slurm's order: the last bracket innermost, then the first, then the second.
  EXPECT_EQ(expand("a[1-2]b[1-2]c[1-2]"), (Hosts{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1",
                                                 "a1b2c2", "a2b2c1", "a2b2c2"}));
}

TEST(HostlistExpand, SeparatorsAreCommaSpaceAndTab) {
  EXPECT_EQ(expand("a1\tb2 c3,d4"), (Hosts{"a1", "b2", "c3", "d4"}));
  EXPECT_EQ(expand(" ,a,, b ,"), (Hosts{"a", "b"}));
  EXPECT_EQ(expand("a[1-2] b"), (Hosts{"a1", "a2", "b"}));
}

TEST(HostlistExpand, OrderAndDuplicatesAreKept) {
  EXPECT_EQ(expand("n3,n1,n2,n1"), (Hosts{"n3", "n1", "n2", "n1"}));
  EXPECT_EQ(expand("n[2,1-2]"), (Hosts{"n2", "n1", "n2"}));
}

TEST(HostlistExpand, EmptyTextIsAnEmptyList) {
  EXPECT_TRUE(Hostlist::parse("").empty());
  EXPECT_TRUE(Hostlist::parse(" , ").empty());
  EXPECT_EQ(compress(""), "");
}

TEST(HostlistExpand, WidthComesFromTheTextOfTheFirstNumber) {
  EXPECT_EQ(expand("n[09-10]"), (Hosts{"n09", "n10"}));
  EXPECT_EQ(expand("n[9-10]"), (Hosts{"n9", "n10"}));
  EXPECT_EQ(expand("n[001-3]"), (Hosts{"n001", "n002", "n003"}));
  EXPECT_EQ(expand("n[1-003]"), (Hosts{"n1", "n2", "n3"}));
  EXPECT_EQ(expand("n01,n1,n2"), (Hosts{"n01", "n1", "n2"}));
}

TEST(HostlistExpand, NumbersAreReadAsStrtoulReadsThem) {
  // White space and a sign count in the width; text between the first number and '-' is ignored.
  EXPECT_EQ(expand("n[1, 2]"), (Hosts{"n1", "n02"}));
  EXPECT_EQ(expand("n[+1-3]"), (Hosts{"n01", "n02", "n03"}));
  EXPECT_EQ(expand("n[1a-3]"), (Hosts{"n01", "n02", "n03"}));
  EXPECT_EQ(expand("n[1- +3]"), (Hosts{"n1", "n2", "n3"}));
  EXPECT_EQ(expand("n[0- -0]"), (Hosts{"n0"}));
  EXPECT_EQ(expand("n[1-]"), (Hosts{"n1"}));
}

TEST(HostlistExpand, HostsWithoutNumbersAndNamesOfDigitsOnly) {
  EXPECT_EQ(expand("login,gpu-a,007,123"), (Hosts{"login", "gpu-a", "007", "123"}));
  EXPECT_EQ(compress("123,124"), "[123-124]");
  EXPECT_EQ(compress("login,gpu-a,007,123"), "login,gpu-a,[007,123]");
  EXPECT_EQ(expand("[1-2]x[3]"), (Hosts{"1x3", "2x3"}));
}

TEST(HostlistExpand, AnUnclosedBracketIsKeptAsSlurmKeepsIt) {
  EXPECT_EQ(expand("a[1-2"), (Hosts{"a]"}));
  EXPECT_EQ(expand("a[1-2 b"), (Hosts{"a]", "b"}));
  EXPECT_EQ(expand("n[1-2]y["), (Hosts{"n[1-2]y]"}));
  EXPECT_EQ(expand("[1-2,[3"), (Hosts{"1-2", "3"}));
  EXPECT_EQ(expand("[1-2],[3"), (Hosts{"1", "2", "3"}));
  EXPECT_EQ(expand("a,[,b"), (Hosts{"a", "", "b"}));
}

TEST(HostlistExpand, StrayAndNestedBrackets) {
  EXPECT_EQ(expand("x]"), (Hosts{"x]"}));
  EXPECT_EQ(expand("a]b[1]"), (Hosts{"a]b1"}));
  EXPECT_EQ(expand("a[[1]"), (Hosts{"a[1"}));
  EXPECT_EQ(expand("a[1][2]"), (Hosts{"a12"}));
  EXPECT_EQ(expand("x[a,[1],b]"), (Hosts{"x[a,1", "b]"}));
  EXPECT_EQ(expand("a[1 [2]b[3]"), (Hosts{"a[1 2b3"}));
}

TEST(HostlistExpand, AFailureInABracketBeforeTheSecondLastDropsTheEntry) {
  // Slurm ignores the error in "[x]" here: the entry names no host, the list stays valid.
  EXPECT_EQ(expand("a[x]b[1-2]c[3],d"), (Hosts{"d"}));
  // ... and takes only the values that fit in 65536 from such a bracket.
  EXPECT_EQ(Hostlist::parse("a[1-40000,1-40000]b[1-2]c[5]").size(), 80000u);
}

TEST(HostlistCompress, KeepsOrderAndDuplicates) {
  EXPECT_EQ(compress("n3,n1,n2,n1"), "n[3,1-2,1]");
  EXPECT_EQ(compress("a[01-03,7],b[1-2]c[3-4]"), "a[01-03,7],b1c[3-4],b2c[3-4]");
  EXPECT_EQ(compress("a[1-2]b[3-4],a[1-2]b[5]"), "a1b[3-4],a2b[3-4],a1b5,a2b5");
}

TEST(HostlistCompress, JoinsConsecutiveNumbersOfCompatibleWidth) {
  EXPECT_EQ(compress("n9,n10"), "n[9-10]");
  EXPECT_EQ(compress("n09,n10"), "n[09-10]");
  EXPECT_EQ(compress("n9,n010"), "n[9,010]");
  EXPECT_EQ(compress("n01,n1,n2"), "n[01,1-2]");
  EXPECT_EQ(compress("n[1-2],n[3-4]"), "n[1-4]");
  EXPECT_EQ(compress("n[1, 2]"), "n[1,02]");
}

TEST(HostlistCompress, BracketsOnlyWhereARunHasMoreThanOneHost) {
  EXPECT_EQ(compress("n1"), "n1");
  EXPECT_EQ(compress("n1,m2,n3"), "n1,m2,n3");
  EXPECT_EQ(compress("a,,b"), "a,b");
  EXPECT_EQ(compress("a,[,b"), "a,,b");
  EXPECT_EQ(compress("login,n1,n2"), "login,n[1-2]");
}

TEST(HostlistCompress, PrefixesAreComparedIgnoringWhiteSpace) {
  // Slurm compares prefixes with strnatcmp(), which skips white space: "a\v" and "a" join, and
  // the joined range keeps the first prefix.
  EXPECT_EQ(expand("a\v1,a2"), (Hosts{"a\v1", "a\v2"}));
  EXPECT_EQ(compress("a\v1,a2"), "a\v[1-2]");
  EXPECT_EQ(compress("a\v[1-2],b,a[4-5]"), "a\v[1-2],b,a[4-5]");
}

TEST(HostlistAt, MatchesExpand) {
  const Hostlist list = Hostlist::parse("a[01-03,7],login,b[1-2]c[3-4],n3,n1,n2,n1");
  const Hosts hosts = list.expand();
  ASSERT_EQ(list.size(), hosts.size());
  for (std::size_t i = 0; i < hosts.size(); ++i)
    EXPECT_EQ(list.at(i), hosts[i]) << i;
  EXPECT_THROW(list.at(hosts.size()), std::out_of_range);
  EXPECT_THROW(Hostlist().at(0), std::out_of_range);
}

TEST(HostlistAt, HugeListWithoutExpanding) {
  // Slurm refuses "n[1-800000]" (at most 65536 hosts per range) but joins consecutive ranges, so
  // 800000 hosts arrive as 13 ranges and are kept as one.
  std::string text;
  for (std::uint64_t lo = 1; lo <= 800000; lo += 65536) {
    if (!text.empty()) text += ',';
    text += "n[" + std::to_string(lo) + "-" +
            std::to_string(std::min<std::uint64_t>(lo + 65535, 800000)) + "]";
  }
  const Hostlist list = Hostlist::parse(text);
  EXPECT_EQ(list.size(), 800000u);
  EXPECT_EQ(list.compress(), "n[1-800000]");
  EXPECT_EQ(list.at(0), "n1");
  EXPECT_EQ(list.at(799999), "n800000");
  EXPECT_EQ(list.at(65536), "n65537");

  const Hostlist racks = Hostlist::parse("rack[001-100]n[1-65536]");
  EXPECT_EQ(racks.size(), 6553600u);
  EXPECT_EQ(racks.at(6553599), "rack100n65536");
  EXPECT_EQ(racks.at(65536), "rack002n1");
}

TEST(HostlistPushHost, JoinsTheLastRange) {
  Hostlist list;
  list.push_host("n1");
  list.push_host("n2");
  list.push_host("login");
  list.push_host("n3");
  EXPECT_EQ(list.size(), 4u);
  EXPECT_EQ(list.compress(), "n[1-2],login,n3");
  EXPECT_THROW(list.push_host("n18446744073709551615"), ParseError);
}

TEST(HostlistErrors, SuffixAfterTheLastBracket) {
  const ParseError e = parse_error("a[1-2]b");
  EXPECT_EQ(e.position(), 6u);
  EXPECT_STREQ(e.what(),
               "hostlist 'a[1-2]b': at position 6: expected ',' or end of list after ']'");
  EXPECT_EQ(parse_error("a[1-2]]").position(), 6u);
  EXPECT_EQ(parse_error("[[1]]").position(), 4u);
  EXPECT_EQ(parse_error("n1,n[1-2]-x").position(), 9u);
}

TEST(HostlistErrors, BadItemsInTheLastBracket) {
  EXPECT_EQ(parse_error("n[]").position(), 2u);
  EXPECT_EQ(parse_error("n[1,,2]").position(), 4u);
  EXPECT_EQ(parse_error("n[1-2,]").position(), 6u);
  EXPECT_EQ(parse_error("n[1--3]").position(), 4u);
  EXPECT_EQ(parse_error("n[- 1]").position(), 2u);
  EXPECT_EQ(parse_error("n[1a]").position(), 3u);
  EXPECT_EQ(parse_error("n[1-3a]").position(), 5u);
  EXPECT_EQ(parse_error("n[1-a]").position(), 4u);
  EXPECT_EQ(parse_error("n[1x]").position(), 3u);
  const ParseError e = parse_error("n[1-3a]");
  EXPECT_STREQ(e.what(), "hostlist 'n[1-3a]': at position 5: expected ',' or ']' after a range");
}

TEST(HostlistErrors, DecreasingAndOversizedRanges) {
  const ParseError decreasing = parse_error("n[10-9]");
  EXPECT_EQ(decreasing.position(), 2u);
  EXPECT_NE(std::string(decreasing.what()).find("'10-9'"), std::string::npos);
  EXPECT_EQ(Hostlist::parse("n[1-65536]").size(), 65536u);
  EXPECT_EQ(parse_error("n[1-65537]").position(), 2u);
  EXPECT_EQ(parse_error("n[5,1-800000]").position(), 4u);
}

TEST(HostlistErrors, BadSecondLastBracketRejectsTheList) {
  EXPECT_EQ(parse_error("x[1]y]z[2]").position(), 3u);
  EXPECT_EQ(parse_error("a[1-40000,1-40000]b[1]").position(), 10u);
}

TEST(HostlistErrors, NumbersOf2To64Minus1AndAboveAreRefused) {
  // Slurm saturates such numbers at 18446744073709551615 (renaming the host), and a range that
  // reaches it crashes `scontrol show hostnames`.
  EXPECT_EQ(parse_error("n99999999999999999999").position(), 1u);
  EXPECT_EQ(parse_error("n18446744073709551615").position(), 1u);
  EXPECT_EQ(parse_error("n[18446744073709551614-18446744073709551615]").position(), 2u);
  EXPECT_EQ(expand("n18446744073709551614"), (Hosts{"n18446744073709551614"}));
}

TEST(HostlistErrors, PrimusLimitsOnEnormousProducts) {
  EXPECT_THROW(Hostlist::parse("a[1-65536]b[1-65536]c[1]"), ParseError);
  EXPECT_THROW(Hostlist::parse(std::string("a\0b", 3)), ParseError);
}

}  // namespace
}  // namespace primus
