#include "primus/common/tasks_per_node.hpp"

#include <gtest/gtest.h>

#include "primus/common/error.hpp"

namespace primus {
namespace {

TEST(TasksPerNode, ParsesRepeatsAndSingles) {
  const TasksPerNode t = TasksPerNode::parse("3(x2),2,1");
  EXPECT_EQ(t.node_count(), 4U);
  EXPECT_EQ(t.task_count(), 9U);
  EXPECT_EQ(t.tasks_on(0), 3U);
  EXPECT_EQ(t.tasks_on(1), 3U);
  EXPECT_EQ(t.tasks_on(2), 2U);
  EXPECT_EQ(t.tasks_on(3), 1U);
  EXPECT_THROW(t.tasks_on(4), std::out_of_range);
  EXPECT_EQ(t.max_tasks(), 3U);
  EXPECT_EQ(t.to_string(), "3(x2),2,1");
}

TEST(TasksPerNode, MergesEqualNeighbours) {
  EXPECT_EQ(TasksPerNode::parse("2,2,2(x3),1").to_string(), "2(x5),1");
  EXPECT_EQ(TasksPerNode::parse("2,2,2(x3),1").runs().size(), 2U);
}

TEST(TasksPerNode, BlockRankLookup) {
  const TasksPerNode t = TasksPerNode::parse("3(x2),2,1");
  const std::uint64_t expected_node[] = {0, 0, 0, 1, 1, 1, 2, 2, 3};
  for (std::uint64_t rank = 0; rank < 9; ++rank) {
    EXPECT_EQ(t.node_of_block_rank(rank), expected_node[rank]) << "rank " << rank;
  }
  EXPECT_THROW(t.node_of_block_rank(9), std::out_of_range);
  EXPECT_EQ(t.tasks_before(0), 0U);
  EXPECT_EQ(t.tasks_before(2), 6U);
  EXPECT_EQ(t.tasks_before(3), 8U);
  EXPECT_EQ(t.tasks_before(4), 9U);
}

TEST(TasksPerNode, HugeRepeatCostsOneRun) {
  const TasksPerNode t = TasksPerNode::parse("8(x100000)");
  EXPECT_EQ(t.runs().size(), 1U);
  EXPECT_EQ(t.task_count(), 800000U);
  EXPECT_EQ(t.node_of_block_rank(799999), 99999U);
}

TEST(TasksPerNode, RejectsMalformedTextWithPosition) {
  struct Case {
    const char* text;
    std::size_t position;
  };
  const Case cases[] = {{"", 0},      {"3(x2", 4},     {"3(2)", 2},       {"3(x)", 3},
                        {"3(x0)", 3}, {"3,", 2},       {"a", 0},          {"3 ,2", 1},
                        {"-1", 0},    {"3(x2),,1", 6}, {"99999999999", 0}};
  for (const Case& c : cases) {
    try {
      TasksPerNode::parse(c.text, "SLURM_STEP_TASKS_PER_NODE");
      ADD_FAILURE() << "accepted '" << c.text << "'";
    } catch (const ParseError& e) {
      EXPECT_EQ(e.position(), c.position) << c.text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("SLURM_STEP_TASKS_PER_NODE"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace primus
