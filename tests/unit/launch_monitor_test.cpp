// The monitor's pure parts: lateness and stragglers, the folding of reports into the status,
// the Prometheus text, the status table, the new control-channel lines.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "control/control_protocol.hpp"
#include "monitor/metrics_server.hpp"
#include "monitor/monitor.hpp"
#include "monitor/prometheus_text.hpp"
#include "monitor/status_view.hpp"
#include "monitor/stragglers.hpp"
#include "slurm/slurm_queries.hpp"

namespace primus::launch {
namespace {

Report heartbeat(std::uint32_t rank, std::uint64_t steps, double wait, double step_seconds,
                 std::uint64_t samples) {
  Report r;
  r.kind = ReportKind::kHeartbeat;
  r.rank = rank;
  r.steps = steps;
  r.wait_seconds = wait;
  r.step_seconds = step_seconds;
  r.samples = samples;
  return r;
}

Report hello(std::uint32_t rank, const std::string& node) {
  Report r;
  r.kind = ReportKind::kHello;
  r.rank = rank;
  r.attempt = 0;
  r.node = node;
  return r;
}

TEST(LaunchMonitor, MedianOfOddAndEvenCounts) {
  EXPECT_FALSE(median_of({}).has_value());
  EXPECT_DOUBLE_EQ(*median_of({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(*median_of({4, 1, 3, 2}), 2.5);
  WindowSeries series;
  series.add(0, 10);
  series.add(5, 1);
  series.add(6, 3);
  series.trim(8, 4);  // drops the value at time 0
  EXPECT_EQ(series.size(), 2U);
  EXPECT_DOUBLE_EQ(*series.median(), 2);
}

// An hour of heartbeats a second: the series keeps at most kMaxSamples of them, spread over the
// window, and their median stays that of all the window's values; once the values stop and the
// old ones leave the window, the series keeps every value again.
TEST(LaunchMonitor, AWindowSeriesKeepsABoundedEvenSampleWithTheWindowsMedian) {
  WindowSeries series;
  std::vector<double> window;
  std::uint32_t x = 2463534242U;
  for (int second = 0; second < 7200; ++second) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const double value = 0.25 + 0.5 * (x % 100000) / 100000.0;  // even over [0.25, 0.75)
    series.add(second, value);
    series.trim(second, 3600);
    if (second >= 7200 - 3601) window.push_back(value);
    ASSERT_LE(series.size(), WindowSeries::kMaxSamples) << "at " << second << " s";
  }
  EXPECT_GE(series.size(), WindowSeries::kMaxSamples / 2);
  EXPECT_GT(series.stride(), 16U);
  EXPECT_NEAR(*series.median(), *median_of(window), 0.05);
  series.trim(7200 + 3600, 3600);  // nothing added for an hour: all old
  EXPECT_EQ(series.size(), 0U);
  for (int beat = 0; beat < 6 && series.stride() > 1; ++beat)
    series.trim(7200 + 3600 + beat, 3600);  // the stride halves at each trim while few are kept
  EXPECT_EQ(series.stride(), 1U);
  for (int beat = 1; beat <= 3; ++beat)
    series.add(10800 + beat, beat);
  EXPECT_EQ(series.size(), 3U);
  EXPECT_DOUBLE_EQ(*series.median(), 2);
}

// In a window of 160 s the lateness is judged every 10 s: a rank that turns late is flagged at
// the first evaluation 10 s after the last, not at the refreshes between.
TEST(LaunchMonitor, StragglersAreJudgedEverySixteenthOfTheWindow) {
  Monitor monitor("77", 1, 160);
  monitor.start_attempt(0, 4);
  monitor.set_state("running");
  for (std::uint32_t r = 0; r < 4; ++r)
    monitor.on_report(hello(r, "n1"), 0, 1000);
  std::vector<double> flagged_at;
  for (int beat = 1; beat <= 25; ++beat) {
    const double t = beat;
    for (std::uint32_t r = 0; r < 4; ++r) {
      const double wait = r == 3 && beat >= 2 ? 0.001 : 0.2;
      monitor.on_report(heartbeat(r, beat * 4, wait, 0.3, static_cast<std::uint64_t>(beat) * 32), t,
                        1000 + t);
    }
    if (!monitor.evaluate(t).empty()) flagged_at.push_back(t);
  }
  // Judged at 1 s (too few samples), then at 11 s (flagged), then at 21 s (no change).
  EXPECT_EQ(flagged_at, std::vector<double>{11});
}

TEST(LaunchMonitor, TheRankThatWaitsLeastByMoreThanHalfAStepIsTheStraggler) {
  std::map<std::uint32_t, RankTiming> ranks;
  for (std::uint32_t r = 0; r < 8; ++r)
    ranks[r] = {0.30, 0.40, 5};
  ranks[5] = {0.01, 0.40, 5};  // arrives last, waits least
  LatenessVerdict verdict = judge_lateness(ranks, 3);
  EXPECT_EQ(verdict.stragglers, std::set<std::uint32_t>{5});
  EXPECT_NEAR(verdict.lateness[5], 0.29, 1e-9);
  EXPECT_NEAR(verdict.lateness[0], 0.0, 1e-9);
  EXPECT_DOUBLE_EQ(*verdict.median_step_seconds, 0.40);

  ranks[5] = {0.15, 0.40, 5};  // late by 0.15 s of a 0.40 s step: under half a step
  EXPECT_TRUE(judge_lateness(ranks, 3).stragglers.empty());

  ranks[5] = {0.01, 0.40, 2};  // too few samples in the window to judge
  verdict = judge_lateness(ranks, 3);
  EXPECT_TRUE(verdict.stragglers.empty());
  EXPECT_EQ(verdict.lateness.count(5), 0U);
}

TEST(LaunchMonitor, ALoneRankIsNeverLate) {
  const std::map<std::uint32_t, RankTiming> ranks = {{0, {0.0, 1.0, 10}}};
  EXPECT_TRUE(judge_lateness(ranks, 3).stragglers.empty());
  EXPECT_TRUE(judge_lateness(ranks, 3).lateness.empty());
}

TEST(LaunchMonitor, HeartbeatsBecomeRatesLatenessAndAFlagThatOutlivesTheRank) {
  Monitor monitor("77", 1, 60);
  monitor.start_attempt(0, 4);
  monitor.set_state("running");
  for (std::uint32_t r = 0; r < 4; ++r)
    monitor.on_report(hello(r, "n" + std::to_string(r / 2 + 1)), 0, 1000);
  std::vector<StragglerChange> flagged;
  for (int beat = 1; beat <= 5; ++beat) {
    const double t = beat;
    for (std::uint32_t r = 0; r < 4; ++r) {
      monitor.on_report(
          heartbeat(r, beat * 4, r == 3 ? 0.001 : 0.2, 0.3, static_cast<std::uint64_t>(beat) * 32),
          t, 1000 + t);
    }
    const auto changes = monitor.evaluate(t);
    flagged.insert(flagged.end(), changes.begin(), changes.end());
  }
  ASSERT_EQ(flagged.size(), 1U);
  EXPECT_EQ(flagged[0].rank, 3U);
  EXPECT_EQ(flagged[0].node, "n2");
  EXPECT_TRUE(flagged[0].straggler);
  JobStatus status = monitor.snapshot(5.5, 1005.5, "T");
  EXPECT_EQ(status.world_size, 4U);
  EXPECT_EQ(status.allocation, 1U);
  ASSERT_EQ(status.ranks.size(), 4U);
  EXPECT_DOUBLE_EQ(*status.ranks[0].samples_per_second, 32);
  EXPECT_DOUBLE_EQ(*status.samples_per_second, 128);
  EXPECT_EQ(*status.ranks[2].steps, 20U);
  EXPECT_TRUE(status.ranks[3].straggler);
  EXPECT_FALSE(status.ranks[2].straggler);
  EXPECT_NEAR(*status.ranks[3].lateness_seconds, 0.199, 1e-9);
  EXPECT_NEAR(*status.ranks[3].seconds_since_report, 0.5, 1e-9);

  // The ranks end: the flag stays in the final status, and nothing is cleared.
  for (std::uint32_t r = 0; r < 4; ++r)
    monitor.rank_ended(r, "exit status 0");
  EXPECT_TRUE(monitor.evaluate(200).empty());
  status = monitor.snapshot(200, 1200, "T");
  EXPECT_TRUE(status.ranks[3].straggler);
  EXPECT_EQ(status.ranks[3].state, "exited");

  // A new attempt starts every rank again.
  monitor.start_attempt(1, 2);
  status = monitor.snapshot(201, 1201, "T");
  EXPECT_EQ(status.ranks.size(), 2U);
  EXPECT_EQ(status.restarts, 1U);
  EXPECT_FALSE(status.ranks[1].straggler);
}

TEST(LaunchMonitor, NodeStatsGiveNetworkRatesFromTheirTotals) {
  Monitor monitor("1", 0, 60);
  monitor.start_attempt(0, 1);
  monitor.on_report(hello(0, "n1"), 0, 0);
  Report r = heartbeat(0, 1, 0, 0.1, 8);
  NodeReport node;
  node.network_receive_bytes_total = 1000;
  node.network_transmit_bytes_total = 500;
  node.memory_used_bytes = 7;
  r.node_stats = node;
  monitor.on_report(r, 10, 10);
  node.network_receive_bytes_total = 5000;
  node.network_transmit_bytes_total = 700;
  r.node_stats = node;
  monitor.on_report(r, 12, 12);
  const JobStatus status = monitor.snapshot(12, 12, "T");
  ASSERT_EQ(status.nodes.size(), 1U);
  EXPECT_EQ(status.nodes[0].node, "n1");
  EXPECT_DOUBLE_EQ(*status.nodes[0].network_receive_bytes_per_second, 2000);
  EXPECT_DOUBLE_EQ(*status.nodes[0].network_transmit_bytes_per_second, 100);
  EXPECT_EQ(*status.nodes[0].network_receive_bytes_total, 5000U);
  EXPECT_EQ(*status.nodes[0].memory_used_bytes, 7U);
}

TEST(LaunchMonitor, ACommittedCheckpointIsTheJobsAndTimedByTheLauncher) {
  Monitor monitor("1", 0, 60);
  monitor.start_attempt(0, 2);
  Report r;
  r.kind = ReportKind::kEvent;
  r.event = "checkpoint-committed";
  r.rank = 0;
  r.steps = 100;
  r.path = "/ckpt/step-100";
  monitor.on_report(r, 5, 1000);
  const JobStatus status = monitor.snapshot(6, 1030, "T");
  EXPECT_EQ(status.checkpoint, "/ckpt/step-100");
  EXPECT_EQ(*status.checkpoint_step, 100U);
  EXPECT_DOUBLE_EQ(*status.seconds_since_checkpoint, 30);
  EXPECT_EQ(*status.ranks[0].last_checkpoint_step, 100U);
}

TEST(LaunchMonitor, ScalarsLinesParseAndBadOnesAreRefused) {
  std::string error;
  auto r = parse_report(
      R"({"type": "scalars", "step": 12, "time": 5.5, "values": {"loss": 0.25, "acc": "NaN", "g": "-Inf"}})",
      0, false, error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->kind, ReportKind::kScalars);
  EXPECT_EQ(*r->steps, 12U);
  ASSERT_EQ(r->values.size(), 3U);  // by name
  EXPECT_EQ(r->values[0].first, "acc");
  EXPECT_TRUE(std::isnan(r->values[0].second));
  EXPECT_EQ(r->values[1].first, "g");
  EXPECT_TRUE(std::isinf(r->values[1].second) && r->values[1].second < 0);
  EXPECT_EQ(r->values[2].first, "loss");
  EXPECT_DOUBLE_EQ(r->values[2].second, 0.25);
  EXPECT_FALSE(parse_report(R"({"type": "scalars", "step": 1, "values": {"bad-name": 1}})", 0,
                            false, error));
  EXPECT_NE(error.find("bad-name"), std::string::npos);
  EXPECT_FALSE(
      parse_report(R"({"type": "scalars", "step": 1, "values": {"x": "many"}})", 0, false, error));
  EXPECT_FALSE(parse_report(R"({"type": "scalars", "values": {"x": 1}})", 0, false, error));
  EXPECT_FALSE(parse_report(R"({"type": "scalars", "step": 1, "values": {}})", 0, false, error));
}

TEST(LaunchMonitor, HeartbeatsCarryTheMonitorsFields) {
  std::string error;
  const auto r = parse_report(
      R"({"type": "heartbeat", "steps": 9, "samples": 72, "wait_seconds": 0.5, "last_step_time": 1.5e9,
          "gpu_memory_bytes": 1024, "gpu_utilization_ratio": 0.5,
          "node_stats": {"cpu_usage_ratio": 0.25, "memory_used_bytes": 10, "network_receive_bytes_total": 3}})",
      2, false, error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(*r->samples, 72U);
  EXPECT_DOUBLE_EQ(*r->wait_seconds, 0.5);
  EXPECT_DOUBLE_EQ(*r->last_step_time, 1.5e9);
  EXPECT_EQ(*r->gpu_memory_bytes, 1024U);
  ASSERT_TRUE(r->node_stats);
  EXPECT_DOUBLE_EQ(*r->node_stats->cpu_usage_ratio, 0.25);
  EXPECT_EQ(*r->node_stats->network_receive_bytes_total, 3U);
  EXPECT_FALSE(r->node_stats->network_transmit_bytes_total);
}

TEST(LaunchMonitor, PrometheusTextHasEveryFamilyOnceWithLabels) {
  JobStatus status;
  status.job = "12";
  status.state = "running";
  status.allocation = 2;
  status.restarts = 3;
  status.checkpoint_time = 1700000000.5;
  RankStatus rank;
  rank.rank = 1;
  rank.node = "n\"1";
  rank.state = "running";
  rank.steps = 40;
  rank.samples = 320;
  rank.rss_bytes = 1000;
  rank.lateness_seconds = 0.125;
  rank.last_step_time = 1700000001;
  rank.samples_per_second = 0.1;  // the shortest text that reads back, not 0.10000000000000001
  status.ranks = {rank};
  NodeStatus node;
  node.node = "n1";
  node.cpu_usage_ratio = 0.5;
  node.network_receive_bytes_total = 9;
  status.nodes = {node};
  const std::string text =
      prometheus_text(status, {{1, "n\"1", "loss", 0.75, 40}, {1, "n\"1", "acc", NAN, 40}});
  const std::string labels = "{job=\"12\",rank=\"1\",node=\"n\\\"1\"}";
  EXPECT_NE(text.find("primus_steps_total" + labels + " 40\n"), std::string::npos) << text;
  EXPECT_NE(text.find("primus_samples_total" + labels + " 320\n"), std::string::npos);
  EXPECT_NE(text.find("primus_rank_resident_memory_bytes" + labels + " 1000\n"), std::string::npos);
  EXPECT_NE(text.find("primus_rank_lateness_seconds" + labels + " 0.125\n"), std::string::npos);
  EXPECT_NE(text.find("primus_rank_samples_per_second" + labels + " 0.1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("primus_last_step_timestamp_seconds" + labels + " 1700000001\n"),
            std::string::npos);
  EXPECT_NE(text.find("primus_user_loss" + labels + " 0.75\n"), std::string::npos);
  EXPECT_NE(text.find("primus_user_acc" + labels + " NaN\n"), std::string::npos);
  EXPECT_NE(text.find("primus_requeues_total{job=\"12\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("primus_restarts_total{job=\"12\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("primus_last_checkpoint_timestamp_seconds{job=\"12\"} 1700000000.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("primus_node_cpu_usage_ratio{job=\"12\",node=\"n1\"} 0.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("primus_node_network_receive_bytes_total{job=\"12\",node=\"n1\"} 9\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE primus_steps_total counter\n"), std::string::npos);
  // Families with no sample are left out; every family has one TYPE line.
  EXPECT_EQ(text.find("primus_rank_gpu_utilization_ratio"), std::string::npos);
  std::size_t types = 0;
  for (std::size_t at = 0; (at = text.find("# TYPE primus_steps_total ", at)) != std::string::npos;
       ++at) {
    ++types;
  }
  EXPECT_EQ(types, 1U);
  EXPECT_EQ(prometheus_label_value("a\\b\nc"), "a\\\\b\\nc");
}

TEST(LaunchMonitor, TheStatusTableNamesRanksNodesAndStragglers) {
  JobStatus status;
  status.job = "12";
  status.state = "running";
  status.world_size = 2;
  status.time = "2026-12-02T10:00:00.000Z";
  status.checkpoint = "/c/step-10";
  status.checkpoint_step = 10;
  status.checkpoint_time = 970;
  for (std::uint32_t r = 0; r < 2; ++r) {
    RankStatus rank;
    rank.rank = r;
    rank.node = "n" + std::to_string(r + 1);
    rank.state = "running";
    rank.steps = 50 + r;
    rank.last_step_time = 995;
    rank.straggler = r == 1;
    rank.lateness_seconds = r == 1 ? 0.5 : 0.0;
    status.ranks.push_back(rank);
  }
  NodeStatus node;
  node.node = "n1";
  node.memory_used_bytes = 2500000000;
  status.nodes = {node};
  const std::string view = status_view(status, 1000);
  EXPECT_NE(view.find("job 12: running"), std::string::npos) << view;
  EXPECT_NE(view.find("newest checkpoint: step 10, 30.0s ago: /c/step-10"), std::string::npos)
      << view;
  EXPECT_NE(view.find("stragglers: rank 1 on n2 (0.500 s late)"), std::string::npos) << view;
  EXPECT_NE(view.find("5.0s ago"), std::string::npos) << view;
  EXPECT_NE(view.find("2.50"), std::string::npos) << view;  // GB used on n1
  EXPECT_NE(view.find("yes"), std::string::npos) << view;
}

// status.json's recovery: written only once there was one, read back field by field, and shown
// by `primus-launch status` with its phases.
TEST(LaunchMonitor, TheNewestRejoinsPhasesGoIntoTheStatusAndBack) {
  Monitor monitor("12", 0, 60);
  monitor.start_attempt(0, 4);
  const JobStatus before = monitor.snapshot(1, 1000, "t");
  EXPECT_EQ(status_json(before).find("recovery"), std::string::npos);
  EXPECT_FALSE(parse_status(status_json(before)).recovery);
  RecoveryStatus r;
  r.state = "done";
  r.rank = 2;
  r.generation = 1;
  r.failure_time = 990.5;
  r.detect_seconds = 4.25;
  r.tear_down_seconds = 0.001;
  r.place_seconds = 0.03;
  r.regroup_seconds = 0.09;
  r.restore_seconds = 0.02;
  r.rejoin_seconds = 0.121;
  r.first_step_seconds = 0.05;
  r.recovery_seconds = 0.171;
  r.replacement = "standby";
  monitor.set_recovery(r);
  const std::string text = status_json(monitor.snapshot(2, 1000, "t"));
  const JobStatus back = parse_status(text);
  ASSERT_TRUE(back.recovery) << text;
  EXPECT_EQ(back.recovery->path, "rejoin");
  EXPECT_EQ(back.recovery->state, "done");
  EXPECT_EQ(back.recovery->rank, 2U);
  EXPECT_EQ(back.recovery->generation, 1U);
  EXPECT_DOUBLE_EQ(back.recovery->failure_time, 990.5);
  EXPECT_DOUBLE_EQ(back.recovery->regroup_seconds.value_or(0), 0.09);
  EXPECT_DOUBLE_EQ(back.recovery->detect_seconds.value_or(0), 4.25);
  EXPECT_DOUBLE_EQ(back.recovery->recovery_seconds.value_or(0), 0.171);
  EXPECT_EQ(back.recovery->replacement, "standby");
  EXPECT_EQ(back.recovery->reason, "");
  const std::string view = status_view(back, 1000);
  EXPECT_NE(view.find("recovery: rejoin of rank 2 (generation 1), done; detect 4.250 s, "
                      "tear down 0.001 s, "
                      "place 0.030 s, regroup 0.090 s, restore 0.020 s, first step 0.050 s, "
                      "in all 0.171 s; the replacement was the standby; the failure 9.5s ago"),
            std::string::npos)
      << view;
  r.state = "failed";
  r.reason = "rank 1 failed too";
  monitor.set_recovery(r);
  const JobStatus failed = parse_status(status_json(monitor.snapshot(3, 1000, "t")));
  ASSERT_TRUE(failed.recovery);
  EXPECT_EQ(failed.recovery->reason, "rank 1 failed too");
  EXPECT_NE(status_view(failed, 1000).find("failed: rank 1 failed too"), std::string::npos);
}

TEST(LaunchMonitor, ListenAddressesDefaultToLoopback) {
  auto where = parse_listen_address("9100");
  ASSERT_TRUE(where);
  EXPECT_EQ(where->host, "127.0.0.1");
  EXPECT_EQ(where->port, 9100);
  where = parse_listen_address("0.0.0.0:0");
  ASSERT_TRUE(where);
  EXPECT_EQ(where->host, "0.0.0.0");
  EXPECT_EQ(where->port, 0);
  EXPECT_FALSE(parse_listen_address("host:"));
  EXPECT_FALSE(parse_listen_address(":80"));
  EXPECT_FALSE(parse_listen_address("70000"));
}

TEST(LaunchMonitor, TheSitesSettingsComeFromThePrimusPluginsPlugstackLine) {
  EXPECT_EQ(primus_plugstack_arguments("# none\nrequired /x/other.so a=1\n"
                                       "optional /usr/lib/slurm/primus.so  metrics_sd_dir=/sd "
                                       "port_range=1-2 # comment\n"),
            (std::vector<std::string>{"metrics_sd_dir=/sd", "port_range=1-2"}));
  EXPECT_TRUE(primus_plugstack_arguments("required /x/notprimus.so a=1\n").empty());
  EXPECT_TRUE(primus_plugstack_arguments("include /etc/slurm/plugstack.conf.d/*\n").empty());
}

TEST(LaunchMonitor, TheJobDirectoryGoesIntoTheCommentAndComesBack) {
  EXPECT_EQ(job_dir_comment("/scratch/ada/run 1"), "primus-job-dir=/scratch/ada/run 1");
  EXPECT_EQ(job_dir_from_comment(job_dir_comment("/scratch/ada/run 1")), "/scratch/ada/run 1");
  EXPECT_FALSE(job_dir_from_comment("my own note"));
  EXPECT_FALSE(job_dir_from_comment("primus-job-dir="));
  const JobFacts facts =
      job_facts(parse_scontrol_record("JobId=3 JobState=RUNNING Comment=primus-job-dir=/a b"));
  EXPECT_EQ(facts.comment, "primus-job-dir=/a b");
  EXPECT_EQ(job_facts(parse_scontrol_record("JobId=3 Comment=(null)")).comment, "");
}

}  // namespace
}  // namespace primus::launch

namespace primus::launch {
namespace {

TEST(LaunchMonitorProgress, ARankIsStartingUntilItsFirstHeartbeat) {
  Monitor monitor("77", 0, 60);
  monitor.start_attempt(0, 2);
  monitor.set_state("running");
  monitor.on_report(hello(0, "n1"), 0, 1000);
  monitor.on_report(hello(1, "n1"), 0, 1000);
  JobStatus status = monitor.snapshot(1, 1001, "T");
  EXPECT_EQ(status.ranks[0].state, "starting");
  EXPECT_NE(status_view(status, 1001).find("    0  n1           starting         -"),
            std::string::npos)
      << status_view(status, 1001);
  monitor.on_report(heartbeat(0, 3, 0.1, 0.2, 96), 5, 1005);
  status = monitor.snapshot(5, 1005, "T");
  EXPECT_EQ(status.ranks[0].state, "running");
  EXPECT_EQ(status.ranks[1].state, "starting");
}

TEST(LaunchMonitorProgress, TheJobsStepIsTheSlowestRanksWithTheRunsTotalAndRankZerosLoss) {
  Monitor monitor("77", 0, 60);
  monitor.start_attempt(0, 2);
  EXPECT_FALSE(monitor.progress().step);
  for (std::uint32_t r = 0; r < 2; ++r) {
    // Resumed at step 300: a rank counts its steps from there (checkpoint.load()).
    Report beat = heartbeat(r, r == 0 ? 312 : 310, 0.1, 0.2, 320);
    beat.total_steps = 1000;
    monitor.on_report(beat, 1, 1001);
  }
  Report loss;
  loss.kind = ReportKind::kScalars;
  loss.rank = 0;
  loss.steps = 312;
  loss.values = {{"loss", 0.41234}};
  monitor.on_report(loss, 1, 1001);
  Monitor::Progress progress = monitor.progress();
  EXPECT_EQ(progress.step, std::optional<std::uint64_t>(310));
  EXPECT_EQ(progress.total_steps, std::optional<std::uint64_t>(1000));
  EXPECT_EQ(progress.loss, std::optional<double>(0.41234));
  // Heartbeats an interval old: a step committed since, which every rank reached, is newer.
  Report committed;
  committed.kind = ReportKind::kEvent;
  committed.rank = 0;
  committed.event = "checkpoint-committed";
  committed.steps = 320;
  committed.path = "/ckpt/step-000000000320";
  monitor.on_report(committed, 2, 1002);
  EXPECT_EQ(monitor.progress().step, std::optional<std::uint64_t>(320));
  // A loop without a plan: its steps alone, and no total.
  Monitor plain("78", 0, 60);
  plain.start_attempt(0, 1);
  plain.on_report(heartbeat(0, 7, 0.1, 0.2, 70), 1, 1001);
  progress = plain.progress();
  EXPECT_EQ(progress.step, std::optional<std::uint64_t>(7));
  EXPECT_FALSE(progress.total_steps);
  EXPECT_FALSE(progress.loss);
}

TEST(LaunchMonitorProgress, TheLineSaysTheStepOfTheTotalTheLossAndTheTimeLeft) {
  ProgressFacts facts;
  facts.clock = "12:03:04";
  EXPECT_EQ(progress_text(facts), "12:03:04 step -, no checkpoint yet");
  facts.step = 300;
  facts.total_steps = 1000;
  facts.loss = 0.412345;
  facts.samples_per_second = 2310;
  facts.seconds_left = 312;
  facts.seconds_since_checkpoint = 20;
  facts.checkpoint_step = 300;
  facts.stragglers = 1;
  EXPECT_EQ(progress_text(facts),
            "12:03:04 step 300/1000, loss 0.4123, 2310.0 samples/s, 5m12s left, checkpoint 20 s "
            "ago (step 300), 1 straggler(s)");
  EXPECT_EQ(duration_text(0), "0s");
  EXPECT_EQ(duration_text(59.4), "59s");
  EXPECT_EQ(duration_text(60), "1m00s");
  EXPECT_EQ(duration_text(3725), "1h02m");
  EXPECT_EQ(duration_text(-5), "0s");
}

}  // namespace
}  // namespace primus::launch
