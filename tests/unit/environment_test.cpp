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

}  // namespace
}  // namespace primus
