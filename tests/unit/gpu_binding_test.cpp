#include "primus/common/gpu_binding.hpp"

#include <gtest/gtest.h>

#include <set>

#include "primus/common/error.hpp"

namespace primus {
namespace {

using Devices = std::vector<std::string>;

TEST(GpuBinding, SplitsAndJoinsDeviceLists) {
  EXPECT_EQ(split_device_list("0,1,2,3"), (Devices{"0", "1", "2", "3"}));
  EXPECT_EQ(split_device_list(""), Devices{});
  EXPECT_EQ(split_device_list("GPU-aa,GPU-bb"), (Devices{"GPU-aa", "GPU-bb"}));
  EXPECT_EQ(join_device_list({"4", "5"}), "4,5");
}

TEST(GpuBinding, TwoRanksShareFourGpusDisjointly) {
  const Devices visible = {"0", "1", "2", "3"};
  EXPECT_EQ(gpu_block(visible, 0, 2), (Devices{"0", "1"}));
  EXPECT_EQ(gpu_block(visible, 1, 2), (Devices{"2", "3"}));
}

TEST(GpuBinding, BlocksNeverOverlapAndLeftoversStayUnused) {
  for (std::uint32_t gpus = 1; gpus <= 16; ++gpus) {
    Devices visible;
    for (std::uint32_t g = 0; g < gpus; ++g)
      visible.push_back(std::to_string(g + 10));
    for (std::uint32_t ranks = 1; ranks <= gpus; ++ranks) {
      std::set<std::string> used;
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const Devices block = gpu_block(visible, r, ranks);
        EXPECT_EQ(block.size(), gpus / ranks);
        for (const std::string& d : block)
          EXPECT_TRUE(used.insert(d).second) << d;
      }
    }
  }
}

TEST(GpuBinding, TooFewGpusIsAnErrorNamingTheCounts) {
  try {
    gpu_block({"0", "1", "2"}, 0, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("4 ranks"), std::string::npos) << message;
    EXPECT_NE(message.find("3 GPUs"), std::string::npos) << message;
  }
  EXPECT_THROW(gpu_block({}, 0, 1), Error);
  EXPECT_THROW(gpu_block({"0"}, 1, 1), Error);
}

}  // namespace
}  // namespace primus
