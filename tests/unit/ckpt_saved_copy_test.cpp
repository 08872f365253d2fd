// Checkpoint::is_saved_copy and whole_tensors on real HDF5 files: how a copy of a committed step
// kept in memory (python/primus/_memory_copy.py) is checked against the CRC-32C its writer
// computed before it is used instead of the file. And read_whole, how a load reads whole
// tensors in one pass over each rank file.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
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

// Checkpoint::read_whole: several whole tensors in one call, each exact; a tensor of two shards
// is assembled as read_into assembles it; a destination of the wrong size is refused by name.
TEST(CkptReadWhole, EachTensorExactShardedOnesAssembled) {
  TempDir dir;
  const Saved saved;
  const Checkpoint ckpt = save_and_load(dir.path(), saved);
  std::vector<float> bias(3), rows(8);
  std::vector<std::int64_t> cursor0(3), cursor1(3);
  ckpt.read_whole({{"cursor@rank1", cursor1.data(), 3 * sizeof(std::int64_t)},
                   {"rows", rows.data(), 8 * sizeof(float)},
                   {"bias", bias.data(), 3 * sizeof(float)},
                   {"cursor@rank0", cursor0.data(), 3 * sizeof(std::int64_t)}});
  EXPECT_EQ(bias, saved.bias);
  EXPECT_EQ(rows, saved.rows);
  EXPECT_EQ(cursor0, saved.cursor[0]);
  EXPECT_EQ(cursor1, saved.cursor[1]);
  try {
    ckpt.read_whole({{"bias", bias.data(), 2 * sizeof(float)}});
    ADD_FAILURE() << "a destination of 8 bytes took a tensor of 12";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'bias'"), std::string::npos) << e.what();
  }
}

// Two tensors of one rank file read in one pass (3 MiB, one piece, and 12 MiB, two pieces):
// a byte flipped on disk in the second fails the read with a checksum mismatch that names it,
// and the first, read alone, is still exact.
TEST(CkptReadWhole, AByteFlippedInTheSecondOfTwoTensorsIsNamed) {
  TempDir dir;
  std::vector<float> first(768 * 1024), second(3 * 1024 * 1024);
  std::iota(first.begin(), first.end(), 0.0F);
  std::iota(second.begin(), second.end(), 4194304.0F);  // above first's, exact below 2^24
  {
    RankWriter writer(dir.path(), 3, 0, 1);
    writer.add_tensor({"first", DType::kFloat32, {768, 1024}, first.data(), {}, {}});
    writer.add_tensor({"second", DType::kFloat32, {3072, 1024}, second.data(), {}, {}});
    writer.finish();
  }
  commit(dir.path(), 3, 1);
  const auto step_dir = dir.path() / "step-000000000003";
  std::vector<float> a(first.size()), b(second.size());
  const auto read_both = [&](const Checkpoint& ckpt) {
    ckpt.read_whole({{"second", b.data(), b.size() * sizeof(float)},
                     {"first", a.data(), a.size() * sizeof(float)}});
  };
  read_both(Checkpoint::open(step_dir, Verify::kQuick));
  EXPECT_EQ(a, first);
  EXPECT_EQ(b, second);

  const float marker = second[1000];
  const std::string file = testing::read_bytes(step_dir / "rank-00000.h5");
  const std::size_t at =
      file.find(std::string(reinterpret_cast<const char*>(&marker), sizeof marker));
  ASSERT_NE(at, std::string::npos);
  testing::flip_byte(step_dir / "rank-00000.h5", at + 1);
  const Checkpoint damaged = Checkpoint::open(step_dir, Verify::kQuick);
  try {
    read_both(damaged);
    ADD_FAILURE() << "a byte flipped in the second tensor went unnoticed";
  } catch (const CorruptCheckpoint& e) {
    EXPECT_NE(std::string(e.what()).find("/tensors/second: checksum mismatch"), std::string::npos)
        << e.what();
  }
  std::fill(a.begin(), a.end(), 0.0F);
  damaged.read_whole({{"first", a.data(), a.size() * sizeof(float)}});
  EXPECT_EQ(a, first);
}

TEST(CkptSavedCopy, WholeTensorsAreTheOnesSavedAsOneShard) {
  TempDir dir;
  const Checkpoint ckpt = save_and_load(dir.path(), Saved{});
  EXPECT_EQ(ckpt.whole_tensors(),
            (std::vector<std::string>{"bias", "cursor@rank0", "cursor@rank1"}));
}

}  // namespace
}  // namespace primus::ckpt
