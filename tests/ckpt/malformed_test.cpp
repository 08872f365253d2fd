// Malformed checkpoints that the unit tests (tests/unit/ckpt_files_test.cpp) do not cover:
// roots made of random bytes, damage to every part of a rank file's HDF5 metadata, valid HDF5
// files of other layouts, and manifests (with a correct checksum) that name files outside their
// directory. Every one must end in a clean primus::Error (CorruptCheckpoint where the API says
// so), never a crash; under --enable-sanitizers also no memory error or undefined behaviour.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdio.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "crash_common.hpp"
#include "primus/ckpt.hpp"
#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "primus-malformed-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string random_bytes(std::size_t size, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes)
    c = static_cast<char>(generator() & 0xFF);
  return bytes;
}

// Step `step` of crash-writer's checkpoint (two ranks, a sharded and a replicated tensor,
// state), committed under root.
void save(const fs::path& root, std::int64_t step) {
  const std::uint64_t rows = 64;
  WriteOptions options;
  options.chunk_bytes = 4096;
  for (int rank = 0; rank < crash::kWorld; ++rank) {
    RankWriter writer(root, step, rank, crash::kWorld, options);
    crash::write_rank(writer, step, rank, rows, step);
  }
  commit(root, step, crash::kWorld);
}

// Everything a reader does with a root and its step directories; each call may fail with
// primus::Error, nothing else. Returns how many checkpoints loaded.
int exercise(const fs::path& root) {
  int loaded_count = 0;
  EXPECT_NO_THROW(read_latest(root));
  std::vector<StepEntry> steps;
  EXPECT_NO_THROW(steps = list_steps(root));
  for (const StepEntry& entry : steps) {
    for (const Verify verify : {Verify::kQuick, Verify::kFull}) {
      try {
        verify_problems(entry.dir, verify);
      } catch (const Error&) {
      }
      try {
        const Checkpoint ckpt = Checkpoint::open(entry.dir, verify);
        ++loaded_count;
        for (const auto& [name, tensor] : ckpt.manifest().tensors) {
          try {
            ckpt.read(name);
            if (!tensor.global_shape.empty() && tensor.global_shape[0] > 1) {
              ckpt.read_rows(name, 1, tensor.global_shape[0]);
            }
          } catch (const Error&) {
          }
        }
        for (int rank = 0; rank < ckpt.world_size(); ++rank) {
          try {
            ckpt.state(rank);
          } catch (const Error&) {
          }
        }
      } catch (const Error&) {
      }
    }
  }
  std::vector<std::string> skipped;
  EXPECT_NO_THROW(load_latest(root, Verify::kFull, &skipped));
  EXPECT_NO_THROW(load_latest(root, Verify::kQuick, &skipped));
  return loaded_count;
}

// The manifest of dir, changed by `edit` and written back with a correct checksum.
void rewrite_manifest(const fs::path& dir, const std::function<void(Manifest&)>& edit) {
  Manifest manifest = parse_manifest(read_bytes(dir / "manifest.json"), "test");
  edit(manifest);
  write_bytes(dir / "manifest.json", to_json(manifest));
}

TEST(CkptMalformed, ARootOfRandomBytesLoadsNothingAndSaysWhy) {
  TempDir root;
  write_bytes(root.path() / "LATEST", random_bytes(40, 1));
  for (int i = 1; i <= 6; ++i) {
    const fs::path dir = root.path() / step_dir_name(i);
    fs::create_directory(dir);
    write_bytes(dir / "manifest.json", random_bytes(100 * i, 10 + i));
    for (int rank = 0; rank < 2; ++rank)
      write_bytes(dir / rank_file_name(rank), random_bytes(5000 * i, 20 + 2 * i + rank));
  }
  // Random bytes where directories belong, and a leftover temporary.
  write_bytes(root.path() / step_dir_name(7), random_bytes(512, 3));
  fs::create_directory(root.path() / temporary_dir_name(8));
  write_bytes(root.path() / temporary_dir_name(8) / rank_file_name(0), random_bytes(4096, 4));
  // A manifest that is JSON, with a checksum, but not a manifest.
  write_bytes(root.path() / step_dir_name(6) / "manifest.json",
              "{\"crc32c\": \"00000000\", \"manifest\": [1, 2, {\"step\": -1}]}\n");

  EXPECT_EQ(exercise(root.path()), 0);
  EXPECT_FALSE(read_latest(root.path()));
  std::vector<std::string> skipped;
  EXPECT_FALSE(load_latest(root.path(), Verify::kFull, &skipped));
  ASSERT_EQ(skipped.size(), 6U);  // the step-* directories, newest first; never the file
  EXPECT_NE(skipped[0].find("step-000000000006/manifest.json"), std::string::npos) << skipped[0];
  for (int i = 1; i <= 6; ++i)
    EXPECT_FALSE(verify_problems(root.path() / step_dir_name(i), Verify::kFull).empty());
  // Retention copes with it too (and keeps the file that is not a directory alone).
  EXPECT_NO_THROW(prune(root.path(), 1));
  EXPECT_TRUE(fs::exists(root.path() / step_dir_name(7)));
}

TEST(CkptMalformed, RandomRankFilesOfEverySizeErrorCleanly) {
  TempDir root;
  save(root.path(), 1);
  const fs::path dir = root.path() / step_dir_name(1);
  const std::string good = read_bytes(dir / rank_file_name(1));
  // Sizes around HDF5's superblock and object headers, each also recorded in the manifest so
  // that opening the file, not the size check, has to catch it.
  for (const std::size_t size : {0UL, 1UL, 8UL, 95UL, 96UL, 512UL, 2048UL, good.size()}) {
    for (std::uint32_t seed = 0; seed < 3; ++seed) {
      std::string bytes = random_bytes(size, seed * 1000 + static_cast<std::uint32_t>(size));
      if (seed == 1 && size >= 8) bytes.replace(0, 8, good.substr(0, 8));  // HDF5's signature
      if (seed == 2) bytes = good.substr(0, std::min(size, good.size()));  // a torn file
      if (seed == 2 && size == good.size()) continue;
      write_bytes(dir / rank_file_name(1), bytes);
      rewrite_manifest(dir, [&](Manifest& m) { m.files[1].size = bytes.size(); });
      SCOPED_TRACE("size " + std::to_string(size) + " seed " + std::to_string(seed));
      EXPECT_FALSE(verify_problems(dir, Verify::kFull).empty());
      EXPECT_THROW(Checkpoint::open(dir, Verify::kQuick), CorruptCheckpoint);
      EXPECT_FALSE(load_latest(root.path(), Verify::kFull));
    }
  }
}

// Damage in the HDF5 metadata at the head of a rank file: the superblock, the root group's and
// /tensors' object headers, B-trees and heaps (the raw data is covered by the CRC32C tests;
// damage to a state dataset's dataspace is CkptHostile.AHugeStateDatasetIsRefusedCleanly). Each
// damaged file must either be refused or, where the byte is unused, still read exactly.
TEST(CkptMalformed, DamagedHdf5MetadataIsRefusedOrHarmless) {
  TempDir root;
  save(root.path(), 1);
  const fs::path dir = root.path() / step_dir_name(1);
  const fs::path file = dir / rank_file_name(0);
  const std::string good = read_bytes(file);
  std::vector<std::size_t> offsets;
  for (std::size_t at = 0; at < 6144 && at < good.size(); at += 13)
    offsets.push_back(at);
  int refused = 0;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    const std::size_t at = offsets[i];
    const unsigned char pattern = i % 2 == 0 ? 0xFF : 0x01;  // every bit, or the lowest
    std::string bad = good;
    bad[at] = static_cast<char>(static_cast<unsigned char>(bad[at]) ^ pattern);
    write_bytes(file, bad);
    SCOPED_TRACE("byte " + std::to_string(at) + " ^ " + std::to_string(pattern));
    if (!verify_problems(dir, Verify::kFull).empty()) {
      ++refused;
      EXPECT_NO_THROW(EXPECT_FALSE(load_latest(root.path(), Verify::kFull)));
      continue;
    }
    // Accepted: then every value must still be exact.
    const Checkpoint ckpt = Checkpoint::open(dir, Verify::kFull);
    EXPECT_EQ(ckpt.read("w"), crash::as_bytes(crash::weight_rows(1, 0, 64)));
    EXPECT_EQ(ckpt.read("model/bias"), crash::as_bytes(crash::bias(1)));
    EXPECT_EQ(std::get<std::string>(ckpt.state(0).at("meta")), crash::state_meta(1, 0));
  }
  write_bytes(file, good);
  EXPECT_GT(refused, 50) << "of " << offsets.size();
  EXPECT_TRUE(verify_problems(dir, Verify::kFull).empty());
}

// Helpers for HDF5 files of other layouts.
hid_t create_h5(const fs::path& path) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(file, 0);
  return file;
}

void string_attribute(hid_t object, const char* name, const std::string& value) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, type, value.data());
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

void string_dataset(hid_t parent, const char* name, const std::string& value) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.empty() ? 1 : value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t dataset =
      H5Dcreate2(parent, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data());
  H5Dclose(dataset);
  H5Sclose(space);
  H5Tclose(type);
}

void dataset(hid_t parent, const char* name, hid_t type, const std::vector<hsize_t>& dims,
             const void* data) {
  const hid_t space = dims.empty()
                          ? H5Screate(H5S_SCALAR)
                          : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t d = H5Dcreate2(parent, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(d, 0) << name;
  if (data != nullptr) H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Sclose(space);
}

// The index (JSON) a rank file carries.
std::string read_index(const fs::path& path) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(file, "primus_index", H5P_DEFAULT);
  const hid_t type = H5Dget_type(d);
  std::string text(H5Tget_size(type), '\0');
  H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data());
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(file);
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  return text;
}

// Replaces rank `rank`'s file of a committed checkpoint by what `build` makes of a new HDF5
// file (given the genuine index, as JSON), and records its size in the manifest. Then a
// reader must refuse the checkpoint cleanly.
class OtherLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    save(root_.path(), 1);
    dir_ = root_.path() / step_dir_name(1);
    index_json_ = read_index(dir_ / rank_file_name(0));
  }

  void replace(const std::function<void(hid_t)>& build) {
    const fs::path path = dir_ / rank_file_name(0);
    const hid_t file = create_h5(path);
    build(file);
    H5Fclose(file);
    rewrite_manifest(dir_, [&](Manifest& m) { m.files[0].size = fs::file_size(path); });
  }

  void expect_refused(const std::string& want) {
    const auto problems = verify_problems(dir_, Verify::kFull);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems.front().find(rank_file_name(0)), std::string::npos) << problems.front();
    EXPECT_NE(problems.front().find(want), std::string::npos) << problems.front();
    EXPECT_THROW(Checkpoint::open(dir_, Verify::kFull), CorruptCheckpoint);
    EXPECT_FALSE(load_latest(root_.path(), Verify::kFull));
    exercise(root_.path());
  }

  TempDir root_;
  fs::path dir_;
  std::string index_json_;
};

TEST_F(OtherLayout, FormatAttributeOfAnotherType) {
  replace([&](hid_t file) {
    const std::int64_t one = 1;
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr =
        H5Acreate2(file, "primus_format", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, H5T_NATIVE_INT64, &one);
    H5Aclose(attr);
    H5Sclose(space);
    string_dataset(file, "primus_index", index_json_);
  });
  expect_refused("primus_format");
}

TEST_F(OtherLayout, AnotherFormatName) {
  replace([&](hid_t file) {
    string_attribute(file, "primus_format", "primus-ckpt-rank-v2");
    string_dataset(file, "primus_index", index_json_);
  });
  expect_refused("not a Primus rank file");
}

TEST_F(OtherLayout, NoIndex) {
  replace([&](hid_t file) { string_attribute(file, "primus_format", "primus-ckpt-rank"); });
  expect_refused("primus_index");
}

TEST_F(OtherLayout, IndexOfAnotherType) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    replace([&](hid_t file) {
      string_attribute(file, "primus_format", "primus-ckpt-rank");
      if (variant == 0) {  // integers
        const std::vector<std::int32_t> values(16, 7);
        dataset(file, "primus_index", H5T_STD_I32LE, {16}, values.data());
      } else if (variant == 1) {  // an array of strings
        const hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, index_json_.size());
        const std::string two = index_json_ + index_json_;
        dataset(file, "primus_index", type, {2}, two.data());
        H5Tclose(type);
      } else if (variant == 2) {  // a variable-length string
        const hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, H5T_VARIABLE);
        const char* text = index_json_.c_str();
        dataset(file, "primus_index", type, {}, &text);
        H5Tclose(type);
      } else {  // a group
        H5Gclose(H5Gcreate2(file, "primus_index", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      }
    });
    expect_refused("primus_index");
  }
}

TEST_F(OtherLayout, IndexThatIsNotJsonOrNotAnIndex) {
  for (const std::string& text :
       {std::string("not json at all"), std::string("{\"format\": \"primus-ckpt-rank\"}"),
        std::string("[]"), std::string(100000, '['), index_json_.substr(0, 40)}) {
    SCOPED_TRACE(text.substr(0, 40));
    replace([&](hid_t file) {
      string_attribute(file, "primus_format", "primus-ckpt-rank");
      string_dataset(file, "primus_index", text);
    });
    expect_refused("primus_index");
  }
}

// The genuine index, but the tensor datasets are missing or of another kind.
TEST_F(OtherLayout, TensorDatasetsMissingOrOfAnotherKind) {
  const std::vector<float> w = crash::weight_rows(1, 0, 32);
  const std::vector<std::int32_t> ints(32 * crash::kCols, 1);
  const std::vector<double> doubles(32 * crash::kCols, 1.0);
  const std::vector<std::function<void(hid_t)>> variants = {
      [](hid_t) {},        // no /tensors at all
      [](hid_t tensors) {  // a group where the dataset belongs
        H5Gclose(H5Gcreate2(tensors, "w", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      },
      [&](hid_t tensors) {
        dataset(tensors, "w", H5T_STD_I32LE, {32, crash::kCols}, ints.data());
      },
      [&](hid_t tensors) {
        dataset(tensors, "w", H5T_IEEE_F64LE, {32, crash::kCols}, doubles.data());
      },
      [&](hid_t tensors) {
        dataset(tensors, "w", H5T_IEEE_F32BE, {32, crash::kCols}, w.data());
      },
      [&](hid_t tensors) {
        dataset(tensors, "w", H5T_IEEE_F32LE, {crash::kCols, 32}, w.data());
      },
      [&](hid_t tensors) {
        dataset(tensors, "w", H5T_IEEE_F32LE, {32, crash::kCols, 1}, w.data());
      },
      [&](hid_t tensors) { dataset(tensors, "w", H5T_IEEE_F32LE, {}, w.data()); },
      [&](hid_t tensors) {  // right type and shape, but the values of another step
        const std::vector<float> other = crash::weight_rows(2, 0, 32);
        dataset(tensors, "w", H5T_IEEE_F32LE, {32, crash::kCols}, other.data());
      },
  };
  for (std::size_t v = 0; v < variants.size(); ++v) {
    SCOPED_TRACE("variant " + std::to_string(v));
    replace([&](hid_t file) {
      string_attribute(file, "primus_format", "primus-ckpt-rank");
      string_dataset(file, "primus_index", index_json_);
      if (v == 0) return;
      const hid_t tensors = H5Gcreate2(file, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      variants[v](tensors);
      const std::vector<float> bias = crash::bias(1);
      dataset(tensors, "model%2Fbias", H5T_IEEE_F32LE, {crash::kBiasSize}, bias.data());
      H5Gclose(tensors);
    });
    expect_refused("/tensors/");
  }
}

// A manifest with a correct checksum that points outside its directory.
class OutsideTheDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    save(root_.path(), 1);
    save(root_.path(), 2);
    dir_ = root_.path() / step_dir_name(2);
    // What a path outside the step directory would reach: a valid rank file of step 2.
    fs::create_directory(root_.path() / "elsewhere");
    fs::copy_file(dir_ / rank_file_name(0), root_.path() / "elsewhere" / rank_file_name(0));
  }

  // Refused with a message naming the manifest; load falls back to step 1.
  void expect_refused(const std::function<void(Manifest&)>& edit, const std::string& want) {
    const std::string genuine = read_bytes(dir_ / "manifest.json");
    rewrite_manifest(dir_, edit);
    const auto problems = verify_problems(dir_, Verify::kFull);
    ASSERT_EQ(problems.size(), 1U);
    EXPECT_NE(problems[0].find("manifest.json"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find(want), std::string::npos) << problems[0];
    EXPECT_THROW(Checkpoint::open(dir_), CorruptCheckpoint);
    std::vector<std::string> skipped;
    const auto loaded = load_latest(root_.path(), Verify::kFull, &skipped);
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->checkpoint.step(), 1);
    EXPECT_EQ(skipped.size(), 1U);
    EXPECT_FALSE(load_step(root_.path(), 2, Verify::kQuick));
    write_bytes(dir_ / "manifest.json", genuine);
  }

  TempDir root_;
  fs::path dir_;
};

TEST_F(OutsideTheDirectory, FileNamesThatAreNotThisDirectorysRankFiles) {
  const std::string outside = (root_.path() / "elsewhere" / rank_file_name(0)).string();
  for (const std::string& name :
       {std::string("../elsewhere/rank-00000.h5"), outside, std::string("./rank-00000.h5"),
        std::string("rank-00000.h5/"), std::string("rank-00000.h5/../rank-00000.h5"),
        std::string("../step-000000000001/rank-00000.h5"), std::string("rank-0000.h5"),
        std::string("rank-00000.h5\n"), std::string("rank-00000.h5") + '\0' + "x",
        std::string("rank-00000.h5.tmp"), std::string("RANK-00000.H5"), std::string("")}) {
    SCOPED_TRACE(name);
    // (An error message ends at a NUL in the name: std::runtime_error keeps a C string.)
    const bool nul = name.find('\0') != std::string::npos;
    expect_refused([&](Manifest& m) { m.files[0].name = name; },
                   nul ? "file 'rank-00000.h5" : "is not rank 0's file");
    expect_refused(
        [&](Manifest& m) {
          for (Shard& shard : m.tensors.at("w").shards) {
            if (shard.rank == 0) shard.file = name;
          }
        },
        nul ? "points at 'rank-00000.h5" : "not a rank file of this directory");
  }
}

TEST_F(OutsideTheDirectory, AnotherRanksFileUnderThisRanksName) {
  expect_refused([](Manifest& m) { m.files[0].name = rank_file_name(1); }, "is not rank 0's file");
  expect_refused([](Manifest& m) { m.files[0].rank = 5; }, "out of range");
}

TEST_F(OutsideTheDirectory, DatasetsOutsideTheTensorGroup) {
  for (const std::string& dataset :
       {std::string("/state/step"), std::string("/tensors/../state/step"), std::string("/"),
        std::string("/tensors/"), std::string("tensors/w"), std::string("/primus_index"),
        std::string("/tensors/w/x"), std::string("//tensors/w")}) {
    SCOPED_TRACE(dataset);
    expect_refused([&](Manifest& m) { m.tensors.at("w").shards[0].dataset = dataset; },
                   "is not under /tensors/");
  }
}

// The right names, but symbolic links to files elsewhere: refused (a checkpoint directory
// holds its own files).
TEST_F(OutsideTheDirectory, SymbolicLinksAreNotFollowed) {
  // A rank file that is a link to an identical copy outside.
  fs::remove(dir_ / rank_file_name(0));
  fs::create_symlink(root_.path() / "elsewhere" / rank_file_name(0), dir_ / rank_file_name(0));
  auto problems = verify_problems(dir_, Verify::kQuick);
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_NE(problems[0].find("not a regular file"), std::string::npos) << problems[0];
  EXPECT_EQ(load_latest(root_.path(), Verify::kFull)->checkpoint.step(), 1);

  // A manifest that is a link.
  fs::copy_file(dir_ / "manifest.json", root_.path() / "elsewhere" / "manifest.json");
  fs::remove(dir_ / "manifest.json");
  fs::create_symlink(root_.path() / "elsewhere" / "manifest.json", dir_ / "manifest.json");
  problems = verify_problems(dir_, Verify::kQuick);
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_NE(problems[0].find("manifest.json"), std::string::npos) << problems[0];

  // A step directory that is a link to a valid checkpoint elsewhere: not listed.
  fs::rename(root_.path() / step_dir_name(1), root_.path() / "elsewhere" / step_dir_name(3));
  fs::create_directory_symlink(root_.path() / "elsewhere" / step_dir_name(3),
                               root_.path() / step_dir_name(3));
  const std::vector<StepEntry> steps = list_steps(root_.path());
  ASSERT_EQ(steps.size(), 1U);
  EXPECT_EQ(steps[0].step, 2);
  EXPECT_FALSE(load_latest(root_.path(), Verify::kFull));
  exercise(root_.path());
}

// Hostile or damaged files that once got past the library (found by these tests, now fixed):
// overflowing sizes, shards that do not tile, huge dataspaces, data from outside the directory.

// A committed checkpoint of `global_shape` float32 elements of which one rank writes
// `shape` at `offset`, with a manifest listing just that shard (a crafted manifest: commit
// would refuse the tiling). Returns the step directory.
fs::path one_shard_checkpoint(const fs::path& root, const Shape& global_shape, const Shape& offset,
                              const Shape& shape) {
  const std::vector<float> data(element_count(shape), 1.5F);
  fs::path file;
  {
    RankWriter writer(root, 1, 0, 1);
    writer.add_tensor({"t", DType::kFloat32, shape, data.data(), global_shape, offset});
    file = writer.finish();
  }
  const RankIndex index = parse_rank_index(read_index(file), file.string());
  Manifest manifest;
  manifest.step = 1;
  manifest.world_size = 1;
  manifest.created = "2026-01-01T00:00:00Z";
  manifest.files = {FileEntry{rank_file_name(0), 0, fs::file_size(file)}};
  const TensorPart& part = index.parts.at(0);
  TensorEntry tensor{"t", DType::kFloat32, global_shape, {}};
  tensor.shards.push_back(
      Shard{0, rank_file_name(0), part.dataset, part.offset, part.shape, part.crc32c});
  manifest.tensors.emplace("t", tensor);
  write_bytes(file.parent_path() / "manifest.json", to_json(manifest));
  const fs::path dir = root / step_dir_name(1);
  fs::rename(file.parent_path(), dir);
  return dir;
}

// Checkpoint::read sizes its buffer as element_count(box) * dtype_size, which wraps around
// 64 bits for a global shape of 2^62 + 1 float32 elements: 4 bytes, into which copy_overlap
// then writes the shard at offset 1000, 4000 bytes further (a heap buffer overflow; ASan:
// heap-buffer-overflow in copy_overlap, ckpt/box_copy.cpp). parse_manifest checks that the
// element count fits 64 bits, not the byte count, nor that the shards tile the tensor.
TEST(CkptHostile, AGlobalShapeWhoseByteSizeOverflowsIsRefused) {
  TempDir root;
  const fs::path dir =
      one_shard_checkpoint(root.path(), {(std::uint64_t{1} << 62) + 1}, {1000}, {1});
  EXPECT_THROW(
      {
        const Checkpoint ckpt = Checkpoint::open(dir, Verify::kFull);
        ckpt.read("t");
      },
      Error);
}

// The format says that the shards of a tensor tile its global shape exactly; the reader does
// not check it (parse_manifest, Checkpoint::open): a manifest without rank 1's shard of "w"
// opens, verifies, and reads rank 1's rows as zeros.
TEST(CkptHostile, ShardsThatDoNotTileTheTensorAreRefused) {
  TempDir root;
  save(root.path(), 1);
  const fs::path dir = root.path() / step_dir_name(1);
  const std::string good = read_bytes(dir / "manifest.json");
  rewrite_manifest(dir, [](Manifest& m) { m.tensors.at("w").shards.pop_back(); });
  EXPECT_FALSE(verify_problems(dir, Verify::kFull).empty());
  EXPECT_THROW(
      {
        const Checkpoint ckpt = Checkpoint::open(dir, Verify::kFull);
        ckpt.read("w");
      },
      Error);
  // Two shards over the same rows.
  write_bytes(dir / "manifest.json", good);
  rewrite_manifest(dir, [](Manifest& m) {
    Shard copy = m.tensors.at("w").shards.front();
    m.tensors.at("w").shards.push_back(copy);
  });
  EXPECT_FALSE(verify_problems(dir, Verify::kFull).empty());
}

// Opens rank 0's file of step `step` under root for writing, lets `edit` change it, and records
// its new size in the manifest (whose checksum stays right): a crafted rank file.
void edit_rank_file(const fs::path& root, std::int64_t step,
                    const std::function<void(hid_t)>& edit) {
  const fs::path dir = root / step_dir_name(step);
  const fs::path file = dir / rank_file_name(0);
  const hid_t h5 = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(h5, 0);
  edit(h5);
  ASSERT_GE(H5Fclose(h5), 0);
  rewrite_manifest(dir, [&](Manifest& m) { m.files[0].size = fs::file_size(file); });
}

// Every reader of `root` must report step 2 corrupt, naming `want`, and fall back to step 1.
void expect_step_2_refused(const fs::path& root, const std::string& want) {
  std::vector<std::string> problems;
  EXPECT_NO_THROW(problems = verify_problems(root / step_dir_name(2), Verify::kFull));
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find(want), std::string::npos) << problems.front();
  EXPECT_THROW(Checkpoint::open(root / step_dir_name(2), Verify::kQuick), CorruptCheckpoint);
  std::optional<Loaded> loaded;
  EXPECT_NO_THROW(loaded = load_latest(root, Verify::kFull));
  EXPECT_TRUE(loaded && loaded->checkpoint.step() == 1);
  exercise(root);
}

// h5::read_string_attribute (ckpt/hdf5.cpp) sized its buffer for one string of the attribute's
// type and let H5Aread fill all of the attribute's elements: a primus_format attribute of 256
// strings of 16 bytes wrote 4 KiB past a 17-byte buffer on every open of the rank file
// (ASan: heap-buffer-overflow in H5Aread's copy). Found by a security review; now every read
// goes through h5::read_exact, which refuses a count that does not fit.
TEST(CkptHostile, AFormatAttributeOfManyStringsIsRefused) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  edit_rank_file(root.path(), 2, [](hid_t file) {
    ASSERT_GE(H5Adelete(file, "primus_format"), 0);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 16);
    const hsize_t dims[1] = {256};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    std::string values;
    for (int i = 0; i < 256; ++i)
      values += "primus-ckpt-rank";  // 16 bytes, no NUL: the first element would match
    const hid_t attr = H5Acreate2(file, "primus_format", type, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(attr, 0);
    ASSERT_GE(H5Awrite(attr, type, values.data()), 0);
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
  });
  expect_step_2_refused(root.path(), "primus_format");
}

// RankFile::state read an 8-byte integer state value with H5Dread into an 8-byte stack buffer,
// whatever the dataset's element count: 512 values of 0x4141... overwrote the stack (in the
// release build a controlled free and return address followed).
TEST(CkptHostile, AnIntegerStateOfManyValuesIsRefused) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  edit_rank_file(root.path(), 2, [](hid_t file) {
    const std::string name = "/state/" + dataset_name("cursor");
    ASSERT_GE(H5Ldelete(file, name.c_str(), H5P_DEFAULT), 0);
    const std::vector<std::int64_t> values(512, 0x4141414141414141);
    dataset(file, name.c_str(), H5T_STD_I64LE, {values.size()}, values.data());
  });
  expect_step_2_refused(root.path(), "512 elements");
}

// A manifest holding a valid array nested 200,000 deep: nlohmann's dump() (which the checksum
// check calls) recursed once per level and overflowed the stack, so the reader died instead of
// falling back. Parsing now refuses documents nested deeper than any Primus writes.
TEST(CkptHostile, ADeeplyNestedManifestIsRefused) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  const fs::path manifest = root.path() / step_dir_name(2) / kManifestName;
  const std::string text = read_bytes(manifest);
  const std::size_t brace = text.find('{', 1);
  ASSERT_NE(brace, std::string::npos);
  const std::size_t depth = 200000;
  write_bytes(manifest, text.substr(0, brace + 1) + "\"x\": " + std::string(depth, '[') +
                            std::string(depth, ']') + ", " + text.substr(brace + 1));
  expect_step_2_refused(root.path(), "nested deeper");
}

// A state value of 8 GiB of zeros, deflated, in a file of a few kilobytes: the storage check
// skipped filtered datasets, so quick verification passed and loading the state allocated and
// inflated 8 GiB. Deflate cannot shrink data more than 1032:1, so the claim is refused before
// anything is allocated, by quick verification too.
TEST(CkptHostile, ACompressionBombIsRefusedBeforeItIsInflated) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  edit_rank_file(root.path(), 2, [](hid_t file) {
    ASSERT_GE(H5Ldelete(file, "/state/rng", H5P_DEFAULT), 0);
    const hsize_t dims[1] = {hsize_t{8} << 30};
    const hsize_t chunk[1] = {hsize_t{1} << 20};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    H5Pset_deflate(dcpl, 9);
    const hid_t d =
        H5Dcreate2(file, "/state/rng", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    const std::vector<std::uint8_t> zeros(chunk[0], 0);
    const hid_t memory = H5Screate_simple(1, chunk, nullptr);
    const hsize_t start[1] = {0};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, chunk, nullptr);
    ASSERT_GE(H5Dwrite(d, H5T_STD_U8LE, memory, space, H5P_DEFAULT, zeros.data()), 0);
    H5Sclose(memory);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
  });
  EXPECT_LT(fs::file_size(root.path() / step_dir_name(2) / rank_file_name(0)), 1u << 20);
  expect_step_2_refused(root.path(), "compressed for");
}

// Only deflate, the one filter Primus writes, is read: any other filter (here HDF5's built-in
// shuffle) is refused, and filter plugins are never loaded.
TEST(CkptHostile, AFilterOtherThanDeflateIsRefused) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  edit_rank_file(root.path(), 2, [](hid_t file) {
    ASSERT_GE(H5Ldelete(file, "/state/rng", H5P_DEFAULT), 0);
    const std::vector<std::uint8_t> rng = crash::state_rng(2, 0);
    const hsize_t dims[1] = {rng.size()};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, dims);
    H5Pset_shuffle(dcpl);
    const hid_t d =
        H5Dcreate2(file, "/state/rng", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    ASSERT_GE(H5Dwrite(d, H5T_STD_U8LE, H5S_ALL, H5S_ALL, H5P_DEFAULT, rng.data()), 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
  });
  expect_step_2_refused(root.path(), "deflate only");
}

// RankFile::state (ckpt/rank_file.cpp) allocates a byte state value's size as the file's
// dataspace says, unbounded: a damaged or crafted /state dataset of 2^42 elements (chunked,
// so the file stays small) makes full verification allocate 4 TiB. std::bad_alloc (or
// std::length_error, or an ASan abort) escapes verify_problems and load_latest, which catch
// only primus::Error, instead of the checkpoint being reported corrupt and skipped. Smaller
// sizes (a flipped bit in the dimension) make it allocate and zero gigabytes.
TEST(CkptHostile, AHugeStateDatasetIsRefusedCleanly) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  const fs::path dir = root.path() / step_dir_name(2);
  const fs::path file = dir / rank_file_name(0);
  {
    const hid_t h5 = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(h5, 0);
    ASSERT_GE(H5Ldelete(h5, "/state/rng", H5P_DEFAULT), 0);
    const hsize_t dims[1] = {hsize_t{1} << 42};
    const hsize_t chunk[1] = {4096};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    const hid_t d =
        H5Dcreate2(h5, "/state/rng", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(h5);
  }
  rewrite_manifest(dir, [&](Manifest& m) { m.files[0].size = fs::file_size(file); });
  std::vector<std::string> problems;
  EXPECT_NO_THROW(problems = verify_problems(dir, Verify::kFull));
  EXPECT_FALSE(problems.empty());
  std::optional<Loaded> loaded;
  EXPECT_NO_THROW(loaded = load_latest(root.path(), Verify::kFull));
  EXPECT_TRUE(loaded && loaded->checkpoint.step() == 1);
}

// HDF5 follows external links and external raw storage: a rank file whose /tensors/w is an
// external link to a dataset in another file, or whose raw data lives in a file outside the
// checkpoint directory, is read from there (with a matching CRC32C it verifies). A checkpoint
// directory should be self-contained, as the manifest's names are.
TEST(CkptHostile, NoTensorDataIsReadFromOutsideTheDirectory) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  const fs::path dir = root.path() / step_dir_name(2);
  const fs::path file = dir / rank_file_name(0);
  const fs::path outside = root.path() / "outside.h5";
  fs::copy_file(file, outside);
  const std::vector<float> rows = crash::weight_rows(2, 0, 32);
  const fs::path raw = root.path() / "outside.raw";
  write_bytes(raw, std::string(reinterpret_cast<const char*>(rows.data()), rows.size() * 4));
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "external link" : "external storage");
    {
      const hid_t h5 = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      ASSERT_GE(h5, 0);
      H5Ldelete(h5, "/tensors/w", H5P_DEFAULT);
      if (variant == 0) {
        ASSERT_GE(H5Lcreate_external(outside.c_str(), "/tensors/w", h5, "/tensors/w", H5P_DEFAULT,
                                     H5P_DEFAULT),
                  0);
      } else {
        const hsize_t dims[2] = {32, crash::kCols};
        const hid_t space = H5Screate_simple(2, dims, nullptr);
        const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_external(dcpl, raw.c_str(), 0, rows.size() * 4);
        const hid_t d =
            H5Dcreate2(h5, "/tensors/w", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        ASSERT_GE(d, 0);
        H5Dclose(d);
        H5Pclose(dcpl);
        H5Sclose(space);
      }
      H5Fclose(h5);
    }
    rewrite_manifest(dir, [&](Manifest& m) { m.files[0].size = fs::file_size(file); });
    EXPECT_FALSE(verify_problems(dir, Verify::kFull).empty());
    const auto loaded = load_latest(root.path(), Verify::kFull);
    EXPECT_TRUE(loaded && loaded->checkpoint.step() == 1);
  }
}

// Shared checkpoint roots: another user who can write the root plants names the writer uses.
// The writer must never write through them (into a file of the planter's choosing, or over a
// file the job's user owns), and refuses a temporary directory that is not its own.
class SharedRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    victim_ = root_.path() / "victim.txt";
    write_bytes(victim_, "precious\n");
    save(root_.path(), 1);
  }
  void expect_victim_intact() { EXPECT_EQ(read_bytes(victim_), "precious\n"); }

  TempDir root_;
  fs::path victim_;
};

TEST_F(SharedRoot, APlantedLatestTmpLinkIsNotWrittenThrough) {
  fs::create_symlink(victim_, root_.path() / "LATEST.tmp");
  save(root_.path(), 2);
  expect_victim_intact();
  EXPECT_EQ(read_latest(root_.path()), 2);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root_.path() / kLatestName)));
}

TEST_F(SharedRoot, APlantedRankFileLinkIsReplacedNotFollowed) {
  const fs::path tmp = root_.path() / temporary_dir_name(2);
  fs::create_directory(tmp);
  fs::permissions(tmp, fs::perms::owner_all);
  fs::create_symlink(victim_, tmp / rank_file_name(0));
  save(root_.path(), 2);
  expect_victim_intact();
  EXPECT_TRUE(verify_problems(root_.path() / step_dir_name(2), Verify::kFull).empty());
}

TEST_F(SharedRoot, ATemporaryDirectoryOthersCanWriteOrALinkIsRefused) {
  const fs::path tmp = root_.path() / temporary_dir_name(2);
  fs::create_directory(tmp);
  fs::permissions(tmp, fs::perms::all);  // 0777: anyone could swap the rank files in it
  try {
    RankWriter writer(root_.path(), 2, 0, 1, WriteOptions{});
    ADD_FAILURE() << "wrote into a directory that others can write";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("can be written by others (mode 777)"), std::string::npos)
        << e.what();
  }
  fs::remove(tmp);
  const fs::path elsewhere = root_.path() / "elsewhere";
  fs::create_directory(elsewhere);
  fs::create_symlink(elsewhere, tmp);
  try {
    RankWriter writer(root_.path(), 2, 0, 1, WriteOptions{});
    ADD_FAILURE() << "wrote through a symbolic link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(elsewhere));
  if (::geteuid() == 0) {  // another user's directory (root can make one; CI runs as root)
    fs::remove(tmp);
    fs::create_directory(tmp);
    fs::permissions(tmp, fs::perms::owner_all);
    ASSERT_EQ(::chown(tmp.c_str(), 65534, 65534), 0);
    EXPECT_THROW(RankWriter(root_.path(), 2, 0, 1, WriteOptions{}), Error);
  }
}

TEST_F(SharedRoot, NewCheckpointsAreTheUsersAlone) {
  struct stat st {};
  ASSERT_EQ(::stat((root_.path() / step_dir_name(1)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  ASSERT_EQ(::stat((root_.path() / step_dir_name(1) / rank_file_name(0)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  ASSERT_EQ(::stat((root_.path() / kLatestName).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
}

// The writers are done, but before the commit someone who can write the root made the
// temporary directory writable by others (or it was theirs from the start): commit refuses it,
// and nothing of it becomes a step. The commit checked nothing of the sort before.
TEST_F(SharedRoot, ACommitRefusesATemporaryDirectoryThatIsNotTheUsersAlone) {
  const fs::path tmp = root_.path() / temporary_dir_name(2);
  for (int rank = 0; rank < crash::kWorld; ++rank) {
    RankWriter writer(root_.path(), 2, rank, crash::kWorld, WriteOptions{});
    crash::write_rank(writer, 2, rank, 64, 2);
  }
  fs::permissions(tmp, fs::perms::all);
  try {
    commit(root_.path(), 2, crash::kWorld);
    ADD_FAILURE() << "committed a directory that others can write";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("can be written by others (mode 777)"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(root_.path() / step_dir_name(2)));
  EXPECT_EQ(read_latest(root_.path()), 1);
}

// Another user swaps a directory of their own for the temporary directory, over and over,
// while the job commits (a race an attacker can run in a group-shared root). The commit works
// through descriptors and compares what it renamed with what it checked: it may fail, but a
// commit that succeeds made the job's own directory the step, never the other user's. (It
// renamed by path, and committed the other user's directory in most tries.) Needs root, to own
// a directory as another user.
TEST_F(SharedRoot, ACommitNeverMakesAnotherUsersSwappedInDirectoryTheStep) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to make a directory of another user";
  const fs::path tmp = root_.path() / temporary_dir_name(2);
  const fs::path decoy = root_.path() / "decoy";
  const fs::path final_dir = root_.path() / step_dir_name(2);
  int committed = 0;
  int refused = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::error_code ignored;
    fs::remove_all(final_dir, ignored);
    fs::remove_all(tmp, ignored);
    fs::remove_all(decoy, ignored);
    fs::remove(root_.path() / kLatestName, ignored);
    for (int rank = 0; rank < crash::kWorld; ++rank) {
      RankWriter writer(root_.path(), 2, rank, crash::kWorld, WriteOptions{});
      crash::write_rank(writer, 2, rank, 64, 2);
    }
    // The decoy: a copy of the genuine files (so that reading them succeeds), owned by nobody.
    fs::copy(tmp, decoy);
    for (const auto& entry : fs::directory_iterator(decoy))
      ASSERT_EQ(::chown(entry.path().c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chown(decoy.c_str(), 65534, 65534), 0);
    std::atomic<bool> stop{false};
    std::thread swapper([&] {
      while (!stop.load()) {
        ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, decoy.c_str(), RENAME_EXCHANGE);
      }
    });
    bool ok = false;
    try {
      commit(root_.path(), 2, crash::kWorld);
      ok = true;
    } catch (const Error&) {
    }
    stop = true;
    swapper.join();
    if (!ok) {
      ++refused;
      continue;
    }
    ++committed;
    struct stat st {};
    ASSERT_EQ(::lstat(final_dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0U) << "trial " << trial << ": the other user's directory is the step";
    EXPECT_EQ(read_latest(root_.path()), 2);
  }
  std::cerr << "committed " << committed << ", refused " << refused << " of 40\n";
}

bool plans_to_remove(const PrunePlan& plan, const fs::path& path) {
  return std::find(plan.remove.begin(), plan.remove.end(), path) != plan.remove.end();
}

// prune removed any entry named .old-*, and the temporary directory of a step being saved
// again while its writer was still at work. It now removes only the names the library makes,
// and leaves the temporary directory of a live writer (marked with a shared flock) alone.
TEST(CkptPrune, OnlyTheLibrarysOwnLeftoversAndNeverALiveWritersDirectory) {
  TempDir root;
  save(root.path(), 1);
  save(root.path(), 2);
  const fs::path notes = root.path() / ".old-notes";
  write_bytes(notes, "mine\n");
  const fs::path lookalike = root.path() / ".old-step-1-x";
  fs::create_directory(lookalike);
  const fs::path displaced = root.path() / ".old-step-000000000001-123";
  fs::create_directory(displaced);
  const fs::path stale = root.path() / temporary_dir_name(1);
  fs::create_directory(stale);
  const fs::path resaving = root.path() / temporary_dir_name(2);
  {
    RankWriter live(root.path(), 2, 0, 1, WriteOptions{});  // a re-save of step 2, at work
    const PrunePlan plan = prune_plan(root.path(), 10);
    EXPECT_TRUE(plans_to_remove(plan, displaced));
    EXPECT_TRUE(plans_to_remove(plan, stale));
    EXPECT_FALSE(plans_to_remove(plan, notes));
    EXPECT_FALSE(plans_to_remove(plan, lookalike));
    EXPECT_FALSE(plans_to_remove(plan, resaving)) << "removed a live writer's directory";
  }
  // The writer is gone (as after a crash): its directory is a leftover now.
  EXPECT_TRUE(plans_to_remove(prune_plan(root.path(), 10), resaving));
  prune(root.path(), 10);
  EXPECT_TRUE(fs::exists(notes));
  EXPECT_TRUE(fs::exists(lookalike));
  EXPECT_FALSE(fs::exists(displaced));
  EXPECT_FALSE(fs::exists(resaving));
  EXPECT_EQ(load_latest(root.path())->checkpoint.step(), 2);
}

}  // namespace
}  // namespace primus::ckpt

// Under AddressSanitizer (--enable-sanitizers): damaged HDF5 metadata makes libhdf5 ask malloc
// for absurd sizes (a terabyte), which glibc refuses with NULL and HDF5 reports as an error;
// ASan would abort the test instead. So malloc returns NULL here too, as without ASan (operator
// new still reports an out-of-memory error). ASAN_OPTIONS overrides this.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}

// LeakSanitizer: libhdf5 1.10 leaks on some of its error paths (H5Fopen of a file with a
// damaged root group leaks even in a program that only calls H5Fopen). Ignored: what is
// allocated inside libhdf5 and never freed is HDF5's own leak (identifiers a caller forgets to
// close are freed by HDF5's atexit handler, before the leak check).
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libhdf5\n";
}

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // the test's own HDF5 calls fail quietly
  return RUN_ALL_TESTS();
}
