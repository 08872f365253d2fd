#include "primus/common/environment.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "primus/common/json_text.hpp"

namespace primus {
namespace {

TEST(Environment, FormatRedactsTheJobSecret) {
  const EnvList vars = {{"RANK", "3"}, {"PRIMUS_JOB_SECRET", "s3cr3t-value"}, {"X", "a=b"}};
  const std::string text = format_environment(vars);
  EXPECT_EQ(text, "RANK=3\nPRIMUS_JOB_SECRET=<redacted>\nX=a=b\n");
  EXPECT_EQ(text.find("s3cr3t"), std::string::npos);

  const Environment map = {{"PRIMUS_JOB_SECRET", "s3cr3t-value"}, {"A", "1"}};
  EXPECT_EQ(format_environment(map), "A=1\nPRIMUS_JOB_SECRET=<redacted>\n");
}

TEST(Environment, Lookup) {
  const Environment env = {{"A", ""}, {"B", "2"}};
  EXPECT_EQ(lookup(env, "A"), std::optional<std::string>(""));
  EXPECT_EQ(lookup(env, "B"), std::optional<std::string>("2"));
  EXPECT_EQ(lookup(env, "C"), std::nullopt);
}

TEST(JsonText, QuotesEveryCharacterJsonNeeds) {
  const std::string raw = std::string("a\"b\\c\nd\te") + '\x01' + "\xc3\xa9";
  const nlohmann::json parsed = nlohmann::json::parse(json_quote(raw));
  EXPECT_EQ(parsed.get<std::string>(), raw);
  EXPECT_EQ(json_quote("n1:123"), "\"n1:123\"");
}

TEST(JsonText, BytesThatAreNotUtf8BecomeTheReplacementCharacter) {
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate, past U+10FFFF.
  EXPECT_EQ(json_quote("a\x80"
                       "b"),
            "\"a\\ufffdb\"");
  EXPECT_EQ(json_quote("\xe2\x82"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(json_quote("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  // Valid sequences of 2, 3 and 4 bytes pass as they are.
  const std::string valid = "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
  EXPECT_EQ(json_quote(valid), "\"" + valid + "\"");
  EXPECT_EQ(nlohmann::json::parse(json_quote("x\xff"
                                             "y"))
                .get<std::string>(),
            "x\xef\xbf\xbdy");
}

}  // namespace
}  // namespace primus
