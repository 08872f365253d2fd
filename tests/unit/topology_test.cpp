#include "primus/common/topology.hpp"

#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "primus/common/error.hpp"

namespace primus {
namespace {

Topology make(const char* nodes, const char* tasks, Distribution d) {
  return Topology(Hostlist::parse(nodes), TasksPerNode::parse(tasks), d);
}

TEST(Topology, BlockPlacesConsecutiveRanksOnANode) {
  const Topology t = make("n[1-3]", "2,3,1", Distribution::kBlock);
  ASSERT_EQ(t.world_size(), 6U);
  const std::pair<const char*, std::uint32_t> expected[] = {{"n1", 0}, {"n1", 1}, {"n2", 0},
                                                            {"n2", 1}, {"n2", 2}, {"n3", 0}};
  for (std::uint64_t rank = 0; rank < 6; ++rank) {
    const RankPlacement p = t.place(rank);
    EXPECT_EQ(p.hostname, expected[rank].first) << rank;
    EXPECT_EQ(p.local_rank, expected[rank].second) << rank;
    EXPECT_EQ(p.node_count, 3U);
    EXPECT_EQ(p.world_size, 6U);
  }
  EXPECT_EQ(t.place(3).local_world_size, 3U);
  EXPECT_EQ(t.place(3).node_index, 1U);
}

// srun -N3 -n6 -m cyclic with tasks "2,3,1": round 0 gives n1 n2 n3, round 1 n1 n2, round 2 n2.
TEST(Topology, CyclicDealsRanksRoundRobinSkippingFullNodes) {
  const Topology t = make("n[1-3]", "2,3,1", Distribution::kCyclic);
  const std::pair<const char*, std::uint32_t> expected[] = {{"n1", 0}, {"n2", 0}, {"n3", 0},
                                                            {"n1", 1}, {"n2", 1}, {"n2", 2}};
  for (std::uint64_t rank = 0; rank < 6; ++rank) {
    const RankPlacement p = t.place(rank);
    EXPECT_EQ(p.hostname, expected[rank].first) << rank;
    EXPECT_EQ(p.local_rank, expected[rank].second) << rank;
  }
}

// Every rank is placed once, local ranks on a node are 0..L-1, and global_rank inverts place,
// for both distributions over assorted uneven allocations.
TEST(Topology, PlaceAndGlobalRankAreInverse) {
  const char* const shapes[] = {"1",           "4",       "3(x2),2,1", "1,4,1,4",
                                "2(x3),5(x2)", "7,1(x5)", "2(x17)"};
  for (const char* tasks : shapes) {
    const TasksPerNode tpn = TasksPerNode::parse(tasks);
    Hostlist nodes;
    for (std::uint64_t i = 0; i < tpn.node_count(); ++i)
      nodes.push_host("h" + std::to_string(i));
    for (const Distribution d : {Distribution::kBlock, Distribution::kCyclic}) {
      const Topology t(nodes, tpn, d);
      std::set<std::pair<std::uint64_t, std::uint32_t>> seen;
      for (std::uint64_t rank = 0; rank < t.world_size(); ++rank) {
        const RankPlacement p = t.place(rank);
        EXPECT_LT(p.local_rank, p.local_world_size);
        EXPECT_EQ(p.local_world_size, tpn.tasks_on(p.node_index));
        EXPECT_EQ(p.hostname, "h" + std::to_string(p.node_index));
        EXPECT_TRUE(seen.emplace(p.node_index, p.local_rank).second)
            << tasks << " " << to_string(d) << " rank " << rank;
        EXPECT_EQ(t.global_rank(p.node_index, p.local_rank), rank);
      }
      EXPECT_EQ(seen.size(), t.world_size());
    }
  }
}

TEST(Topology, OneMachine) {
  const Topology t = Topology::one_machine(4, "laptop");
  EXPECT_EQ(t.world_size(), 4U);
  EXPECT_EQ(t.node_count(), 1U);
  EXPECT_EQ(t.place(3).local_rank, 3U);
  EXPECT_EQ(t.place(3).hostname, "laptop");
  EXPECT_THROW(t.place(4), std::out_of_range);
}

TEST(Topology, RejectsInconsistentInputs) {
  EXPECT_THROW(make("n[1-3]", "2,2", Distribution::kBlock), Error);
  EXPECT_THROW(make("n[1-2]", "2,0", Distribution::kBlock), Error);
  EXPECT_THROW(Topology::one_machine(0, "x"), Error);
}

TEST(Topology, ParsesSlurmDistributions) {
  EXPECT_EQ(parse_distribution(""), Distribution::kBlock);
  EXPECT_EQ(parse_distribution("block"), Distribution::kBlock);
  EXPECT_EQ(parse_distribution("cyclic"), Distribution::kCyclic);
  EXPECT_EQ(parse_distribution("cyclic:block"), Distribution::kCyclic);
  EXPECT_EQ(parse_distribution("block:cyclic,Pack"), Distribution::kBlock);
  for (const char* bad : {"plane", "arbitrary", "plane=4", "unknown", "Block"}) {
    try {
      parse_distribution(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_DISTRIBUTION"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos);
    }
  }
}

TEST(Topology, HugeWorldIsNotExpanded) {
  const Topology t = make("gpu[000001-050000,050001-100000]", "8(x100000)", Distribution::kCyclic);
  // (Slurm caps one bracket range at 65536 hosts, so 100,000 nodes take two.)
  const RankPlacement p = t.place(799999);
  EXPECT_EQ(p.node_index, 99999U);
  EXPECT_EQ(p.hostname, "gpu100000");
  EXPECT_EQ(p.local_rank, 7U);
  EXPECT_EQ(t.global_rank(99999, 7), 799999U);
}

}  // namespace
}  // namespace primus
