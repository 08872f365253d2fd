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

// Rank r of L, with G GPUs visible, gets k = floor(G / L) of them: exactly visible[r*k, (r+1)*k),
// in the order of the visible list; the G mod L left over are exactly the tail visible[L*k, G),
// and no rank gets any of them. The names are neither sorted nor numeric, so an implementation
// that sorted, deduplicated by value or parsed them would show.
TEST(GpuBinding, BlocksAreTheVisibleListInOrderAndLeftoversTheUnusedTail) {
  for (std::uint32_t gpus = 1; gpus <= 16; ++gpus) {
    Devices visible;
    for (std::uint32_t g = 0; g < gpus; ++g)
      visible.push_back((g % 3 == 1 ? "GPU-" : "") + std::to_string(97 - 7 * g));
    for (std::uint32_t ranks = 1; ranks <= gpus; ++ranks) {
      const std::size_t k = gpus / ranks;
      Devices handed_out;  // every block, rank after rank
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const Devices block = gpu_block(visible, r, ranks);
        const Devices expected(visible.begin() + static_cast<std::ptrdiff_t>(r * k),
                               visible.begin() + static_cast<std::ptrdiff_t>((r + 1) * k));
        EXPECT_EQ(block, expected) << gpus << " GPUs, rank " << r << " of " << ranks;
        handed_out.insert(handed_out.end(), block.begin(), block.end());
      }
      // Together the blocks are the visible list up to the leftovers, each GPU once ...
      const Devices head(visible.begin(), visible.begin() + static_cast<std::ptrdiff_t>(ranks * k));
      EXPECT_EQ(handed_out, head) << gpus << " GPUs, " << ranks << " ranks";
      // ... and the leftovers, gpus mod ranks of them, are the tail, which no rank got.
      const Devices tail(visible.begin() + static_cast<std::ptrdiff_t>(ranks * k), visible.end());
      EXPECT_EQ(tail.size(), gpus % ranks);
      const std::set<std::string> used(handed_out.begin(), handed_out.end());
      EXPECT_EQ(used.size(), handed_out.size()) << "a GPU handed out twice";
      for (const std::string& d : tail)
        EXPECT_EQ(used.count(d), 0U) << d << " is a leftover but was handed out";
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
