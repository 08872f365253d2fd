// Which rank commands a rejoin's standby can become, and the line that tells it to
// (launcher/local/standby_program.hpp); the process itself is tests/python/test_rejoin.py's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "local/standby_program.hpp"

namespace primus::launch {
namespace {

using Args = std::vector<std::string>;

TEST(LaunchStandby, APythonScriptOrModuleCanHaveAStandbyAndNothingElse) {
  EXPECT_EQ(python_program("/usr/bin/python3", {"python3", "train.py", "--lr", "0.1"}),
            (Args{"train.py", "--lr", "0.1"}));
  EXPECT_EQ(python_program("/venv/bin/python", {"python", "-m", "pkg.train", "x"}),
            (Args{"-m", "pkg.train", "x"}));
  EXPECT_EQ(python_program("/usr/bin/python3.11", {"python3.11", "t.py"}), (Args{"t.py"}));
  // The interpreter's own options, code on the command line, or no program at all: no standby.
  EXPECT_FALSE(python_program("/usr/bin/python3", {"python3", "-u", "train.py"}));
  EXPECT_FALSE(python_program("/usr/bin/python3", {"python3", "-c", "pass"}));
  EXPECT_FALSE(python_program("/usr/bin/python3", {"python3"}));
  EXPECT_FALSE(python_program("/usr/bin/python3", {"python3", "-m"}));
  EXPECT_FALSE(python_program("/usr/bin/python3", {"python3", "-m", "-x"}));
  // Not an interpreter: a shell, a binary, a name that only starts like one.
  EXPECT_FALSE(python_program("/bin/sh", {"sh", "run.sh"}));
  EXPECT_FALSE(python_program("/opt/bin/pythonic", {"pythonic", "t.py"}));
  EXPECT_FALSE(python_program("/opt/bin/python3-config", {"python3-config", "t.py"}));
}

TEST(LaunchStandby, TheAssignmentIsOneLineWithTheProgramAndTheWholeEnvironment) {
  const Environment env{{"RANK", "2"}, {"PATH", "/usr/bin"}, {"ODD", "a\nb\"c"}};
  const std::string line = standby_assignment({"train.py", "--x"}, env);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line, whatever the values hold";
  const auto message = nlohmann::json::parse(line);
  EXPECT_EQ(message["argv"], nlohmann::json(Args{"train.py", "--x"}));
  EXPECT_EQ(message["env"]["RANK"], "2");
  EXPECT_EQ(message["env"]["ODD"], "a\nb\"c");
  EXPECT_EQ(message["env"].size(), 3u);
  // Bytes that are not UTF-8 are replaced, never a throw that would end the launcher.
  const std::string bad = standby_assignment({"t.py"}, Environment{{"X", "\xff\xfe"}});
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(bad));
  EXPECT_TRUE(parsed["env"].contains("X"));
}

}  // namespace
}  // namespace primus::launch
