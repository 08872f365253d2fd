// libprimus-ckpt on real HDF5 files: save, commit, load (also into another world size),
// verification, fallback past torn and corrupt checkpoints, retention.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "ckpt_test_util.hpp"
#include "primus/ckpt.hpp"

namespace primus::ckpt {
namespace {

using testing::TempDir;

// Rows of a [rows, 3] float32 tensor: value = 1000 * step + row * 3 + column.
std::vector<float> weight_rows(std::int64_t step, std::uint64_t begin, std::uint64_t count) {
  std::vector<float> values(count * 3);
  for (std::uint64_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(1000 * step + static_cast<std::int64_t>(begin * 3 + i));
  return values;
}

std::vector<float> as_floats(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// Saves `step` from `world` ranks: "w" [6, 3] sharded by rows, "bias" replicated (rank 0),
// per-rank state. Commits unless told not to.
void save(const std::filesystem::path& root, std::int64_t step, int world, bool commit_it = true) {
  const std::uint64_t rows = 6;
  for (int rank = 0; rank < world; ++rank) {
    RankWriter writer(root, step, rank, world);
    const std::uint64_t begin = rows * rank / world;
    const std::uint64_t end = rows * (rank + 1) / world;
    const std::vector<float> part = weight_rows(step, begin, end - begin);
    writer.add_tensor({"w", DType::kFloat32, {end - begin, 3}, part.data(), {rows, 3}, {begin, 0}});
    if (rank == 0) {
      const std::vector<std::uint16_t> bias = {0x3F80, 0x4000, 0xC040};  // bfloat16 1, 2, -3
      writer.add_tensor({"model/bias", DType::kBFloat16, {3}, bias.data(), {}, {}});
    }
    writer.set_int("step", step);
    writer.set_string("metadata", "{\"rank\": " + std::to_string(rank) + "}");
    writer.set_bytes("rng", std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(rank + 1)));
    writer.finish();
  }
  if (commit_it) commit(root, step, world);
}

TEST(CkptFiles, SavesCommitsAndLoadsEveryDtype) {
  TempDir dir;
  RankWriter writer(dir.path(), 5, 0, 1);
  std::vector<std::vector<std::uint8_t>> payloads;
  for (const DType dtype : all_dtypes()) {
    std::vector<std::uint8_t> bytes(7 * 5 * dtype_size(dtype));
    for (std::size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<std::uint8_t>(i * 37 + static_cast<std::size_t>(dtype));
    if (dtype == DType::kBool) {
      for (auto& b : bytes)
        b &= 1;
    }
    writer.add_tensor({std::string(to_string(dtype)), dtype, {7, 5}, bytes.data(), {}, {}});
    payloads.push_back(bytes);
  }
  const double scalar = 2.5;
  writer.add_tensor({"scalar", DType::kFloat64, {}, &scalar, {}, {}});
  writer.add_tensor({"empty", DType::kInt32, {0, 4}, nullptr, {}, {}});
  writer.finish();
  const CommitResult result = commit(dir.path(), 5, 1);
  EXPECT_EQ(result.dir, dir.path() / "step-000000000005");
  EXPECT_GT(result.bytes, 0U);

  const auto loaded = load_latest(dir.path(), Verify::kFull);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(loaded->skipped.empty());
  const Checkpoint& ckpt = loaded->checkpoint;
  for (std::size_t i = 0; i < all_dtypes().size(); ++i) {
    const DType dtype = all_dtypes()[i];
    EXPECT_EQ(ckpt.tensor(std::string(to_string(dtype))).dtype, dtype);
    EXPECT_EQ(ckpt.read(std::string(to_string(dtype))), payloads[i]) << to_string(dtype);
  }
  const auto s = ckpt.read("scalar");
  double back = 0;
  std::memcpy(&back, s.data(), sizeof back);
  EXPECT_EQ(back, 2.5);
  EXPECT_TRUE(ckpt.read("empty").empty());
  EXPECT_EQ(ckpt.tensor("empty").global_shape, (Shape{0, 4}));
}

// One chunk of a dataset as HDF5 stores it (H5Dget_chunk_info): where it starts in the array,
// its filter mask, its address in the file and its stored size.
struct StoredChunk {
  Shape coord;
  unsigned filter_mask = 0;
  haddr_t address = HADDR_UNDEF;
  hsize_t size = 0;
};

struct StoredDataset {
  Shape chunk;      // the chunk shape
  int filters = 0;  // how many filters the dataset declares
  std::vector<StoredChunk> chunks;
};

StoredDataset stored_dataset(const std::filesystem::path& file, const std::string& dataset) {
  StoredDataset out;
  const hid_t h5 = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(h5, 0) << file;
  if (h5 < 0) return out;
  const hid_t handle = H5Dopen2(h5, dataset.c_str(), H5P_DEFAULT);
  EXPECT_GE(handle, 0) << dataset;
  if (handle >= 0) {
    const hid_t dcpl = H5Dget_create_plist(handle);
    const hid_t space = H5Dget_space(handle);
    const int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
    if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, dims.data()) == rank) {
      out.chunk.assign(dims.begin(), dims.end());
      out.filters = H5Pget_nfilters(dcpl);
      hsize_t count = 0;
      EXPECT_GE(H5Dget_num_chunks(handle, space, &count), 0);
      for (hsize_t i = 0; i < count; ++i) {
        std::vector<hsize_t> coord(dims.size());
        StoredChunk chunk;
        EXPECT_GE(H5Dget_chunk_info(handle, space, i, coord.data(), &chunk.filter_mask,
                                    &chunk.address, &chunk.size),
                  0);
        chunk.coord.assign(coord.begin(), coord.end());
        out.chunks.push_back(chunk);
      }
    }
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Dclose(handle);
  }
  H5Fclose(h5);
  return out;
}

// The box [offset, offset + box) of a row-major array of `shape`, element by element.
std::vector<std::uint8_t> box_of(const std::vector<std::uint8_t>& array, const Shape& shape,
                                 std::size_t element, const Shape& offset, const Shape& box) {
  std::vector<std::uint8_t> out;
  const std::uint64_t count = element_count(box);
  Shape index(box.size(), 0);  // within the box
  for (std::uint64_t n = 0; n < count; ++n) {
    std::uint64_t flat = 0;
    for (std::size_t d = 0; d < shape.size(); ++d)
      flat = flat * shape[d] + offset[d] + index[d];
    out.insert(out.end(), array.begin() + static_cast<long>(flat * element),
               array.begin() + static_cast<long>((flat + 1) * element));
    for (std::size_t d = box.size(); d-- > 0;) {
      if (++index[d] < box[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// Boxes of a tensor of `shape`: a single element at each corner, one that leaves a margin in
// every dimension (so it starts and ends inside chunks), one that is whole in all but the last
// dimension, and one that is whole in the first only.
std::vector<std::pair<Shape, Shape>> boxes_of(const Shape& shape) {
  std::vector<std::pair<Shape, Shape>> boxes;
  const std::size_t n = shape.size();
  Shape last(n);
  for (std::size_t d = 0; d < n; ++d)
    last[d] = shape[d] - 1;
  boxes.push_back({Shape(n, 0), Shape(n, 1)});
  boxes.push_back({last, Shape(n, 1)});
  Shape inner_offset(n);
  Shape inner_box(n);
  for (std::size_t d = 0; d < n; ++d) {
    inner_offset[d] = shape[d] >= 3 ? 1 : 0;
    inner_box[d] = shape[d] - inner_offset[d] - (shape[d] >= 3 ? 1 : 0);
  }
  boxes.push_back({inner_offset, inner_box});
  Shape most = shape;
  Shape most_offset(n, 0);
  most_offset[n - 1] = shape[n - 1] / 2;
  most[n - 1] = shape[n - 1] - most_offset[n - 1];
  boxes.push_back({most_offset, most});
  if (n > 1) {
    Shape first = Shape(n, 1);
    first[0] = shape[0];
    Shape first_offset = last;
    first_offset[0] = 0;
    boxes.push_back({first_offset, first});
  }
  return boxes;
}

// Chunks of one row, of several rows with a partial last chunk, of part of a row (cut in an inner
// dimension) with a partial chunk at each row's end, and the same compressed: whole reads, the
// last row and boxes of every one give back exactly what was written, whichever way the reader
// takes (straight from the file, or through HDF5 for the filtered). The compressed save holds
// compressible tensors (small integers as float64: mostly zero bytes) and incompressible ones,
// and some chunks must really be stored deflated, others as they are (filter mask bit 0).
TEST(CkptFiles, ReadsBackEveryChunkLayoutExactly) {
  struct Layout {
    Shape shape;
    Shape chunk;  // what chunk_shape() makes of it for 24-byte chunks of float64
    bool compressible;
  };
  const std::vector<Layout> layouts = {
      {{4, 3}, {1, 3}, true},         // one row per chunk
      {{8, 1}, {3, 1}, false},        // three rows per chunk, the last one partial
      {{7, 5}, {1, 3}, true},         // a chunk inside a row, partial at each row's end
      {{3, 4, 5}, {1, 1, 3}, false},  // cut in the last of three dimensions
      {{1, 1, 13}, {1, 1, 3}, true},  // the last chunk partial
      {{9}, {3}, false},              // one dimension, whole chunks
      {{2, 1, 7}, {1, 1, 3}, true},
  };
  constexpr std::size_t kElement = 8;
  for (const int deflate : {0, 1}) {
    TempDir dir;
    WriteOptions options;
    options.chunk_bytes = 24;
    options.deflate_level = deflate;
    RankWriter writer(dir.path(), 1, 0, 1, options);
    std::vector<std::vector<std::uint8_t>> payloads;
    for (std::size_t t = 0; t < layouts.size(); ++t) {
      const std::uint64_t count = element_count(layouts[t].shape);
      std::vector<std::uint8_t> bytes(count * kElement);
      for (std::uint64_t e = 0; e < count; ++e) {
        if (layouts[t].compressible) {
          const double value = static_cast<double>(e + 1 + 100 * t);  // distinct, mostly zeros
          std::memcpy(bytes.data() + e * kElement, &value, kElement);
        } else {
          for (std::size_t b = 0; b < kElement; ++b)
            bytes[e * kElement + b] = static_cast<std::uint8_t>((e * kElement + b) * 131 + t);
        }
      }
      writer.add_tensor(
          {"t" + std::to_string(t), DType::kFloat64, layouts[t].shape, bytes.data(), {}, {}});
      payloads.push_back(std::move(bytes));
    }
    writer.finish();
    commit(dir.path(), 1, 1);
    const auto rank_file = dir.path() / "step-000000000001" / "rank-00000.h5";

    // The layouts are the ones named above, and compression happened where it could.
    int deflated = 0;
    int stored_as_is = 0;
    for (std::size_t t = 0; t < layouts.size(); ++t) {
      const StoredDataset stored = stored_dataset(rank_file, "/tensors/t" + std::to_string(t));
      EXPECT_EQ(stored.chunk, layouts[t].chunk) << "t" << t;
      EXPECT_EQ(stored.filters, deflate) << "t" << t;
      const std::uint64_t raw = element_count(layouts[t].chunk) * kElement;
      for (const StoredChunk& chunk : stored.chunks) {
        if (deflate == 0) {
          EXPECT_EQ(chunk.filter_mask, 0U);
          EXPECT_EQ(chunk.size, raw);
        } else if ((chunk.filter_mask & 1U) == 0) {
          EXPECT_LT(chunk.size, raw) << "t" << t << ": a deflated chunk that did not shrink";
          ++deflated;
        } else {
          EXPECT_EQ(chunk.size, raw) << "t" << t;
          ++stored_as_is;
        }
      }
    }
    if (deflate != 0) {
      EXPECT_GT(deflated, 0) << "no chunk was stored compressed";
      EXPECT_GT(stored_as_is, 0) << "no chunk was stored as it is (filter skipped)";
    }

    EXPECT_TRUE(verify_problems(dir.path() / "step-000000000001", Verify::kFull).empty());
    const auto loaded = load_latest(dir.path(), Verify::kFull);
    ASSERT_TRUE(loaded);
    for (std::size_t t = 0; t < layouts.size(); ++t) {
      const std::string name = "t" + std::to_string(t);
      const Shape& shape = layouts[t].shape;
      const std::string where = name + " deflate " + std::to_string(deflate);
      EXPECT_EQ(loaded->checkpoint.read(name), payloads[t]) << where;
      const std::uint64_t row = payloads[t].size() / shape[0];
      const auto tail = loaded->checkpoint.read_rows(name, shape[0] - 1, shape[0]);
      EXPECT_EQ(tail, std::vector<std::uint8_t>(payloads[t].end() - static_cast<long>(row),
                                                payloads[t].end()))
          << where;
      for (const auto& [offset, box] : boxes_of(shape)) {
        std::string text;
        for (std::size_t d = 0; d < shape.size(); ++d)
          text += (d ? "," : "") + std::to_string(offset[d]) + "+" + std::to_string(box[d]);
        EXPECT_EQ(loaded->checkpoint.read(name, offset, box),
                  box_of(payloads[t], shape, kElement, offset, box))
            << where << " box [" << text << "]";
      }
    }
  }
}

// A tensor larger than two of the direct reader's 8 MiB pieces (unfiltered, 4 MiB chunks laid
// out back to back, so one pread run): a byte flipped on disk in the second piece (found through
// HDF5's chunk index, as the reader finds its data) fails the read and full verification with a
// checksum mismatch naming the file and dataset; the undamaged copy read back exactly.
TEST(CkptFiles, AByteFlippedInTheSecondDirectReadPieceIsCaught) {
  // ckpt/rank_file.cpp's kDirectPieceBytes.
  constexpr std::uint64_t kPiece = std::uint64_t{8} << 20;
  const Shape shape = {6144, 1024};  // 24 MiB of float32
  std::vector<float> values(element_count(shape));
  std::iota(values.begin(), values.end(), 0.0F);  // exact below 2^24
  const std::vector<float> small = {1, 2, 3};
  TempDir dir;
  {
    RankWriter writer(dir.path(), 1, 0, 1);  // default options: 4 MiB chunks, no filter
    writer.add_tensor({"big", DType::kFloat32, shape, values.data(), {}, {}});
    writer.add_tensor({"small", DType::kFloat32, {3}, small.data(), {}, {}});
    writer.finish();
  }
  commit(dir.path(), 1, 1);
  const auto step_dir = dir.path() / "step-000000000001";
  const auto rank_file = step_dir / "rank-00000.h5";
  const std::uint64_t bytes = values.size() * sizeof(float);
  ASSERT_GE(bytes, std::uint64_t{20} << 20);
  {
    const Checkpoint clean = Checkpoint::open(step_dir, Verify::kFull);
    const std::vector<std::uint8_t> back = clean.read("big");
    ASSERT_EQ(back.size(), bytes);
    EXPECT_EQ(std::memcmp(back.data(), values.data(), bytes), 0);
  }

  // Where the array's bytes lie in the file: chunks of whole rows, in row order.
  const StoredDataset stored = stored_dataset(rank_file, "/tensors/big");
  ASSERT_EQ(stored.filters, 0);
  ASSERT_EQ(stored.chunk.size(), 2U);
  ASSERT_EQ(stored.chunk[1], shape[1]);
  const std::uint64_t chunk_bytes = stored.chunk[0] * shape[1] * sizeof(float);
  ASSERT_EQ(stored.chunks.size(), (bytes + chunk_bytes - 1) / chunk_bytes);
  std::vector<StoredChunk> chunks = stored.chunks;
  std::sort(chunks.begin(), chunks.end(),
            [](const StoredChunk& a, const StoredChunk& b) { return a.coord[0] < b.coord[0]; });
  // The reader merges chunks that lie back to back in the file into one run and preads each run
  // in 8 MiB pieces: the first two pieces are one run only if the chunks under them are.
  for (std::size_t i = 0; i + 1 < chunks.size() && (i + 1) * chunk_bytes < 2 * kPiece; ++i) {
    ASSERT_EQ(chunks[i + 1].address, chunks[i].address + chunk_bytes)
        << "chunk " << i + 1 << " does not follow chunk " << i
        << " in the file: the second 8 MiB piece is not where this test looks";
  }
  const std::uint64_t target = kPiece + kPiece / 2 + 12345;  // inside the second piece
  const StoredChunk& holder = chunks[target / chunk_bytes];
  ASSERT_EQ(holder.coord[0] * shape[1] * sizeof(float), target / chunk_bytes * chunk_bytes);
  const std::uint64_t at = holder.address + target % chunk_bytes;
  {
    // The byte there is the array's: the copy on disk is as written.
    const std::string file = testing::read_bytes(rank_file);
    ASSERT_LT(at, file.size());
    EXPECT_EQ(static_cast<unsigned char>(file[at]),
              reinterpret_cast<const unsigned char*>(values.data())[target]);
  }
  testing::flip_byte(rank_file, static_cast<std::size_t>(at));

  const Checkpoint damaged = Checkpoint::open(step_dir, Verify::kQuick);  // sizes still agree
  try {
    damaged.read("big");
    ADD_FAILURE() << "a byte flipped in the second 8 MiB piece went unnoticed";
  } catch (const CorruptCheckpoint& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00000.h5: /tensors/big: checksum mismatch"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(damaged.read_rows("big", 2048, 4096), CorruptCheckpoint);  // the piece's rows
  EXPECT_EQ(as_floats(damaged.read("small")), small);  // the rest of the file is fine
  const auto problems = verify_problems(step_dir, Verify::kFull);
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_NE(problems[0].find("rank-00000.h5: /tensors/big: checksum mismatch"), std::string::npos)
      << problems[0];
  std::vector<std::string> skipped;
  EXPECT_FALSE(load_latest(dir.path(), Verify::kFull, &skipped));
  ASSERT_EQ(skipped.size(), 1U);
  EXPECT_NE(skipped[0].find("/tensors/big"), std::string::npos) << skipped[0];
}

TEST(CkptFiles, LoadsIntoAnotherWorldSize) {
  TempDir dir;
  save(dir.path(), 3, 2);
  const auto loaded = load_latest(dir.path());
  ASSERT_TRUE(loaded);
  const Checkpoint& ckpt = loaded->checkpoint;
  EXPECT_EQ(ckpt.world_size(), 2);
  EXPECT_EQ(as_floats(ckpt.read("w")), weight_rows(3, 0, 6));
  // Three ranks now: rows [0,2), [2,4), [4,6) straddle the two saved shards [0,3), [3,6).
  for (std::uint64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(as_floats(ckpt.read_rows("w", 2 * r, 2 * r + 2)), weight_rows(3, 2 * r, 2));
  }
  // A box across both shards and not whole in dimension 1.
  const auto box = as_floats(ckpt.read("w", {2, 1}, {2, 2}));
  EXPECT_EQ(box, (std::vector<float>{3007, 3008, 3010, 3011}));
  const auto bias = ckpt.read("model/bias");
  EXPECT_EQ(bias.size(), 6U);
  EXPECT_EQ(bias[0], 0x80);
  EXPECT_EQ(bias[1], 0x3F);

  const auto state = ckpt.state(1);
  EXPECT_EQ(std::get<std::int64_t>(state.at("step")), 3);
  EXPECT_EQ(std::get<std::string>(state.at("metadata")), "{\"rank\": 1}");
  EXPECT_EQ(std::get<std::vector<std::uint8_t>>(state.at("rng")), std::vector<std::uint8_t>(16, 2));
  EXPECT_THROW(ckpt.read_rows("w", 5, 7), Error);
  EXPECT_THROW(ckpt.tensor("nope"), Error);
}

TEST(CkptFiles, WriterRefusesBadInput) {
  TempDir dir;
  RankWriter writer(dir.path(), 1, 0, 1);
  const float x[4] = {1, 2, 3, 4};
  writer.add_tensor({"x", DType::kFloat32, {4}, x, {}, {}});
  EXPECT_THROW(writer.add_tensor({"x", DType::kFloat32, {4}, x, {}, {}}), Error);
  EXPECT_THROW(writer.add_tensor({"y", DType::kFloat32, {4}, x, {6}, {3}}), Error);
  EXPECT_THROW(writer.add_tensor({"z", DType::kFloat32, {4}, nullptr, {}, {}}), Error);
  EXPECT_THROW(writer.add_tensor({"", DType::kFloat32, {4}, x, {}, {}}), Error);
  EXPECT_THROW(writer.set_string("s", std::string("a\0b", 3)), Error);
  EXPECT_THROW(RankWriter(dir.path(), 1, 2, 2), Error);
  EXPECT_THROW(RankWriter(dir.path(), -1, 0, 1), Error);
  WriteOptions options;
  options.deflate_level = 4;  // igzip has levels 1 to 3
  EXPECT_THROW(RankWriter(dir.path(), 2, 0, 1, options), Error);
  options.deflate_level = -1;
  EXPECT_THROW(RankWriter(dir.path(), 2, 0, 1, options), Error);
  options = WriteOptions{};
  options.chunk_bytes = 0;
  EXPECT_THROW(RankWriter(dir.path(), 2, 0, 1, options), Error);
}

TEST(CkptFiles, NothingIsVisibleBeforeCommitAndAFailedCommitChangesNothing) {
  TempDir dir;
  save(dir.path(), 10, 2);
  save(dir.path(), 20, 2, /*commit_it=*/false);
  auto loaded = load_latest(dir.path());
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->checkpoint.step(), 10);  // the uncommitted step 20 is invisible
  EXPECT_EQ(read_latest(dir.path()), 10);

  // Step 30 with a rank missing: the commit fails, step 10 stays the latest.
  {
    RankWriter writer(dir.path(), 30, 0, 2);
    const auto part = weight_rows(30, 0, 3);
    writer.add_tensor({"w", DType::kFloat32, {3, 3}, part.data(), {6, 3}, {0, 0}});
    writer.finish();
  }
  EXPECT_THROW(commit(dir.path(), 30, 2), CorruptCheckpoint);
  EXPECT_EQ(read_latest(dir.path()), 10);
  EXPECT_EQ(load_latest(dir.path())->checkpoint.step(), 10);

  // Committing step 20 now works; pruning keeps it and removes the stale temporaries.
  commit(dir.path(), 20, 2);
  EXPECT_EQ(read_latest(dir.path()), 20);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / ".tmp-step-000000000020"));
  const auto removed = prune(dir.path(), 1);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "step-000000000010"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "step-000000000020"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / ".tmp-step-000000000030"));  // newer: kept
  EXPECT_EQ(removed.size(), 1U);
}

TEST(CkptFiles, PruneNeverRemovesTheNewestCheckpointThatVerifies) {
  TempDir dir;
  save(dir.path(), 10, 2);
  save(dir.path(), 20, 2);
  const auto rank1 = dir.path() / "step-000000000020" / "rank-00001.h5";
  const std::string bytes = testing::read_bytes(rank1);
  testing::write_bytes(rank1, bytes.substr(0, bytes.size() / 2));  // LATEST's step is torn
  prune(dir.path(), 1);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "step-000000000020"));  // LATEST's
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "step-000000000010"));  // the good one
  EXPECT_EQ(load_latest(dir.path())->checkpoint.step(), 10);
  // Named as known good (what the committer passes for the step it just committed), step 20
  // is not opened again: it counts as the newest that verifies, and step 10 goes.
  const PrunePlan trusting = prune_plan(dir.path(), 1, 0, 20);
  EXPECT_FALSE(trusting.spared);
  ASSERT_EQ(trusting.remove.size(), 1U);
  EXPECT_EQ(trusting.remove[0], dir.path() / "step-000000000010");
  EXPECT_EQ(prune_plan(dir.path(), 1, 0, 10).remove.size(), 0U);  // 20 is not known: 10 stays
}

TEST(CkptFiles, AnAsyncSaveCopiesFirstWritesInTheBackgroundAndCommitsLater) {
  TempDir dir;
  std::vector<float> weights = weight_rows(7, 0, 6);
  {
    AsyncSave save(dir.path(), 7, 0, 1, {{"w", DType::kFloat32, {6, 3}, weights.data(), {}, {}}},
                   {{"step", StateValue(std::int64_t{7})}, {"note", StateValue(std::string("x"))}});
    std::fill(weights.begin(), weights.end(), -1.0F);             // training goes on meanwhile
    EXPECT_THROW(AsyncSave(dir.path(), 8, 0, 1, {}, {}), Error);  // one in flight at most
    EXPECT_FALSE(load_latest(dir.path()));                        // nothing visible yet
    EXPECT_EQ(save.wait(), dir.path() / ".tmp-step-000000000007" / "rank-00000.h5");
    EXPECT_TRUE(save.done());
    EXPECT_THROW(save.wait(), Error);
  }
  commit(dir.path(), 7, 1);
  const auto loaded = load_latest(dir.path(), Verify::kFull);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(as_floats(loaded->checkpoint.read("w")), weight_rows(7, 0, 6));
  EXPECT_EQ(std::get<std::int64_t>(loaded->checkpoint.state(0).at("step")), 7);
  // The next one may start once the first was waited for; its error comes from wait().
  AsyncSave bad(dir.path(), 8, 3, 2, {}, {});
  EXPECT_THROW(bad.wait(), Error);
}

TEST(CkptFiles, SavingAStepAgainReplacesIt) {
  TempDir dir;
  save(dir.path(), 10, 2);
  save(dir.path(), 10, 3);
  const auto loaded = load_latest(dir.path(), Verify::kFull);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->checkpoint.world_size(), 3);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path()))
    ++entries;
  EXPECT_EQ(entries, 2U);  // step-000000000010 and LATEST
}

// Corruption of the newest checkpoint: verify names it, load falls back to the previous one.
class CkptCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    save(dir_.path(), 10, 2);
    save(dir_.path(), 20, 2);
  }
  std::filesystem::path newest() const { return dir_.path() / "step-000000000020"; }
  std::filesystem::path rank1() const { return newest() / "rank-00001.h5"; }

  // The problem text that full verification reports, and a check that load falls back.
  std::string expect_detected() {
    const auto problems = verify_problems(newest(), Verify::kFull);
    EXPECT_FALSE(problems.empty());
    std::vector<std::string> skipped;
    const auto loaded = load_latest(dir_.path(), Verify::kFull, &skipped);
    EXPECT_TRUE(loaded);
    if (loaded) {
      EXPECT_EQ(loaded->checkpoint.step(), 10);
    }
    EXPECT_EQ(skipped.size(), 1U);
    return problems.empty() ? "" : problems.front();
  }

  TempDir dir_;
};

TEST_F(CkptCorruption, AFlippedTensorByteFailsItsChecksum) {
  // Rank 1 holds rows [3, 6) of step 20: values 20009..20017. Find the first and flip it.
  const float first = 20009;
  const std::string bytes = testing::read_bytes(rank1());
  const std::size_t at = bytes.find(std::string(reinterpret_cast<const char*>(&first), 4));
  ASSERT_NE(at, std::string::npos);
  testing::flip_byte(rank1(), at + 1);
  EXPECT_TRUE(verify_problems(newest(), Verify::kQuick).empty());  // sizes and indexes agree
  const std::string problem = expect_detected();
  EXPECT_NE(problem.find("rank-00001.h5: /tensors/w: checksum mismatch"), std::string::npos)
      << problem;
  // A checked read never returns the damaged bytes.
  const Checkpoint damaged = Checkpoint::open(newest(), Verify::kQuick);
  EXPECT_THROW(damaged.read("w"), CorruptCheckpoint);
  EXPECT_EQ(as_floats(damaged.read_rows("w", 0, 3)), weight_rows(20, 0, 3));
}

TEST_F(CkptCorruption, AFlippedManifestByteFailsTheManifestChecksum) {
  const std::string text = testing::read_bytes(newest() / "manifest.json");
  testing::flip_byte(newest() / "manifest.json", text.find("world_size") + 2);
  EXPECT_NE(expect_detected().find("manifest.json: checksum mismatch"), std::string::npos);
}

TEST_F(CkptCorruption, ADamagedSuperblockIsNotHdf5) {
  testing::flip_byte(rank1(), 0);
  EXPECT_NE(expect_detected().find("rank-00001.h5: cannot open"), std::string::npos);
}

TEST_F(CkptCorruption, ADamagedObjectHeaderIsReported) {
  // The object header of /tensors/w in rank 1's file.
  haddr_t address = 0;
  {
    const hid_t file = H5Fopen(rank1().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    H5O_info_t info{};
    ASSERT_GE(H5Oget_info_by_name2(file, "/tensors/w", &info, H5O_INFO_BASIC, H5P_DEFAULT), 0);
    address = info.addr;
    H5Fclose(file);
  }
  testing::flip_byte(rank1(), static_cast<std::size_t>(address));
  EXPECT_NE(expect_detected().find("rank-00001.h5"), std::string::npos);
}

TEST_F(CkptCorruption, ATruncatedRankFileIsCaughtByItsSize) {
  const std::string bytes = testing::read_bytes(rank1());
  testing::write_bytes(rank1(), bytes.substr(0, bytes.size() / 2));
  const auto quick = verify_problems(newest(), Verify::kQuick);
  ASSERT_EQ(quick.size(), 1U);
  EXPECT_NE(quick[0].find("(truncated)"), std::string::npos) << quick[0];
  expect_detected();
}

TEST_F(CkptCorruption, AMissingRankFileIsReported) {
  std::filesystem::remove(rank1());
  EXPECT_NE(expect_detected().find("rank-00001.h5"), std::string::npos);
}

TEST(CkptFiles, MalformedFilesErrorCleanly) {
  TempDir dir;
  save(dir.path(), 1, 1);
  const auto step_dir = dir.path() / "step-000000000001";
  // Random bytes as a rank file (same size, so only opening it can fail).
  const auto size = std::filesystem::file_size(step_dir / "rank-00000.h5");
  std::string noise(size, '\0');
  for (std::size_t i = 0; i < noise.size(); ++i)
    noise[i] = static_cast<char>((i * 2654435761U) >> 13);
  testing::write_bytes(step_dir / "rank-00000.h5", noise);
  EXPECT_FALSE(verify_problems(step_dir, Verify::kQuick).empty());
  EXPECT_FALSE(load_latest(dir.path()));

  // A valid HDF5 file of another layout.
  const hid_t other =
      H5Fcreate((dir.path() / "other.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(other);
  std::filesystem::copy_file(dir.path() / "other.h5", step_dir / "rank-00000.h5",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_FALSE(verify_problems(step_dir, Verify::kFull).empty());
  EXPECT_THROW(Checkpoint::open(step_dir), CorruptCheckpoint);
  EXPECT_FALSE(load_latest(dir.path()));
  EXPECT_FALSE(load_step(dir.path(), 2));
}

}  // namespace
}  // namespace primus::ckpt
