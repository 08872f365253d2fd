// primus-launch under Slurm, the pure parts: the control channel's messages, the hang rule,
// what a stop means (preemption, time limit, cancel, primus-launch stop), scontrol's records;
// and the control channel itself over real sockets on this machine: a rank and a task wrapper
// that know the secret get in, a stranger does not.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <thread>

#include "control/control_protocol.hpp"
#include "control/control_server.hpp"
#include "monitor/json_text.hpp"
#include "monitor/replaced_file.hpp"
#include "monitor/status.hpp"
#include "monitor/status_view.hpp"
#include "primus/collectives/control.hpp"
#include "primus/collectives/error.hpp"
#include "primus/common/error.hpp"
#include "primus/os/job_secret.hpp"
#include "slurm/slurm_queries.hpp"
#include "supervise/outcome.hpp"

namespace primus::launch {
namespace {

using namespace std::chrono_literals;

TEST(LaunchControl, ReportsAreParsedAndTheSenderComesFromTheConnection) {
  std::string error;
  auto hello = parse_report(R"({"type":"hello","attempt":2,"node":"n3","pid":77,"rank":5})", 1,
                            false, error);
  ASSERT_TRUE(hello) << error;
  EXPECT_EQ(hello->kind, ReportKind::kHello);
  EXPECT_EQ(hello->rank, 1U);  // the connection's rank, not the line's
  EXPECT_EQ(*hello->attempt, 2U);
  EXPECT_EQ(hello->node, "n3");
  EXPECT_EQ(hello->pid, 77);

  auto beat =
      parse_report(R"({"type":"heartbeat","steps":41,"rss_bytes":1000,"new":1})", 0, false, error);
  ASSERT_TRUE(beat) << error;
  EXPECT_EQ(beat->kind, ReportKind::kHeartbeat);
  EXPECT_EQ(*beat->steps, 41U);

  auto event = parse_report(
      R"({"type":"event","event":"checkpoint-committed","step":10,"path":"/c/step-10"})", 0, false,
      error);
  ASSERT_TRUE(event) << error;
  EXPECT_EQ(event->event, "checkpoint-committed");
  EXPECT_EQ(*event->steps, 10U);
  EXPECT_EQ(event->path, "/c/step-10");

  auto exit = parse_report(wrapper_exit_line(3 << 8), 4, true, error);
  ASSERT_TRUE(exit) << error;
  EXPECT_EQ(exit->kind, ReportKind::kExit);
  EXPECT_TRUE(exit->wrapper);
  EXPECT_EQ(exit_code(exit->wait_status), 3);

  auto signal = parse_report(wrapper_signal_line("SIGTERM"), 4, true, error);
  ASSERT_TRUE(signal) << error;
  EXPECT_EQ(signal->kind, ReportKind::kEvent);
  EXPECT_EQ(signal->event, "stop-signal");
  EXPECT_EQ(signal->signal, "SIGTERM");
  EXPECT_TRUE(signal->wrapper);

  auto whello = parse_report(wrapper_hello_line(1, "n\"2", 9, "12.0"), 4, true, error);
  ASSERT_TRUE(whello) << error;
  EXPECT_EQ(whello->node, "n\"2");
  EXPECT_EQ(whello->step, "12.0");

  auto unknown = parse_report(R"({"type":"from-the-future"})", 0, false, error);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->kind, ReportKind::kOther);
}

TEST(LaunchControl, MalformedLinesAreRefusedWithAReason) {
  std::string error;
  EXPECT_FALSE(parse_report("not json", 0, false, error));
  EXPECT_NE(error.find("not JSON"), std::string::npos) << error;
  EXPECT_FALSE(parse_report("[1,2]", 0, false, error));
  EXPECT_EQ(error, "not a JSON object");
  EXPECT_FALSE(parse_report(R"({"steps":1})", 0, false, error));
  EXPECT_EQ(error, "no \"type\"");
  EXPECT_FALSE(parse_report(R"({"type":"hello"})", 0, false, error));
  EXPECT_FALSE(parse_report(R"({"type":"exit"})", 0, true, error));
  EXPECT_FALSE(parse_report(R"({"type":"event"})", 0, false, error));
}

// The rules of a line's fields (report_parse.cpp reads them without building a document): a
// count is an unsigned integer, a real any number, a text a string, and another kind leaves the
// field unset; a key given twice keeps its last value; containers the launcher does not read,
// however deep, are skipped; node_stats is read only as an object; a scalar's value must be a
// number or one of the non-finite names.
TEST(LaunchControl, FieldsOfTheWrongKindAreUnsetAndTheLastOfTwoKeysCounts) {
  std::string error;
  auto beat = parse_report(
      R"({"type":"heartbeat","steps":-3,"samples":2.5,"rss_bytes":"9","cpu_seconds":7,)"
      R"("wait_seconds":"x","extra":{"steps":99,"a":[1,{"b":2}]},"node":5,"steps":12,)"
      R"("node_stats":{"cpu_usage_ratio":0.5,"memory_used_bytes":-1,"deep":{"x":[1]},)"
      R"("memory_available_bytes":80}})",
      0, false, error);
  ASSERT_TRUE(beat) << error;
  EXPECT_EQ(beat->steps, std::optional<std::uint64_t>(12));  // the second "steps"
  EXPECT_FALSE(beat->samples);
  EXPECT_FALSE(beat->rss_bytes);
  EXPECT_EQ(beat->cpu_seconds, std::optional<double>(7.0));
  EXPECT_FALSE(beat->wait_seconds);
  EXPECT_EQ(beat->node, "");
  ASSERT_TRUE(beat->node_stats);
  EXPECT_EQ(beat->node_stats->cpu_usage_ratio, std::optional<double>(0.5));
  EXPECT_FALSE(beat->node_stats->memory_used_bytes);
  EXPECT_EQ(beat->node_stats->memory_available_bytes, std::optional<std::uint64_t>(80));

  auto listed =
      parse_report(R"({"type":"heartbeat","node_stats":[{"cpu_usage_ratio":1}]})", 0, false, error);
  ASSERT_TRUE(listed) << error;
  EXPECT_FALSE(listed->node_stats);

  auto scalars =
      parse_report(R"({"type":"scalars","step":4,"values":{"loss":0.25,"inf":"+Inf","acc":1}})", 0,
                   false, error);
  ASSERT_TRUE(scalars) << error;
  ASSERT_EQ(scalars->values.size(), 3U);
  EXPECT_EQ(scalars->values[0].first, "acc");  // in name order
  EXPECT_EQ(scalars->values[1].second, std::numeric_limits<double>::infinity());
  EXPECT_FALSE(
      parse_report(R"({"type":"scalars","step":4,"values":{"loss":{"x":1}}})", 0, false, error));
  EXPECT_NE(error.find("scalar \"loss\""), std::string::npos) << error;
  EXPECT_FALSE(parse_report(R"({"type":"scalars","step":4,"values":[1]})", 0, false, error));
  EXPECT_EQ(error, "scalars without \"step\" or \"values\"");
  EXPECT_FALSE(parse_report(R"("heartbeat")", 0, false, error));
  EXPECT_EQ(error, "not a JSON object");
  EXPECT_FALSE(parse_report(R"({"type":"heartbeat"} {})", 0, false, error));
  EXPECT_NE(error.find("not JSON"), std::string::npos) << error;
}

TEST(LaunchControl, LinesAreCutWhereverTheBytesArriveAndAnEndlessOneIsRefused) {
  LineSplitter lines;
  bool ok = false;
  EXPECT_TRUE(lines.feed("{\"a\"", ok).empty());
  EXPECT_TRUE(ok);
  const auto got = lines.feed(":1}\n{}\n{\"b", ok);
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[0], "{\"a\":1}");
  EXPECT_EQ(got[1], "{}");
  lines.feed(std::string(kMaxControlLine + 1, 'x'), ok);
  EXPECT_FALSE(ok);
}

TEST(LaunchControl, TheHungRankIsTheOneWhoseProgressIsOldestOnceItIsPastTheTimeout) {
  const auto now = std::chrono::steady_clock::now();
  std::map<std::uint32_t, std::chrono::steady_clock::time_point> last = {
      {0, now - 3s}, {1, now - 12s}, {2, now - 11s}};
  EXPECT_EQ(hung_rank(last, now, 10s), std::optional<std::uint32_t>(1));
  EXPECT_EQ(hung_rank(last, now, 20s), std::nullopt);
  EXPECT_EQ(hung_rank({}, now, 1s), std::nullopt);
}

TEST(LaunchControl, AStopIsRequeuedForPreemptionOnceAndForTimeLimitsBelowTheCap) {
  StopFacts facts;
  facts.job_state = "RUNNING";
  facts.max_requeues = 2;
  facts.preempted = true;
  facts.requeues_so_far = 5;  // preemption is not the job's fault: always requeued
  StopDecision d = decide_stop(facts);
  EXPECT_EQ(d.reason, StopReason::kPreempted);
  EXPECT_TRUE(d.requeue);
  EXPECT_EQ(d.exit_status, 75);
  EXPECT_EQ(d.event, "preempted");

  facts.preempted = false;
  facts.requeues_so_far = 1;
  d = decide_stop(facts);
  EXPECT_EQ(d.reason, StopReason::kTimeLimit);
  EXPECT_TRUE(d.requeue);
  EXPECT_EQ(d.event, "time-limit");

  facts.requeues_so_far = 2;
  d = decide_stop(facts);
  EXPECT_FALSE(d.requeue);
  EXPECT_EQ(d.exit_status, 1);  // never 75 at the cap: RequeueExit=75 would requeue it
  EXPECT_EQ(d.event, "requeue-cap-reached");

  facts.user_stop = true;
  d = decide_stop(facts);
  EXPECT_EQ(d.reason, StopReason::kUserStop);
  EXPECT_FALSE(d.requeue);
  EXPECT_EQ(d.exit_status, 0);

  // scancel: the ranks, signalled by Slurm, may have saved; the job is COMPLETING, not RUNNING.
  facts.user_stop = false;
  facts.requeues_so_far = 0;
  for (const char* state : {"COMPLETING", "CANCELLED", ""}) {
    facts.job_state = state;
    d = decide_stop(facts);
    EXPECT_EQ(d.reason, StopReason::kCancelled) << state;
    EXPECT_FALSE(d.requeue) << state;
    EXPECT_EQ(d.event, "cancelled");
  }
  facts.job_state = "TIMEOUT";  // past the limit itself: too late to requeue
  d = decide_stop(facts);
  EXPECT_EQ(d.reason, StopReason::kTimeLimit);
  EXPECT_FALSE(d.requeue);
  EXPECT_EQ(d.exit_status, 75);
}

TEST(LaunchControl, ScontrolRecordsKeepValuesWithSpacesAndTellPreemption) {
  const auto record = parse_scontrol_record(
      "JobId=12 JobName=train job JobState=RUNNING Reason=None PreemptTime=2026-12-01T10:00:00 "
      "Command=/home/u/run.sh --fast WorkDir=/home/u/my dir\n");
  EXPECT_EQ(record.at("JobName"), "train job");
  EXPECT_EQ(record.at("Command"), "/home/u/run.sh --fast");
  EXPECT_EQ(record.at("WorkDir"), "/home/u/my dir");
  JobFacts facts = job_facts(record);
  EXPECT_EQ(facts.state, "RUNNING");
  EXPECT_TRUE(facts.preempted);
  EXPECT_FALSE(job_facts(parse_scontrol_record("JobState=RUNNING PreemptTime=None")).preempted);
  EXPECT_FALSE(job_facts(parse_scontrol_record("JobState=RUNNING")).preempted);
}

TEST(LaunchControl, StatusJsonHasEveryRankAndOnlyWhatIsKnownAndReadsBack) {
  JobStatus status;
  status.time = "T";
  status.job = "12";
  status.state = "running";
  status.attempt = 1;
  status.world_size = 2;
  status.checkpoint_step = 30;
  RankStatus a;
  a.rank = 0;
  a.node = "n1";
  a.state = "running";
  a.steps = 40;
  a.step_seconds = 0.25;
  a.straggler = true;
  RankStatus b;
  b.rank = 1;
  b.node = "n\"2";
  b.state = "exited";
  b.ended = "exit status 3";
  status.ranks = {a, b};
  NodeStatus node;
  node.node = "n1";
  node.memory_used_bytes = 1U << 30;
  status.nodes = {node};
  const std::string text = status_json(status);
  EXPECT_EQ(text,
            "{\"time\": \"T\", \"job\": \"12\", \"state\": \"running\", \"allocation\": 0, "
            "\"attempt\": 1, \"restarts\": 0, \"world_size\": 2, \"checkpoint\": \"\", "
            "\"checkpoint_step\": 30, \"straggler_window_seconds\": 0.0, \"ranks\": [\n"
            "  {\"rank\":0,\"node\":\"n1\",\"state\":\"running\",\"steps\":40,"
            "\"step_seconds\":0.25,\"straggler\":true},\n"
            "  {\"rank\":1,\"node\":\"n\\\"2\",\"state\":\"exited\",\"straggler\":false,"
            "\"ended\":\"exit status 3\"}\n"
            "], \"nodes\": [\n"
            "  {\"node\":\"n1\",\"memory_used_bytes\":1073741824}\n"
            "]}\n");
  const JobStatus back = parse_status(text);
  EXPECT_EQ(status_json(back), text);
  // Excluded nodes, once there are any, with their reasons; and the table shows them.
  status.excluded_nodes = {{"n3", "lost: State=DOWN"}, {"n2", "ranks 0 and 2 failed there"}};
  const std::string with = status_json(status);
  EXPECT_NE(with.find("\"excluded_nodes\": [\n  {\"node\":\"n3\",\"reason\":\"lost: State=DOWN\"}"),
            std::string::npos)
      << with;
  const JobStatus excluded = parse_status(with);
  ASSERT_EQ(excluded.excluded_nodes.size(), 2U);
  EXPECT_EQ(excluded.excluded_nodes[1].node, "n2");
  EXPECT_EQ(excluded.excluded_nodes[1].reason, "ranks 0 and 2 failed there");
  const std::string table = status_view(excluded, 0);
  EXPECT_NE(table.find("n2           ranks 0 and 2 failed there"), std::string::npos) << table;
  EXPECT_THROW(parse_status("[1]"), primus::Error);
  EXPECT_THROW(parse_status("{\"state\": "), primus::Error);
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("primus-status-" + std::to_string(::getpid()));
  ASSERT_TRUE(replace_file(file, "{}\n"));
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".previous"));
  EXPECT_EQ(std::filesystem::file_size(file), 3U);
  std::filesystem::remove(file);
  EXPECT_FALSE(replace_file("/proc/no/such/status.json", "{}"));
}

// A file written once (metrics.addr) is replaced by exchanging names with its successor (no
// rename over it, which on ext4 writes the new file out and frees the old one's blocks first):
// the file is always whole, a reader that opened the old one keeps it whole, and nothing is left
// beside it.
TEST(LaunchStatus, ReplacingTheStatusKeepsEveryVersionWholeForItsReaders) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("primus-status-swap-" + std::to_string(::getpid()));
  const auto read_all = [](int fd) {
    std::string text;
    char buffer[256];
    ssize_t n = 0;
    while ((n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()))) > 0)
      text.append(buffer, static_cast<std::size_t>(n));
    return text;
  };
  ASSERT_TRUE(replace_file(file, "first\n"));
  const int old_reader = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(old_reader, 0);
  // A previous version left by a launcher that died.
  { std::ofstream(file.string() + ".previous") << "stale and longer than the rest"; }
  ASSERT_TRUE(replace_file(file, "second version\n"));
  ASSERT_TRUE(replace_file(file, "third\n"));
  EXPECT_EQ(read_all(old_reader), "first\n");  // the reader's file, untouched
  ::close(old_reader);
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "third\n");
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".previous"));
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::remove(file);
}

std::vector<Report> wait_reports(ControlServer& server, std::size_t count) {
  std::vector<Report> got;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (got.size() < count && std::chrono::steady_clock::now() < until) {
    pollfd fd{server.fd(), POLLIN, 0};
    ::poll(&fd, 1, 100);
    for (Report& r : server.take())
      got.push_back(std::move(r));
  }
  return got;
}

TEST(LaunchControl, RanksAndWrappersThatKnowTheSecretReportAndStrangersAreRefused) {
  const std::string secret = os::make_job_secret();
  std::vector<std::string> refusals;
  ControlServer server("127.0.0.1", 0, secret, 4,
                       [&](const std::string& line) { refusals.push_back(line); });
  {
    os::UniqueFd rank = coll::connect_control(server.address(), secret, 2, 5s);
    const std::string hello = "{\"type\":\"hello\",\"attempt\":0,\"node\":\"n1\",\"pid\":1}\n";
    ASSERT_EQ(::write(rank.get(), hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
    os::UniqueFd wrapper =
        coll::connect_control(server.address(), secret, 2 | coll::kControlWrapperBit, 5s);
    const std::string exit = wrapper_exit_line(0);
    ASSERT_EQ(::write(wrapper.get(), exit.data(), exit.size()), static_cast<ssize_t>(exit.size()));
    const auto got = wait_reports(server, 2);
    ASSERT_EQ(got.size(), 2U);
    bool saw_hello = false;
    bool saw_exit = false;
    for (const Report& r : got) {
      EXPECT_EQ(r.rank, 2U);
      if (r.kind == ReportKind::kHello) saw_hello = !r.wrapper;
      if (r.kind == ReportKind::kExit) saw_exit = r.wrapper;
    }
    EXPECT_TRUE(saw_hello && saw_exit);
  }
  // Both closed: each gives a goodbye "disconnected".
  const auto gone = wait_reports(server, 2);
  ASSERT_EQ(gone.size(), 2U);
  EXPECT_EQ(gone[0].reason, "disconnected");

  EXPECT_THROW(coll::connect_control(server.address(), os::make_job_secret(), 1, 3s),
               coll::CollectiveError);
  EXPECT_THROW(coll::connect_control(server.address(), secret, 9, 3s), coll::CollectiveError);
  // A rank of another launch (another address) is refused too.
  ControlServer other("127.0.0.1", 0, secret, 4, nullptr);
  EXPECT_NO_THROW(coll::connect_control(other.address(), secret, 0, 3s));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (refusals.size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  // The stranger gives up at the launcher's proof (it cannot check it); rank 9 is refused.
  ASSERT_GE(refusals.size(), 2U);
  EXPECT_NE(refusals[0].find("handshake failed"), std::string::npos) << refusals[0];
  EXPECT_NE(refusals[1].find("claims rank 9"), std::string::npos) << refusals[1];
}

// A line for a rank goes to the rank's own connection, one for its task wrapper to the
// wrapper's (a rejoin's notice under srun), never the other.
TEST(LaunchControl, ALineForARanksWrapperReachesTheWrapperAndNotTheRank) {
  const std::string secret = os::make_job_secret();
  ControlServer server("127.0.0.1", 0, secret, 4, nullptr);
  os::UniqueFd rank = coll::connect_control(server.address(), secret, 3, 5s);
  os::UniqueFd wrapper =
      coll::connect_control(server.address(), secret, 3 | coll::kControlWrapperBit, 5s);
  const std::string hello = "{\"type\":\"hello\",\"attempt\":0,\"node\":\"n1\",\"pid\":1}\n";
  for (const int fd : {rank.get(), wrapper.get()})
    ASSERT_EQ(::write(fd, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  ASSERT_EQ(wait_reports(server, 2).size(), 2U);  // both adopted
  const auto read_line = [](int fd) {
    std::string text;
    char c = 0;
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, 2000) > 0 && ::read(fd, &c, 1) == 1 && c != '\n')
      text.push_back(c);
    return text;
  };
  EXPECT_TRUE(server.send_to_wrapper(3, "for the wrapper"));
  EXPECT_TRUE(server.send(3, "for the rank"));
  EXPECT_EQ(read_line(wrapper.get()), "for the wrapper");
  EXPECT_EQ(read_line(rank.get()), "for the rank");
  EXPECT_FALSE(server.send_to_wrapper(2, "nobody"));
}

// status.json's and throughput.jsonl's numbers: the shortest digits that read back as the same
// double, a whole number still a float, what JSON cannot hold written as null.
TEST(LaunchControl, JsonNumbersReadBackAsTheSameValues) {
  const auto text = [](double value) {
    std::string out;
    json_text::append_number(out, value);
    return out;
  };
  EXPECT_EQ(text(1.0), "1.0");
  EXPECT_EQ(text(0.25), "0.25");
  EXPECT_EQ(text(-3.0), "-3.0");
  EXPECT_EQ(text(1e20), "1e+20");
  EXPECT_EQ(text(std::nan("")), "null");
  EXPECT_EQ(text(std::numeric_limits<double>::infinity()), "null");
  for (const double value : {0.1, 1.0 / 3.0, 1e-7, 123456.789, 1764683651.123, 5e-324}) {
    const nlohmann::json back = nlohmann::json::parse(text(value));
    ASSERT_TRUE(back.is_number_float()) << text(value);
    EXPECT_EQ(back.get<double>(), value) << text(value);
  }
  const auto six = [](double value) {
    std::string out;
    json_text::append_number(out, json_text::Rounded{value});
    return out;
  };
  EXPECT_EQ(six(0.1234567), "0.123457");
  EXPECT_EQ(six(2.0), "2.0");
  EXPECT_EQ(six(123456789.0), "1.23457e+08");
  EXPECT_EQ(six(std::nan("")), "null");
  std::string out;
  json_text::append_number(out, std::uint64_t{18446744073709551615U});
  EXPECT_EQ(out, "18446744073709551615");
  std::string object;
  {
    json_text::Object o(object);
    o.field("a", std::optional<double>());
    o.field("b", std::optional<std::uint64_t>(7));
    o.field("c", "x\ty");
    o.field("d", false);
  }
  EXPECT_EQ(object, "{\"b\":7,\"c\":\"x\\ty\",\"d\":false}");
}

}  // namespace
}  // namespace primus::launch
