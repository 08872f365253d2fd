// Checkpoint::is_saved_copy and whole_tensors on real HDF5 files: how a copy of a committed step
// kept in memory (python/primus/_memory_copy.py) is checked against the CRC-32C its writer
// computed before it is used instead of the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt_test_util.hpp"
#include "primus/ckpt.hpp"

namespace primus::ckpt {
namespace {

using testing::TempDir;

// Two ranks: "rows" [4, 2] float32 sharded by rows, "bias" replicated (rank 0 writes it), and a
// per-rank "cursor@rankR" int64 [3].
struct Saved {
  std::vector<float> rows = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> bias = {0.5F, -1.5F, 2.25F};
  std::vector<std::int64_t> cursor[2] = {{1, 2, 3}, {4, 5, 6}};
};

Checkpoint save_and_load(const std::filesystem::path& root, const Saved& saved) {
  for (int rank = 0; rank < 2; ++rank) {
    RankWriter writer(root, 7, rank, 2);
    const std::uint64_t begin = 2 * static_cast<std::uint64_t>(rank);
    writer.add_tensor(
        {"rows", DType::kFloat32, {2, 2}, saved.rows.data() + begin * 2, {4, 2}, {begin, 0}});
    if (rank == 0) writer.add_tensor({"bias", DType::kFloat32, {3}, saved.bias.data(), {}, {}});
    writer.add_tensor({"cursor@rank" + std::to_string(rank),
                       DType::kInt64,
                       {3},
                       saved.cursor[rank].data(),
                       {},
                       {}});
    writer.finish();
  }
  commit(root, 7, 2);
  auto loaded = load_latest(root);
  if (!loaded) throw Error("the checkpoint did not load");
  return std::move(loaded->checkpoint);
}

TEST(CkptSavedCopy, AnExactCopyOfAWholeTensorIsTheSavedOne) {
  TempDir dir;
  const Saved saved;
  const Checkpoint ckpt = save_and_load(dir.path(), saved);
  std::vector<float> bias = saved.bias;
  EXPECT_TRUE(ckpt.is_saved_copy("bias", {}, {}, bias.data(), bias.size() * sizeof(float)));
  std::vector<std::int64_t> cursor = saved.cursor[1];
  EXPECT_TRUE(ckpt.is_saved_copy("cursor@rank1", {}, {}, cursor.data(), 3 * sizeof(std::int64_t)));
  // A rank's own shard, named by its box.
  EXPECT_TRUE(ckpt.is_saved_copy("rows", {2, 0}, {2, 2}, saved.rows.data() + 4, 4 * sizeof(float)));
}

TEST(CkptSavedCopy, AFlippedBitAWrongSizeOrAnotherBoxIsNot) {
  TempDir dir;
  const Saved saved;
  const Checkpoint ckpt = save_and_load(dir.path(), saved);
  std::vector<float> bias = saved.bias;
  auto* bytes = reinterpret_cast<std::uint8_t*>(bias.data());
  bytes[5] ^= 0x10;
  EXPECT_FALSE(ckpt.is_saved_copy("bias", {}, {}, bias.data(), bias.size() * sizeof(float)));
  bytes[5] ^= 0x10;
  EXPECT_FALSE(ckpt.is_saved_copy("bias", {}, {}, bias.data(), 2 * sizeof(float)));
  // The other rank's values under this rank's name.
  std::vector<std::int64_t> cursor = saved.cursor[0];
  EXPECT_FALSE(ckpt.is_saved_copy("cursor@rank1", {}, {}, cursor.data(), 3 * sizeof(std::int64_t)));
  // "rows" has two shards: no whole copy of it was saved anywhere, and a box that is not a
  // shard is not one either.
  EXPECT_FALSE(ckpt.is_saved_copy("rows", {}, {}, saved.rows.data(), 8 * sizeof(float)));
  EXPECT_FALSE(
      ckpt.is_saved_copy("rows", {1, 0}, {2, 2}, saved.rows.data() + 2, 4 * sizeof(float)));
  EXPECT_FALSE(ckpt.is_saved_copy("nope", {}, {}, bias.data(), bias.size() * sizeof(float)));
}

TEST(CkptSavedCopy, WholeTensorsAreTheOnesSavedAsOneShard) {
  TempDir dir;
  const Checkpoint ckpt = save_and_load(dir.path(), Saved{});
  EXPECT_EQ(ckpt.whole_tensors(),
            (std::vector<std::string>{"bias", "cursor@rank0", "cursor@rank1"}));
}

}  // namespace
}  // namespace primus::ckpt
