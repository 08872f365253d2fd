// The control channel's table of messages (launcher/control/messages.json) against the
// launcher's end: every kind in it parses to a report of its own and every report kind has a
// row; the task wrapper's lines are the rows that say "wrapper", and only those; every data
// operation a rank may send is one the dynamic queue handles. tests/python/test_messages.py
// holds the ranks' end to the same table.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "control/control_protocol.hpp"
#include "control/data_tasks.hpp"

namespace primus::launch {
namespace {

using json = nlohmann::json;

const json& table() {
  static const json kinds = [] {
    std::ifstream in(std::string(PRIMUS_SOURCE_DIR) + "/launcher/control/messages.json");
    return json::parse(in).at("kinds");
  }();
  return kinds;
}

bool sent_by(const json& row, const std::string& who) {
  for (const auto& sender : row.at("from"))
    if (sender == who) return true;
  return false;
}

// A line of `kind` with every field of its row, as its example gives it.
std::string example_line(const std::string& kind, const json& row) {
  json line = row.at("fields");
  line["type"] = kind;
  return line.dump();
}

TEST(ControlMessages, EveryKindOfTheTableParsesToAReportOfItsOwn) {
  std::set<ReportKind> seen;
  for (const auto& [kind, row] : table().items()) {
    if (!sent_by(row, "rank") && !sent_by(row, "wrapper")) continue;  // the launcher's own
    std::string error;
    const auto report = parse_report(example_line(kind, row), 3, sent_by(row, "wrapper"), error);
    ASSERT_TRUE(report.has_value()) << kind << ": " << error;
    EXPECT_NE(report->kind, ReportKind::kOther) << kind;
    EXPECT_TRUE(seen.insert(report->kind).second) << kind << " parses to another kind's report";
  }
  // The reverse: every kind of report the launcher acts on has a row.
  for (const ReportKind kind :
       {ReportKind::kHello, ReportKind::kHeartbeat, ReportKind::kEvent, ReportKind::kException,
        ReportKind::kGoodbye, ReportKind::kExit, ReportKind::kData, ReportKind::kScalars}) {
    EXPECT_EQ(seen.count(kind), 1U) << static_cast<int>(kind);
  }
}

TEST(ControlMessages, TheFieldsOfTheTableReachTheReport) {
  std::string error;
  const json& kinds = table();
  const auto hello = parse_report(example_line("hello", kinds.at("hello")), 1, true, error);
  ASSERT_TRUE(hello.has_value()) << error;
  EXPECT_EQ(hello->attempt, std::optional<std::uint32_t>(0));
  EXPECT_EQ(hello->node, "n1");
  EXPECT_EQ(hello->step, "7.0");
  const auto beat = parse_report(example_line("heartbeat", kinds.at("heartbeat")), 1, false, error);
  ASSERT_TRUE(beat.has_value()) << error;
  EXPECT_EQ(beat->steps, std::optional<std::uint64_t>(120));
  EXPECT_EQ(beat->samples, std::optional<std::uint64_t>(3840));
  EXPECT_EQ(beat->total_steps, std::optional<std::uint64_t>(1000));
  ASSERT_TRUE(beat->node_stats.has_value());
  EXPECT_EQ(beat->node_stats->memory_available_bytes, std::optional<std::uint64_t>(8192));
  const auto raised =
      parse_report(example_line("exception", kinds.at("exception")), 1, false, error);
  ASSERT_TRUE(raised.has_value()) << error;
  EXPECT_EQ(raised->peer, std::optional<std::uint32_t>(3));
  const auto ended = parse_report(example_line("exit", kinds.at("exit")), 1, true, error);
  ASSERT_TRUE(ended.has_value()) << error;
  EXPECT_EQ(ended->wait_status, 256);
  const auto event = parse_report(example_line("event", kinds.at("event")), 1, false, error);
  ASSERT_TRUE(event.has_value()) << error;
  EXPECT_EQ(event->generation, std::optional<std::uint32_t>(1));
}

// The launcher's generation notice has exactly the fields of its row, which says the launcher
// sends it (python/primus/_rejoin.py reads it).
TEST(ControlMessages, TheGenerationNoticeIsItsRow) {
  const json notice = json::parse(generation_notice(4, 29500, 29501, "/ckpt/step-00000007"));
  const json& row = table().at("generation");
  EXPECT_TRUE(sent_by(row, "launcher"));
  EXPECT_EQ(notice.at("type"), "generation");
  std::set<std::string> fields;
  for (const auto& [field, value] : notice.items())
    if (field != "type") fields.insert(field);
  std::set<std::string> expected;
  for (const auto& [field, value] : row.at("fields").items())
    expected.insert(field);
  EXPECT_EQ(fields, expected);
  EXPECT_EQ(notice.at("generation"), 4);
  EXPECT_EQ(notice.at("master_port"), 29500);
  EXPECT_EQ(notice.at("primus_port"), 29501);
  EXPECT_EQ(notice.at("resume"), "/ckpt/step-00000007");
}

// The task wrapper reads the notice it is sent under srun (a rejoin's replacement in its task):
// the row's example and the launcher's own line read back; a line short of any field, or with a
// field out of its range, is no notice.
TEST(ControlMessages, TheWrapperReadsTheGenerationNoticeAndRefusesAnyOtherLine) {
  std::string error;
  const auto notice =
      parse_generation_notice(generation_notice(4, 29500, 29501, "/ckpt/step-00000007"), error);
  ASSERT_TRUE(notice.has_value()) << error;
  EXPECT_EQ(notice->generation, 4U);
  EXPECT_EQ(notice->master_port, 29500);
  EXPECT_EQ(notice->primus_port, 29501);
  EXPECT_EQ(notice->resume, "/ckpt/step-00000007");
  EXPECT_TRUE(parse_generation_notice(example_line("generation", table().at("generation")), error)
                  .has_value())
      << error;
  for (const std::string& bad : {
           std::string("not json"),
           std::string("[1, 2]"),
           std::string(R"({"type": "hello", "generation": 1})"),
           std::string(
               R"({"type": "generation", "master_port": 1, "primus_port": 2, "resume": "/c"})"),
           std::string(R"({"type": "generation", "generation": 0, "master_port": 1,)"
                       R"( "primus_port": 2, "resume": "/c"})"),
           std::string(R"({"type": "generation", "generation": 1, "master_port": 70000,)"
                       R"( "primus_port": 2, "resume": "/c"})"),
           std::string(R"({"type": "generation", "generation": 1, "master_port": 1,)"
                       R"( "primus_port": -2, "resume": "/c"})"),
           std::string(R"({"type": "generation", "generation": 1, "master_port": 1,)"
                       R"( "primus_port": 2, "resume": ""})"),
       }) {
    error.clear();
    EXPECT_FALSE(parse_generation_notice(bad, error).has_value()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

// The replacement's environment is the failed rank's with the notice's generation, ports and
// resume point, and the TCP bootstrap, each variable once.
TEST(ControlMessages, TheReplacementsEnvironmentIsTheRanksWithTheNoticesGeneration) {
  GenerationNotice notice;
  notice.generation = 2;
  notice.master_port = 21000;
  notice.primus_port = 21001;
  notice.resume = "/ckpt/step-00000020";
  const std::vector<std::string> env =
      replacement_environment({"RANK=5", "MASTER_PORT=20000", "PRIMUS_BOOTSTRAP=pmix", "PATH=/bin",
                               "MASTER_ADDR=n1", "PRIMUS_PORT_RANGE=1-2"},
                              notice);
  const std::multiset<std::string> got(env.begin(), env.end());
  const std::multiset<std::string> expected = {"RANK=5",
                                               "PATH=/bin",
                                               "MASTER_ADDR=n1",
                                               "PRIMUS_PORT_RANGE=1-2",
                                               "PRIMUS_GENERATION=2",
                                               "MASTER_PORT=21000",
                                               "PRIMUS_PORT=21001",
                                               "PRIMUS_BOOTSTRAP=tcp",
                                               "PRIMUS_RESUME=/ckpt/step-00000020"};
  EXPECT_EQ(got, expected);
}

// The launcher's word to kill a hung rank is its row, and the wrapper tells it from any other
// line.
TEST(ControlMessages, TheKillLineIsItsRowAndTheWrapperKnowsItFromOthers) {
  const json line = json::parse(kill_rank_line("hung"));
  const json& row = table().at("kill");
  EXPECT_TRUE(sent_by(row, "launcher"));
  EXPECT_EQ(line.at("type"), "kill");
  std::set<std::string> fields;
  for (const auto& [field, value] : line.items())
    if (field != "type") fields.insert(field);
  std::set<std::string> expected;
  for (const auto& [field, value] : row.at("fields").items())
    expected.insert(field);
  EXPECT_EQ(fields, expected);
  EXPECT_TRUE(is_kill_line(kill_rank_line("hung")));
  EXPECT_TRUE(is_kill_line(example_line("kill", row)));
  EXPECT_FALSE(is_kill_line(generation_notice(1, 2, 3, "/c")));
  EXPECT_FALSE(is_kill_line("kill"));
  EXPECT_FALSE(is_kill_line(R"({"type": ["kill"]})"));
}

// The launcher's word to start the nodes' standbys is its row; the wrapper tells it from the
// others, and the replacement's event that a wrapper sends back carries its source to the report.
TEST(ControlMessages, TheStandbyLineIsItsRowAndTheReplacementEventReachesTheReport) {
  const json line = json::parse(standby_line());
  const json& row = table().at("standby");
  EXPECT_TRUE(sent_by(row, "launcher"));
  EXPECT_EQ(line.size(), 1U + row.at("fields").size());
  EXPECT_TRUE(is_standby_line(standby_line()));
  EXPECT_FALSE(is_standby_line(kill_rank_line("hung")));
  EXPECT_FALSE(is_kill_line(standby_line()));
  EXPECT_FALSE(is_standby_line(R"({"type": "standby-x"})"));
  std::string error;
  for (const bool from_standby : {true, false}) {
    const auto report = parse_report(wrapper_replacement_line(from_standby), 4, true, error);
    ASSERT_TRUE(report.has_value()) << error;
    EXPECT_EQ(report->event, "replacement");
    EXPECT_EQ(report->replacement, from_standby ? "standby" : "started");
  }
}

TEST(ControlMessages, TheWrappersLinesAreTheRowsThatSayWrapper) {
  std::set<std::string> sent;
  for (const std::string& line : {wrapper_hello_line(2, "n3", 99, "7.1"), wrapper_exit_line(9),
                                  wrapper_signal_line("SIGTERM"), wrapper_replacement_line(true)}) {
    const json message = json::parse(line);
    const std::string kind = message.at("type");
    ASSERT_TRUE(table().contains(kind)) << line;
    const json& row = table().at(kind);
    EXPECT_TRUE(sent_by(row, "wrapper")) << kind;
    for (const auto& [field, value] : message.items()) {
      if (field != "type") {
        EXPECT_TRUE(row.at("fields").contains(field)) << kind << "." << field;
      }
    }
    if (kind == "event") {
      const auto& events = row.at("wrapper_events");
      EXPECT_NE(std::find(events.begin(), events.end(), message.at("event")), events.end());
    }
    sent.insert(kind);
  }
  for (const auto& [kind, row] : table().items()) {
    if (sent_by(row, "wrapper")) {
      EXPECT_EQ(sent.count(kind), 1U) << kind;
    }
  }
}

TEST(ControlMessages, EveryDataOperationOfTheRanksIsHandled) {
  const auto handled = [](const std::string& op) {
    DataTasks tasks(1);
    for (const DataMessage& reply : tasks.receive(0, json{{"type", "data"}, {"op", op}}.dump())) {
      if (reply.line.find("unknown data operation") != std::string::npos) return false;
    }
    return true;
  };
  for (const auto& op : table().at("data").at("ops_to_launcher"))
    EXPECT_TRUE(handled(op)) << op;
  EXPECT_FALSE(handled("rewind"));  // the check can fail
}

}  // namespace
}  // namespace primus::launch
