// common/cli, the command line of every tool: the forms an option takes, operands and "--",
// --help beside a mistake, the option table's rows with their checks, and every mistake named.
#include <gtest/gtest.h>

#include "../../common/cli/command_line.hpp"

namespace primus::cli {
namespace {

std::string error_of(const Parser& parser, const std::vector<std::string>& args) {
  try {
    parser.parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

Parser tool() {
  Parser parser(" (see tool --help)", " for 'tool'");
  parser.add({"json", Arg::kNone, "", "", "JSON instead of tables"})
      .add({"step", Arg::kRequired, "N", "a step number", "which step"})
      .add({"mode", Arg::kOptional, "M", "a mode", "a mode, or the default one"})
      .add({"op", Arg::kRequired, "NAME", "a collective", "which one", nullptr, 'o'})
      .operands({{"DIR", "the root directory"}});
  return parser;
}

TEST(Cli, ValuesAdjacentOrNextFlagsAndOptionalValuesOnlyAdjacent) {
  const Parsed a = tool().parse({"--step=3", "d", "--json", "--mode"});
  EXPECT_EQ(a.value("step"), "3");
  EXPECT_EQ(a.value("json"), "");
  EXPECT_EQ(a.value("mode"), "");
  EXPECT_EQ(a.operands, std::vector<std::string>{"d"});
  const Parsed b = tool().parse({"--step", "4", "--mode=fast", "d", "--step", "-5", "-o", "x"});
  EXPECT_EQ(b.value("step"), "-5") << "the last one wins, and a value may start with '-'";
  EXPECT_EQ(b.value("mode"), "fast");
  EXPECT_EQ(b.value("op"), "x");
  EXPECT_EQ(tool().parse({"--mode=", "d"}).value("mode"), "");
  // An optional value is never the next word: "d" is the operand.
  const Parsed c = tool().parse({"--mode", "d"});
  EXPECT_EQ(c.value("mode"), "");
  EXPECT_EQ(c.operands, std::vector<std::string>{"d"});
  EXPECT_FALSE(c.has("json"));
}

TEST(Cli, DashesEndTheOptionsAndACommandIsKeptApart) {
  EXPECT_EQ(tool().parse({"--", "--json"}).operands, std::vector<std::string>{"--json"});
  Parser launcher(" (see launcher --help)");
  launcher.add({"nproc", Arg::kRequired, "N", "a number", ""}).command("COMMAND");
  const Parsed p = launcher.parse({"--nproc", "2", "--", "python3", "-c", "--nproc"});
  EXPECT_EQ(p.value("nproc"), "2");
  EXPECT_EQ(p.command, (std::vector<std::string>{"python3", "-c", "--nproc"}));
  EXPECT_EQ(error_of(launcher, {"--nproc", "2"}),
            "missing COMMAND after '--' (see launcher --help)");
  EXPECT_EQ(error_of(launcher, {"--nproc", "2", "--"}),
            "missing COMMAND after '--' (see launcher --help)");
  EXPECT_EQ(error_of(launcher, {"python3", "--", "x"}),
            "unexpected argument 'python3' (see launcher --help)");
}

TEST(Cli, ABareCommandStartsAtTheFirstWordThatIsNoOptionOrValue) {
  Parser launcher(" (see launcher --help)");
  launcher.add({"nproc", Arg::kRequired, "N", "a number", ""})
      .add({"label", Arg::kNone, "", "", ""})
      .command("COMMAND", true);
  Parsed p = launcher.parse({"--nproc", "2", "--label", "train.py", "--lr", "1", "--", "x"});
  EXPECT_EQ(p.value("nproc"), "2");
  EXPECT_TRUE(p.has("label"));
  EXPECT_EQ(p.command, (std::vector<std::string>{"train.py", "--lr", "1", "--", "x"}));
  p = launcher.parse({"--nproc=2", "-m", "pkg.train", "--nproc", "9"});
  EXPECT_EQ(p.value("nproc"), "2");
  EXPECT_EQ(p.command, (std::vector<std::string>{"-m", "pkg.train", "--nproc", "9"}));
  p = launcher.parse({"--nproc", "2", "--", "python3", "x.py"});
  EXPECT_EQ(p.command, (std::vector<std::string>{"python3", "x.py"}));
  EXPECT_EQ(error_of(launcher, {"--frob", "x.py"}), "--frob: unknown option (see launcher --help)");
  EXPECT_EQ(error_of(launcher, {"--nproc", "2"}),
            "missing COMMAND after '--' (see launcher --help)");
}

TEST(Cli, HelpWinsOverMistakesButNotAfterDashes) {
  EXPECT_TRUE(tool().parse({"--frob", "--help"}).help);
  EXPECT_TRUE(tool().parse({"-h", "--step"}).help);
  EXPECT_FALSE(tool().parse({"--", "--help"}).help);
}

TEST(Cli, EveryMistakeNamesTheOptionOrOperand) {
  const Parser t = tool();
  EXPECT_EQ(error_of(t, {"d", "--frob"}), "--frob: unknown option for 'tool' (see tool --help)");
  EXPECT_EQ(error_of(t, {"d", "-x"}), "unknown option '-x' (see tool --help)");
  EXPECT_EQ(error_of(t, {"d", "--step"}), "--step: expected a step number, got nothing");
  EXPECT_EQ(error_of(t, {"d", "--json=yes"}), "--json: takes no value (see tool --help)");
  EXPECT_EQ(error_of(t, {}), "missing DIR, the root directory (see tool --help)");
  EXPECT_EQ(error_of(t, {"d", "e"}), "unexpected argument 'e' (see tool --help)");
  EXPECT_EQ(error_of(t, {"d", "--jso"}), "--jso: unknown option for 'tool' (see tool --help)")
      << "no abbreviations";
  // "-3" is an operand (for the tool to refuse as a number), not an unknown option.
  EXPECT_EQ(t.parse({"-3"}).operands, std::vector<std::string>{"-3"});
}

TEST(Cli, TheOptionTableRowsTakeTheirSrunFormsAndChecks) {
  Parser parser(" (see primus-env --help)");
  parser.add_option_table();
  const Parsed p = parser.parse({"--primus", "--primus-ckpt-dir", "/ckpt", "--primus-verbose",
                                 "--primus-bind-gpus=none", "--primus=tensorflow"});
  const std::vector<std::pair<std::string, std::optional<std::string>>> expected = {
      {"primus", std::nullopt},
      {"primus-ckpt-dir", "/ckpt"},
      {"primus-verbose", std::nullopt},
      {"primus-bind-gpus", "none"},
      {"primus", "tensorflow"}};
  EXPECT_EQ(p.table, expected);
  EXPECT_EQ(error_of(parser, {"--primus-bind-gpus=some"}),
            "--primus-bind-gpus: expected 'auto' or 'none', got 'some'");
  EXPECT_EQ(error_of(parser, {"--primus-cheese=1"}),
            "--primus-cheese: unknown option (see primus-env --help)");
  EXPECT_EQ(error_of(parser, {"--port-range=1-2"}),
            "--port-range: unknown option (see primus-env --help)")
      << "site keys are not options";
  EXPECT_NE(parser.options_help().find("--primus-ckpt-dir=PATH"), std::string::npos);
  EXPECT_NE(parser.options_help().find("--primus[=FRAMEWORK]"), std::string::npos);
}

}  // namespace
}  // namespace primus::cli
