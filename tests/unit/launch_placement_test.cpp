// Where primus-launch places the ranks under Slurm and which nodes it takes for lost (pure), and
// the exclusions' lines in the job directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "slurm/node_exclusions.hpp"
#include "slurm/placement.hpp"
#include "slurm/slurm_queries.hpp"

namespace primus::launch {
namespace {

const std::vector<std::string> kFour = {"n1", "n2", "n3", "n4"};

TEST(LaunchPlacement, SparesLeaveTheLastNodesIdleAndReplaceALostOne) {
  NodePolicy spares{1, std::nullopt, std::nullopt};
  std::string why;
  const auto first = place(kFour, {}, 3, 2, spares, 0, why);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(first->world_size, 6U);
  EXPECT_FALSE(first->shrunk);
  // n3 lost: the spare takes its place, same world size.
  const auto again = place({"n1", "n2", "n4"}, {"n3"}, 3, 2, spares, 0, why);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->nodes, (std::vector<std::string>{"n1", "n2", "n4"}));
  EXPECT_EQ(again->world_size, 6U);
  // Excluded but still held by the job (a node where ranks failed): skipped too.
  const auto skipped = place(kFour, {"n2"}, 3, 2, spares, 0, why);
  ASSERT_TRUE(skipped);
  EXPECT_EQ(skipped->nodes, (std::vector<std::string>{"n1", "n3", "n4"}));
  // No spare left: no placement, and the reason names the nodes and the way out.
  EXPECT_FALSE(place({"n1", "n2", "n4"}, {"n2"}, 3, 2, spares, 0, why));
  EXPECT_NE(why.find("need 3 nodes"), std::string::npos) << why;
  EXPECT_NE(why.find("n1,n4"), std::string::npos) << why;
  EXPECT_NE(why.find("--primus-elastic"), std::string::npos) << why;
}

TEST(LaunchPlacement, ARotationPutsOtherRanksOnEachNodeWhereSparesAreLeft) {
  NodePolicy spares{1, std::nullopt, std::nullopt};
  std::string why;
  // n1..n3, ranks on two: rotation 0 puts ranks 2-3 on n2, rotation 1 ranks 0-1.
  const std::vector<std::string> three = {"n1", "n2", "n3"};
  EXPECT_EQ(place(three, {}, 2, 2, spares, 0, why)->nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(place(three, {}, 2, 2, spares, 1, why)->nodes, (std::vector<std::string>{"n2", "n3"}));
  // The window wraps and comes back in Slurm's order.
  EXPECT_EQ(place(three, {}, 2, 2, spares, 2, why)->nodes, (std::vector<std::string>{"n1", "n3"}));
  EXPECT_EQ(place(three, {}, 2, 2, spares, 3, why)->nodes, (std::vector<std::string>{"n1", "n2"}));
  // With no node to spare, every rotation is the whole set.
  EXPECT_EQ(place(three, {"n2"}, 2, 2, spares, 1, why)->nodes,
            (std::vector<std::string>{"n1", "n3"}));
}

TEST(LaunchPlacement, ElasticShrinksToTheLargestCountWhoseRanksDivideTheGlobalBatch) {
  NodePolicy elastic{0, 2, 24};
  std::string why;
  // 3 of 4 nodes left, 2 ranks each: 6 ranks divide 24.
  auto p = place({"n1", "n2", "n4"}, {"n3"}, 4, 2, elastic, 0, why);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->shrunk);
  EXPECT_EQ(p->world_size, 6U);
  EXPECT_EQ(p->nodes, (std::vector<std::string>{"n1", "n2", "n4"}));
  // A batch of 16: 6 does not divide it, 4 does: 2 nodes, and the note says why.
  elastic.global_batch = 16;
  p = place({"n1", "n2", "n4"}, {}, 4, 2, elastic, 0, why);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->world_size, 4U);
  EXPECT_EQ(p->nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_NE(p->note.find("divides the global batch of 16"), std::string::npos) << p->note;
  // Below the minimum: none.
  EXPECT_FALSE(place({"n1"}, {}, 4, 2, elastic, 0, why));
  EXPECT_NE(why.find("at least 2 nodes"), std::string::npos) << why;
  // A batch no usable count divides: none, and the reason says so.
  elastic.global_batch = 9;
  EXPECT_FALSE(place({"n1", "n2", "n4"}, {}, 4, 2, elastic, 0, why));
  EXPECT_NE(why.find("divides the global batch of 9"), std::string::npos) << why;
  // Without a global batch any count from the minimum up will do.
  elastic.global_batch.reset();
  p = place({"n1", "n2", "n4"}, {}, 4, 2, elastic, 0, why);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->world_size, 6U);
  // Spares are used first: with both, a node lost while a spare is left keeps the size.
  NodePolicy both{1, 2, 24};
  p = place({"n1", "n2", "n4"}, {"n3"}, 2, 2, both, 0, why);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->shrunk);
  EXPECT_EQ(p->world_size, 4U);
}

TEST(LaunchPlacement, ANodeIsLostWhenSlurmctldSaysDownFailNotRespondingOrDroppedIt) {
  EXPECT_FALSE(judge_node({{"State", "ALLOCATED"}}, true).lost);
  EXPECT_FALSE(judge_node({{"State", "MIXED+DRAIN"}}, true).lost);  // draining: still running
  const NodeVerdict down =
      judge_node({{"State", "DOWN+NOT_RESPONDING"}, {"Reason", "lost"}}, false);
  EXPECT_TRUE(down.lost);
  EXPECT_EQ(down.reason, "State=DOWN+NOT_RESPONDING Reason=lost");
  EXPECT_TRUE(judge_node({{"State", "IDLE*"}}, true).lost);
  EXPECT_TRUE(judge_node({{"State", "ALLOCATED+NOT_RESPONDING"}}, true).lost);
  EXPECT_TRUE(judge_node({{"State", "MIXED+FAIL"}}, true).lost);
  const NodeVerdict dropped = judge_node({{"State", "IDLE"}}, false);
  EXPECT_TRUE(dropped.lost);
  EXPECT_NE(dropped.reason.find("removed it from the job"), std::string::npos);
}

TEST(LaunchPlacement, SuspectsAreTheNodesWithRanksWhoseWrappersNeverReported) {
  const std::vector<std::string> step = {"n1", "n2", "n3"};
  const std::map<std::uint32_t, std::string> where = {{0, "n1"}, {1, "n1"}, {2, "n2"},
                                                      {3, "n2"}, {4, "n3"}, {5, "n3"}};
  EXPECT_EQ(suspect_nodes(step, 2, where, {0, 1, 2, 3}), (std::set<std::string>{"n3"}));
  EXPECT_EQ(suspect_nodes(step, 2, where, {0, 1, 2, 3, 4, 5}), std::set<std::string>{});
  // A node none of whose wrappers even said hello is a suspect too.
  EXPECT_EQ(suspect_nodes(step, 2, {{0, "n1"}, {1, "n1"}}, {0, 1}),
            (std::set<std::string>{"n2", "n3"}));
}

TEST(LaunchPlacement, ANodeIsExcludedOnceTwoDifferentRanksFailedThereOnTheirOwn) {
  RankFailures failures(2);
  const std::map<std::uint32_t, std::string> first = {{0, "n1"}, {1, "n1"}, {2, "n2"}, {3, "n2"}};
  // Rank 2 fails on n2; rank 3 there ended only because the launcher stopped it: one rank.
  EXPECT_TRUE(failures.add({{2, 3 << 8, false}, {3, 15, true}, {0, 15, true}}, first, 75).empty());
  // The same rank failing again on n2 (its own bug, say) is still one rank.
  EXPECT_TRUE(failures.add({{2, 3 << 8, false}}, first, 75).empty());
  // Rotated: rank 0 now on n2 fails there too: two different ranks.
  const std::map<std::uint32_t, std::string> rotated = {{0, "n2"}, {1, "n2"}, {2, "n3"}};
  const auto reached = failures.add({{0, 3 << 8, false}}, rotated, 75);
  ASSERT_EQ(reached.size(), 1U);
  EXPECT_EQ(reached.at("n2"), "ranks 0 and 2 failed there");
  // Reported once; a stop (75) or a clean end never counts.
  EXPECT_TRUE(failures.add({{1, 3 << 8, false}}, rotated, 75).empty());
  EXPECT_TRUE(failures.add({{2, 75 << 8, false}, {0, 0, false}}, first, 75).empty());
  RankFailures once(1);
  EXPECT_EQ(once.add({{2, 9, false}}, first, 75).at("n2"), "rank 2 failed there");
}

TEST(LaunchPlacement, HardwareErrorsAreToldFromTheProgramsOwn) {
  EXPECT_TRUE(hardware_error("RuntimeError: CUDA error: uncorrectable ECC error encountered"));
  EXPECT_TRUE(hardware_error("RuntimeError: NCCL error: unhandled system error, NCCL version"));
  EXPECT_TRUE(hardware_error("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus"));
  EXPECT_FALSE(hardware_error("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_FALSE(hardware_error("ValueError: Xidian is a city"));
  EXPECT_FALSE(hardware_error("KeyError: 'model'"));
}

TEST(LaunchPlacement, SlurmctldFactsForNodeLoss) {
  EXPECT_EQ(
      slurmd_timeout("SlurmctldTimeout        = 120 sec\nSlurmdTimeout           = 300 sec\n"),
      std::chrono::seconds(300));
  EXPECT_FALSE(slurmd_timeout("SlurmctldTimeout = 120 sec\n"));
  const JobFacts job = job_facts(parse_scontrol_record(
      "JobId=7 JobName=x JobState=RUNNING NodeList=n[1-2,4] NumNodes=3 NumTasks=6"));
  EXPECT_EQ(job.node_list, "n[1-2,4]");
  EXPECT_EQ(job.excluded, "");
  EXPECT_EQ(job_facts(parse_scontrol_record("JobId=7 ExcNodeList=n2 NodeList=(null)")).excluded,
            "n2");
  // A requeue that keeps nodes out: the job's own ExcNodeList and ours, once each, compressed.
  EXPECT_EQ(merged_exclusions("n[1-2]", {"n4", "n2"}), "n[1-2,4]");
  EXPECT_EQ(merged_exclusions("", {"n3"}), "n3");
  EXPECT_EQ(merged_exclusions("gpu[01-02]", {"n3"}), "gpu[01-02],n3");
}

TEST(LaunchPlacement, ExclusionsKeepTheFirstReasonOfEachNodeAndAreNeverTorn) {
  char dir[] = "/tmp/primus-exclusions-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::filesystem::path file = std::filesystem::path(dir) / "excluded-nodes.json";
  const NodeExclusions exclusions(file);
  EXPECT_TRUE(exclusions.nodes().empty());
  ASSERT_TRUE(exclusions.add({"n3", "lost: State=DOWN", "2026-12-03T18:00:00.000Z", 0, 0}));
  ASSERT_TRUE(exclusions.add({"n2", "ranks 2 and 5 failed there", "t", 1, 2}));
  ASSERT_TRUE(exclusions.add({"n3", "again", "t", 1, 3}));
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".tmp"));
  const auto all = exclusions.load();
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0].node, "n3");
  EXPECT_EQ(all[0].reason, "lost: State=DOWN");
  EXPECT_EQ(all[1].node, "n2");
  EXPECT_EQ(all[1].allocation, 1U);
  EXPECT_EQ(all[1].attempt, 2U);
  EXPECT_EQ(exclusions.nodes(), (std::set<std::string>{"n2", "n3"}));
  // What another tool reads: the document itself.
  const auto parsed = parse_exclusions_document(exclusions_document(all));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->size(), 2U);
  EXPECT_FALSE(parse_exclusions_document("[]"));
  EXPECT_FALSE(parse_exclusions_document("{\"excluded\": \"n1\"}"));
  ASSERT_TRUE(parse_exclusions_document("{\"excluded\": [{\"node\": \"\"}, 3]}"));
  EXPECT_TRUE(parse_exclusions_document("{\"excluded\": [{\"node\": \"\"}, 3]}")->empty());
  // A damaged file excludes nothing (and says so) rather than stopping the job.
  {
    std::ofstream damaged(file);
    damaged << "{\"excluded\": [";
  }
  EXPECT_TRUE(exclusions.nodes().empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace primus::launch
