// libprimus-ckpt's pure parts: names, dtypes, chunk shapes, box copies, CRC32C, the index and
// manifest JSON, the commit-time agreement checks and retention.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "box_copy.hpp"
#include "chunking.hpp"
#include "crc32c.hpp"
#include "primus/ckpt.hpp"

namespace primus::ckpt {
namespace {

TEST(CkptLayout, NamesRoundTripAndRejectLookalikes) {
  EXPECT_EQ(step_dir_name(120), "step-000000000120");
  EXPECT_EQ(parse_step_dir_name("step-000000000120"), 120);
  EXPECT_EQ(temporary_dir_name(7), ".tmp-step-000000000007");
  EXPECT_EQ(parse_temporary_dir_name(".tmp-step-000000000007"), 7);
  EXPECT_EQ(rank_file_name(3), "rank-00003.h5");
  EXPECT_EQ(parse_rank_file_name("rank-00003.h5"), 3);
  for (const char* bad : {"step-120", "step-00000000012x", "step-0000000001200",
                          "xstep-000000000120", "step--00000000012"}) {
    EXPECT_EQ(parse_step_dir_name(bad), std::nullopt) << bad;
  }
  for (const char* bad : {"../rank-00001.h5", "rank-1.h5", "rank-00001.h5x", "rank-0000a.h5"}) {
    EXPECT_EQ(parse_rank_file_name(bad), std::nullopt) << bad;
  }
  EXPECT_THROW(step_dir_name(-1), Error);
  EXPECT_THROW(step_dir_name(kMaxStep + 1), Error);
  EXPECT_THROW(rank_file_name(kMaxWorldSize), Error);
}

TEST(CkptLayout, TensorNamesEscapeSlashesAndPercents) {
  EXPECT_EQ(dataset_name("model.layers.0/weight%"), "model.layers.0%2Fweight%25");
  EXPECT_EQ(tensor_name_of_dataset("model.layers.0%2Fweight%25"), "model.layers.0/weight%");
  EXPECT_THROW(dataset_name(""), Error);
  EXPECT_THROW(dataset_name(".."), Error);
  EXPECT_THROW(dataset_name(std::string("a\0b", 3)), Error);
}

TEST(CkptDType, NamesAndSizes) {
  EXPECT_EQ(all_dtypes().size(), 10U);
  for (const DType dtype : all_dtypes())
    EXPECT_EQ(parse_dtype(to_string(dtype)), dtype);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2U);
  EXPECT_EQ(dtype_size(DType::kFloat64), 8U);
  EXPECT_EQ(parse_dtype("float128"), std::nullopt);
  EXPECT_EQ(element_count({}), 1U);
  EXPECT_EQ(element_count({3, 0, 5}), 0U);
  EXPECT_THROW(element_count({1ULL << 40, 1ULL << 40}), Error);
}

TEST(CkptChunking, WholeRowsUpToTheTargetAndNeverOverFourGiB) {
  EXPECT_EQ(chunk_shape({1000, 1000}, 4, 4 << 20), (Shape{1000, 1000}));  // 4 MB fits
  EXPECT_EQ(chunk_shape({4096, 1024}, 4, 4 << 20), (Shape{1024, 1024}));
  EXPECT_EQ(chunk_shape({10, 4 << 20}, 4, 4 << 20), (Shape{1, 1 << 20}));  // one row too big
  EXPECT_EQ(chunk_shape({7}, 8, 16), (Shape{2}));
  EXPECT_EQ(chunk_shape({7}, 8, 1), (Shape{1}));
  const Shape huge = chunk_shape({1ULL << 20, 1ULL << 20}, 8, 1ULL << 40);
  EXPECT_LE(element_count(huge) * 8, (1ULL << 32) - 1);
}

TEST(CkptChunking, ContiguousChunksMapEachChunkToOneRangeOfTheArray) {
  const auto rows = contiguous_chunks({7, 5}, {3, 5}, 4);  // three chunks, the last one partial
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 3U);
  EXPECT_EQ((*rows)[1].coord, (Shape{3, 0}));
  EXPECT_EQ((*rows)[1].out_offset, 60U);
  EXPECT_EQ((*rows)[2].bytes, 20U);
  EXPECT_EQ((*rows)[2].stored_bytes, 60U);

  const auto inner = contiguous_chunks({2, 3, 4}, {1, 2, 4}, 1);  // cut in the middle dimension
  ASSERT_TRUE(inner);
  ASSERT_EQ(inner->size(), 4U);
  EXPECT_EQ((*inner)[2].coord, (Shape{1, 0, 0}));
  EXPECT_EQ((*inner)[2].out_offset, 12U);
  EXPECT_EQ((*inner)[3].coord, (Shape{1, 2, 0}));
  EXPECT_EQ((*inner)[3].out_offset, 20U);
  EXPECT_EQ((*inner)[3].bytes, 4U);

  const auto last = contiguous_chunks({1, 1, 10}, {1, 1, 4}, 4);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->size(), 3U);
  EXPECT_EQ(last->back().coord, (Shape{0, 0, 8}));
  EXPECT_EQ(last->back().bytes, 8U);

  EXPECT_FALSE(contiguous_chunks({4, 6}, {2, 3}, 4));  // a chunk is two ranges
  EXPECT_FALSE(contiguous_chunks({4, 6}, {8, 6}, 4));  // larger than the dataset
  EXPECT_FALSE(contiguous_chunks({4, 6}, {4}, 4));
  EXPECT_FALSE(contiguous_chunks({0, 6}, {1, 6}, 4));
  EXPECT_FALSE(contiguous_chunks({}, {}, 4));
  EXPECT_FALSE(contiguous_chunks({1ULL << 40, 1ULL << 40}, {1, 1ULL << 40}, 8));  // overflows
  EXPECT_FALSE(contiguous_chunks({1ULL << 30}, {1}, 1));  // too many chunks to plan
}

TEST(CkptChunking, TheChunksOfEveryChunkShapeTileTheArrayInOrder) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 500; ++trial) {
    Shape shape(1 + random() % 4);
    for (auto& extent : shape)
      extent = 1 + random() % 9;
    const std::size_t element = std::size_t{1} << (random() % 4);
    const Shape chunk = chunk_shape(shape, element, 1 + random() % 200);
    const auto spans = contiguous_chunks(shape, chunk, element);
    ASSERT_TRUE(spans) << trial;  // chunk_shape() always makes contiguous chunks
    std::uint64_t at = 0;
    for (const ChunkSpan& span : *spans) {
      EXPECT_EQ(span.out_offset, at);
      EXPECT_LE(span.bytes, span.stored_bytes);
      EXPECT_EQ(span.stored_bytes, element_count(chunk) * element);
      at += span.bytes;
    }
    EXPECT_EQ(at, element_count(shape) * element) << trial;
  }
}

// Reference: element by element over the global index space.
void naive_copy(std::size_t element, const std::vector<std::uint8_t>& src, const Shape& so,
                const Shape& ss, std::vector<std::uint8_t>& dst, const Shape& doff,
                const Shape& ds) {
  const std::size_t n = ss.size();
  Shape lo(n), hi(n);
  for (std::size_t d = 0; d < n; ++d) {
    lo[d] = std::max(so[d], doff[d]);
    hi[d] = std::min(so[d] + ss[d], doff[d] + ds[d]);
    if (lo[d] >= hi[d]) return;
  }
  Shape idx = lo;
  while (true) {
    std::uint64_t s = 0, t = 0;
    for (std::size_t d = 0; d < n; ++d) {
      s = s * ss[d] + (idx[d] - so[d]);
      t = t * ds[d] + (idx[d] - doff[d]);
    }
    std::copy_n(&src[s * element], element, &dst[t * element]);
    std::size_t d = n;
    while (d > 0) {
      --d;
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
      if (d == 0) return;
    }
  }
}

TEST(CkptBoxCopy, MatchesAnElementByElementCopyOnRandomBoxes) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t n = 1 + rng() % 4;
    const std::size_t element = std::size_t{1} << (rng() % 4);
    Shape so(n), ss(n), doff(n), ds(n);
    for (std::size_t d = 0; d < n; ++d) {
      so[d] = rng() % 5;
      ss[d] = 1 + rng() % 5;
      doff[d] = rng() % 5;
      ds[d] = 1 + rng() % 5;
    }
    std::vector<std::uint8_t> src(element_count(ss) * element);
    for (auto& b : src)
      b = static_cast<std::uint8_t>(rng());
    std::vector<std::uint8_t> want(element_count(ds) * element, 0xEE);
    std::vector<std::uint8_t> got = want;
    naive_copy(element, src, so, ss, want, doff, ds);
    copy_overlap(element, src.data(), so, ss, got.data(), doff, ds);
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

TEST(CkptCrc32c, KnownValueAndIncrementalUpdates) {
  const std::string text = "123456789";
  EXPECT_EQ(crc32c(text.data(), text.size()), 0xE3069283U);  // the CRC-32C check value
  Crc32c crc;
  crc.update(text.data(), 4);
  crc.update(text.data() + 4, 5);
  EXPECT_EQ(crc.value(), 0xE3069283U);
  EXPECT_EQ(crc32c(nullptr, 0), 0U);
  EXPECT_EQ(crc_hex(0xE3069283U), "e3069283");
  EXPECT_EQ(parse_crc_hex("e3069283"), 0xE3069283U);
  EXPECT_EQ(parse_crc_hex("E3069283"), std::nullopt);
}

RankIndex rank_index(int rank, int world, std::uint64_t rows_each) {
  RankIndex index;
  index.step = 10;
  index.rank = rank;
  index.world_size = world;
  TensorPart shard{"w",
                   DType::kFloat32,
                   {rows_each * world, 3},
                   {rows_each * rank, 0},
                   {rows_each, 3},
                   "/tensors/w",
                   0x1000U + static_cast<unsigned>(rank)};
  index.parts.push_back(shard);
  if (rank == 0) {
    index.parts.push_back(TensorPart{"bias", DType::kBFloat16, {3}, {0}, {3}, "/tensors/bias", 7});
  }
  index.state["rng"] = 42;
  return index;
}

std::vector<FileEntry> files_for(int world) {
  std::vector<FileEntry> files;
  for (int r = 0; r < world; ++r)
    files.push_back(FileEntry{rank_file_name(r), r, 1000U + static_cast<unsigned>(r)});
  return files;
}

TEST(CkptManifest, BuildsFromRankIndexesAndRoundTripsThroughJson) {
  const std::vector<RankIndex> ranks = {rank_index(0, 2, 2), rank_index(1, 2, 2)};
  const Manifest manifest = build_manifest(10, 2, ranks, files_for(2), "2026-11-30T00:00:00Z");
  ASSERT_EQ(manifest.tensors.size(), 2U);
  EXPECT_EQ(manifest.tensors.at("w").shards.size(), 2U);
  EXPECT_EQ(manifest.tensors.at("w").shards[1].offset, (Shape{2, 0}));
  EXPECT_EQ(manifest.total_bytes(), 2001U);

  const Manifest back = parse_manifest(to_json(manifest), "m");
  EXPECT_EQ(back.step, 10);
  EXPECT_EQ(back.tensors.at("bias").dtype, DType::kBFloat16);
  EXPECT_EQ(back.tensors.at("w").shards[1].crc32c, 0x1001U);
  EXPECT_EQ(to_json(back), to_json(manifest));

  const RankIndex index = parse_rank_index(to_json(ranks[0]), "r");
  EXPECT_EQ(index.parts.size(), 2U);
  EXPECT_EQ(index.state.at("rng"), 42U);
}

TEST(CkptManifest, AnyChangedByteIsDetected) {
  const Manifest manifest = build_manifest(10, 2, {rank_index(0, 2, 2), rank_index(1, 2, 2)},
                                           files_for(2), "2026-11-30T00:00:00Z");
  const std::string text = to_json(manifest);
  int detected = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    try {
      parse_manifest(bad, "m");
    } catch (const CorruptCheckpoint&) {
      ++detected;
      continue;
    }
    // Only whitespace may change without consequence (newline <-> other control bytes would
    // already be invalid JSON).
    EXPECT_TRUE(text[i] == ' ' || text[i] == '\n') << "byte " << i << " '" << text[i] << "'";
  }
  EXPECT_GT(detected, static_cast<int>(text.size()) * 9 / 10);
}

TEST(CkptManifest, RefusesFilesOutsideTheDirectory) {
  const Manifest manifest = build_manifest(10, 1, {rank_index(0, 1, 2)}, files_for(1), "t");
  std::string text = to_json(manifest);
  // Rewrite the file name and recompute the checksum, as an attacker could.
  Manifest evil = manifest;
  evil.files[0].name = "../../etc/passwd";
  EXPECT_THROW(parse_manifest(to_json(evil), "m"), CorruptCheckpoint);
  evil = manifest;
  evil.tensors.at("w").shards[0].file = "/etc/passwd";
  EXPECT_THROW(parse_manifest(to_json(evil), "m"), CorruptCheckpoint);
  evil = manifest;
  evil.tensors.at("w").shards[0].dataset = "/state/../x";
  EXPECT_THROW(parse_manifest(to_json(evil), "m"), CorruptCheckpoint);
  EXPECT_THROW(parse_manifest("not json", "m"), CorruptCheckpoint);
  EXPECT_THROW(parse_manifest("{\"manifest\": 1}", "m"), CorruptCheckpoint);
}

TEST(CkptManifest, RanksMustAgreeAndCoverEveryTensorOnce) {
  auto ranks = std::vector<RankIndex>{rank_index(0, 2, 2), rank_index(1, 2, 2)};
  auto expect_refused = [&](std::vector<RankIndex> r, const std::string& words) {
    try {
      build_manifest(10, 2, r, files_for(2), "t");
      ADD_FAILURE() << "accepted: " << words;
    } catch (const CorruptCheckpoint& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  auto twice = ranks;
  twice[1].parts.push_back(twice[0].parts[1]);  // the replicated bias written by rank 1 too
  expect_refused(twice, "tensor 'bias' is written twice");
  auto gap = ranks;
  gap[1].parts[0].shape = {1, 3};
  expect_refused(gap, "do not cover its global shape");
  auto dtype = ranks;
  dtype[1].parts[0].dtype = DType::kFloat64;
  expect_refused(dtype, "disagree on the dtype or global shape of tensor 'w'");
  auto step = ranks;
  step[1].step = 9;
  expect_refused(step, "rank-00001.h5 was written for step 9");
  auto outside = ranks;
  outside[1].parts[0].offset = {3, 0};
  expect_refused(outside, "lies outside its global shape");
  EXPECT_THROW(build_manifest(10, 3, ranks, files_for(2), "t"), CorruptCheckpoint);
}

// World `rows` x `cols`: rank k holds block (k / cols, k % cols), 2 x 3 elements, of "g".
std::vector<RankIndex> grid_indexes(std::uint64_t rows, std::uint64_t cols) {
  std::vector<RankIndex> ranks;
  const int world = static_cast<int>(rows * cols);
  for (int k = 0; k < world; ++k) {
    RankIndex index;
    index.step = 10;
    index.rank = k;
    index.world_size = world;
    const std::uint64_t r = static_cast<std::uint64_t>(k) / cols;
    const std::uint64_t c = static_cast<std::uint64_t>(k) % cols;
    index.parts.push_back(TensorPart{"g",
                                     DType::kFloat32,
                                     {rows * 2, cols * 3},
                                     {r * 2, c * 3},
                                     {2, 3},
                                     "/tensors/g",
                                     static_cast<std::uint32_t>(k)});
    ranks.push_back(index);
  }
  return ranks;
}

// The overlap check sweeps along the dimension with the most distinct offsets, so that column
// shards and grids (tensor parallelism) cost about as little as row shards, and an overlap in any
// of them is found.
TEST(CkptManifest, OverlapsAreFoundInColumnAndGridLayoutsOfManyParts) {
  for (const auto& [rows, cols] :
       {std::pair<std::uint64_t, std::uint64_t>{1, 4096}, {4096, 1}, {64, 64}, {3, 5}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    const int world = static_cast<int>(rows * cols);
    auto ranks = grid_indexes(rows, cols);
    EXPECT_NO_THROW(build_manifest(10, world, ranks, files_for(world), "t"));
    // The last part moved onto the first: one overlap, one gap, same element count.
    ranks.back().parts[0].offset = {0, 0};
    try {
      build_manifest(10, world, ranks, files_for(world), "t");
      ADD_FAILURE() << "an overlap was accepted";
    } catch (const CorruptCheckpoint& e) {
      EXPECT_NE(std::string(e.what()).find("written twice"), std::string::npos) << e.what();
    }
    // A part that overlaps its neighbour by one element only.
    ranks = grid_indexes(rows, cols);
    if (cols > 1) {
      ranks[1].parts[0].offset[1] -= 1;
    } else {
      ranks[1].parts[0].offset[0] -= 1;
    }
    EXPECT_THROW(build_manifest(10, world, ranks, files_for(world), "t"), CorruptCheckpoint);
  }
}

// A document nested deeper than any Primus writes is refused while it is parsed (a valid array
// nested 200,000 deep overflowed the stack in the recursive dump() of the checksum check).
TEST(CkptManifest, DeeplyNestedDocumentsAreRefused) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const std::string& text : {"{\"manifest\": " + deep + ", \"crc32c\": \"00000000\"}", deep}) {
    try {
      parse_manifest(text, "m");
      ADD_FAILURE() << "accepted";
    } catch (const CorruptCheckpoint& e) {
      EXPECT_NE(std::string(e.what()).find("nested deeper"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_rank_index(text, "r"), CorruptCheckpoint);
  }
  // What Primus writes still parses.
  const Manifest manifest =
      build_manifest(10, 2, {rank_index(0, 2, 2), rank_index(1, 2, 2)}, files_for(2), "t");
  EXPECT_NO_THROW(parse_manifest(to_json(manifest), "m"));
}

TEST(CkptRetention, KeepsTheNewestEveryKthAndLatest) {
  const std::vector<std::int64_t> steps = {10, 20, 30, 40, 50, 60};
  EXPECT_EQ(steps_to_prune(steps, 2, 0, std::nullopt), (std::vector<std::int64_t>{40, 30, 20, 10}));
  EXPECT_EQ(steps_to_prune(steps, 2, 20, std::nullopt), (std::vector<std::int64_t>{30, 10}));
  EXPECT_EQ(steps_to_prune(steps, 1, 0, 30), (std::vector<std::int64_t>{50, 40, 20, 10}));
  EXPECT_EQ(steps_to_prune(steps, 0, 0, std::nullopt).size(), 6U);
  EXPECT_TRUE(steps_to_prune(steps, 10, 0, std::nullopt).empty());
}

}  // namespace
}  // namespace primus::ckpt
