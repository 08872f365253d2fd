#include "primus/common/master_node.hpp"

#include <gtest/gtest.h>

#include "primus/common/error.hpp"

namespace primus {
namespace {

TEST(MasterNode, FormatsAndReadsBackTheFirstNodesAddress) {
  const std::string value = format_master_node("n3", "10.1.2.3");
  EXPECT_EQ(value, "n3=10.1.2.3");
  const Environment env = {{"PRIMUS_MASTER_NODE", value}};
  EXPECT_EQ(master_node_address(env, "n3"), "10.1.2.3");
}

TEST(MasterNode, IgnoresAHintForAnotherNodeOrNoHint) {
  EXPECT_EQ(master_node_address({{"PRIMUS_MASTER_NODE", "n1=10.0.0.1"}}, "n3"), std::nullopt);
  EXPECT_EQ(master_node_address({}, "n3"), std::nullopt);
}

TEST(MasterNode, AcceptsIpv6AndHostNames) {
  EXPECT_EQ(master_node_address({{"PRIMUS_MASTER_NODE", "gpu-01=fe80::1"}}, "gpu-01"), "fe80::1");
  EXPECT_EQ(master_node_address({{"PRIMUS_MASTER_NODE", "a=a-ib0.cluster"}}, "a"), "a-ib0.cluster");
}

TEST(MasterNode, MalformedValuesAreErrorsNamingTheVariable) {
  for (const char* bad :
       {"n3", "=1.2.3.4", "n3=", "n3=1.2.3.4;rm", "n3=-x", "n3=a b", "n:3=1.1.1.1"}) {
    try {
      master_node_address({{"PRIMUS_MASTER_NODE", bad}}, "n3");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("PRIMUS_MASTER_NODE: expected NODE=ADDRESS"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(format_master_node("n3", "1.2.3.4 5.6.7.8"), Error);
  EXPECT_THROW(format_master_node("", "1.2.3.4"), Error);
  EXPECT_FALSE(is_node_address(std::string(254, 'a')));
  EXPECT_TRUE(is_node_address(std::string(253, 'a')));
}

}  // namespace
}  // namespace primus
