// Datasets on real files: the three record formats, the files a specification names, the index
// and its cache (reuse, invalidation, trust, several builders at once), the reader, and every bad
// input named with its file and byte offset.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../../data/index_file.hpp"
#include "../../data/index_scan.hpp"
#include "ckpt_test_util.hpp"
#include "primus/common/error.hpp"
#include "primus/data/dataset.hpp"
#include "primus/data/format.hpp"
#include "primus/data/reader.hpp"

namespace primus::data {
namespace {

namespace fs = std::filesystem;
using ckpt::testing::read_bytes;
using ckpt::testing::TempDir;
using ckpt::testing::write_bytes;

std::string le64(std::uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

std::string le32(std::uint32_t value) {
  return le64(value).substr(0, 4);
}

std::string tfrecord(const std::string& data) {
  const std::string length = le64(data.size());
  return length + le32(masked_crc32c(length.data(), 8)) + data +
         le32(masked_crc32c(data.data(), data.size()));
}

std::string record_text(int id) {
  return "record-" + std::to_string(id) + std::string(static_cast<std::size_t>(id % 7), 'x');
}

// Files of `counts[i]` records each, numbered across files, in `format`.
std::vector<std::string> write_dataset(const fs::path& dir, const std::vector<int>& counts,
                                       const std::string& format) {
  std::vector<std::string> all;
  int id = 0;
  for (std::size_t f = 0; f < counts.size(); ++f) {
    std::string bytes;
    for (int i = 0; i < counts[f]; ++i, ++id) {
      std::string text = record_text(id);
      if (format == "fixed:16") text.resize(16, '.');
      all.push_back(text);
      bytes += format == "tfrecord" ? tfrecord(text) : format == "lines" ? text + "\n" : text;
    }
    write_bytes(dir / ("part-" + std::to_string(f)), bytes);
  }
  return all;
}

std::vector<std::string> read_all(const std::shared_ptr<const Dataset>& dataset,
                                  std::vector<std::uint64_t> ids, std::size_t threads = 0) {
  RecordReader reader(dataset, threads);
  RecordBatch batch;
  reader.read(ids.data(), ids.size(), batch);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < batch.size(); ++i)
    out.emplace_back(reinterpret_cast<const char*>(batch.data(i)), batch.length(i));
  return out;
}

OpenOptions options_for(const std::string& format, const std::string& cache_dir = "") {
  OpenOptions options;
  options.format = *parse_format(format);
  options.cache_dir = cache_dir;
  return options;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DataFormat, ParsesTheOptionValues) {
  EXPECT_EQ(parse_format("lines")->kind, FormatKind::kLines);
  EXPECT_EQ(parse_format("tfrecord")->kind, FormatKind::kTfrecord);
  EXPECT_EQ(parse_format("fixed:4096")->record_size, 4096U);
  EXPECT_EQ(to_string(*parse_format("fixed:7")), "fixed:7");
  for (const char* bad : {"", "fixed", "fixed:", "fixed:0", "fixed:-1", "fixed:1x", "Lines",
                          "fixed:2147483648", "tfrecords"}) {
    EXPECT_FALSE(parse_format(bad)) << bad;
  }
}

TEST(DataFormat, MasksTheCrcAsTensorFlowDoes) {
  // CRC-32C of "123456789" is 0xe3069283 (the catalogue's check value); TensorFlow's mask is
  // rotate right by 15, plus 0xa282ead8.
  const std::uint32_t crc = 0xe3069283U;
  EXPECT_EQ(mask_crc(crc), ((crc >> 15) | (crc << 17)) + 0xa282ead8U);
  EXPECT_EQ(masked_crc32c("123456789", 9), mask_crc(crc));
  EXPECT_EQ(masked_crc32c("", 0), 0xa282ead8U);
}

TEST(DataIndex, ScansInPiecesOfAnySizeAsAtOnce) {
  std::string bytes;
  for (int i = 0; i < 50; ++i)
    bytes += tfrecord(record_text(i));
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const ScannedIndex whole = scan_records(FormatKind::kTfrecord, data, bytes.size());
  ASSERT_EQ(whole.records(), 50U);
  for (const std::size_t piece : {1U, 3U, 13U, 64U}) {
    IndexScanner scanner(FormatKind::kTfrecord);
    for (std::size_t at = 0; at < bytes.size(); at += piece)
      scanner.feed(data + at, std::min(piece, bytes.size() - at));
    EXPECT_EQ(scanner.finish().starts, whole.starts) << piece;
  }
  const std::string text = "a\n\nbc\nlast";
  const auto lines = scan_records(FormatKind::kLines,
                                  reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  EXPECT_EQ(lines.starts, (std::vector<std::uint64_t>{0, 2, 3, 6, 10}));
  EXPECT_TRUE(lines.last_line_unterminated);
}

TEST(DataIndex, ATruncatedOrDamagedRecordIsNamedWithItsOffset) {
  const std::string first = tfrecord("first");
  const std::string second = tfrecord("second record");
  const std::string bytes = first + second;
  const auto scan = [](const std::string& b) {
    return error_of([&] {
      scan_records(FormatKind::kTfrecord, reinterpret_cast<const std::uint8_t*>(b.data()),
                   b.size());
    });
  };
  const std::string at_second = "byte offset " + std::to_string(first.size()) + ":";
  EXPECT_NE(scan(bytes.substr(0, bytes.size() - 1)).find(at_second + " truncated record"),
            std::string::npos);
  EXPECT_NE(scan(bytes.substr(0, first.size() + 5)).find(at_second + " truncated record"),
            std::string::npos);
  std::string data_flip = bytes;
  data_flip[first.size() + 14] ^= 1;
  EXPECT_NE(scan(data_flip).find(at_second + " wrong CRC-32C of the record's data"),
            std::string::npos);
  std::string length_flip = bytes;
  length_flip[first.size()] ^= 1;
  EXPECT_NE(scan(length_flip).find(at_second + " wrong CRC-32C of the record's length"),
            std::string::npos);
  EXPECT_EQ(scan(bytes), "(no error)");
}

TEST(DataIndex, AStoredIndexIsCheckedBeforeUse) {
  const std::string bytes = tfrecord("a") + tfrecord("bb");
  const auto scanned = scan_records(
      FormatKind::kTfrecord, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  const FileIdentity identity{bytes.size(), 1, 2, 3, 4};
  const auto stored = serialize_index(FormatKind::kTfrecord, identity, scanned);
  std::string why;
  ASSERT_TRUE(parse_index(stored.data(), stored.size(), FormatKind::kTfrecord, identity, &why));
  EXPECT_FALSE(parse_index(stored.data(), stored.size(), FormatKind::kLines, identity, &why));
  FileIdentity touched = identity;
  touched.mtime_ns += 1;
  EXPECT_FALSE(parse_index(stored.data(), stored.size(), FormatKind::kTfrecord, touched, &why));
  EXPECT_NE(why.find("stale"), std::string::npos);
  for (std::size_t at = 0; at < stored.size(); ++at) {
    auto damaged = stored;
    damaged[at] ^= 0x10;
    EXPECT_FALSE(parse_index(damaged.data(), damaged.size(), FormatKind::kTfrecord, identity, &why))
        << "a flipped byte at " << at << " went unnoticed";
  }
  EXPECT_FALSE(
      parse_index(stored.data(), stored.size() - 8, FormatKind::kTfrecord, identity, &why));
}

class DataDatasetTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DataDatasetTest, EveryRecordIsFoundAndReadInAnyOrder) {
  TempDir dir;
  // Files of uneven sizes, empty ones among them, one much larger.
  const auto expected = write_dataset(dir.path(), {3, 0, 1, 250, 0, 7, 0}, GetParam());
  const auto dataset = Dataset::open(dir.path().string(), options_for(GetParam()));
  ASSERT_EQ(dataset->records(), expected.size());
  ASSERT_EQ(dataset->files().size(), 7U);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = expected.size(); i-- > 0;)
    ids.push_back(i * 7919 % expected.size());  // every record once, scattered
  const auto got = read_all(dataset, ids);
  for (std::size_t i = 0; i < ids.size(); ++i)
    ASSERT_EQ(got[i], expected[ids[i]]) << "record " << ids[i];
  std::vector<std::uint64_t> in_order(expected.size());
  for (std::size_t i = 0; i < in_order.size(); ++i)
    in_order[i] = i;
  EXPECT_EQ(read_all(dataset, in_order), expected);
}

INSTANTIATE_TEST_SUITE_P(Formats, DataDatasetTest,
                         ::testing::Values("lines", "fixed:16", "tfrecord"));

TEST(DataDataset, FilesComeFromAGlobADirectoryOrAManifestInTheirOrder) {
  TempDir dir;
  write_bytes(dir.path() / "b.txt", "b1\nb2\n");
  write_bytes(dir.path() / "a.txt", "a1\n");
  write_bytes(dir.path() / "B.txt", "B1\n");
  write_bytes(dir.path() / ".hidden", "h\n");
  fs::create_directory(dir.path() / "sub");
  write_bytes(dir.path() / "sub" / "c.txt", "c1\n");
  const std::string base = dir.path().string();
  // Sorted as bytes: upper case first; not recursive; no hidden files.
  EXPECT_EQ(list_dataset_files(base),
            (std::vector<std::string>{base + "/B.txt", base + "/a.txt", base + "/b.txt"}));
  EXPECT_EQ(list_dataset_files(base + "/*.txt"),
            (std::vector<std::string>{base + "/B.txt", base + "/a.txt", base + "/b.txt"}));
  write_bytes(dir.path() / "list", "# training files\nb.txt\n\nsub/c.txt\n" + base + "/a.txt\n");
  EXPECT_EQ(list_dataset_files("@" + base + "/list"),
            (std::vector<std::string>{base + "/b.txt", base + "/sub/c.txt", base + "/a.txt"}));
  const auto dataset = Dataset::open("@" + base + "/list", options_for("lines"));
  EXPECT_EQ(read_all(dataset, {0, 1, 2, 3}), (std::vector<std::string>{"b1", "b2", "c1", "a1"}));
}

TEST(DataDataset, BadSpecificationsAreNamed) {
  TempDir dir;
  const std::string base = dir.path().string();
  EXPECT_NE(error_of([&] {
              list_dataset_files(base + "/*.tfrecord");
            }).find("--primus-data: the glob '" + base + "/*.tfrecord' matches no file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { list_dataset_files(base); }).find("holds no data file"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              list_dataset_files(base + "/missing");
            }).find("'" + base + "/missing': No such file or directory"),
            std::string::npos);
  fs::create_directory(dir.path() / "shards");
  write_bytes(dir.path() / "list", "shards\n");
  EXPECT_NE(error_of([&] {
              list_dataset_files("@" + base + "/list");
            }).find(base + "/list:1: 'shards' is a directory"),
            std::string::npos);
  write_bytes(dir.path() / "list", "# nothing\n");
  EXPECT_NE(error_of([&] { list_dataset_files("@" + base + "/list"); }).find("names no file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { list_dataset_files("", "PRIMUS_DATA"); }).find("PRIMUS_DATA: expected"),
            std::string::npos);
}

TEST(DataDataset, BadFilesAreNamedWithTheByteOffset) {
  TempDir dir;
  const std::string base = dir.path().string();
  write_bytes(dir.path() / "a", std::string(48, 'x'));
  write_bytes(dir.path() / "b", std::string(50, 'x'));
  EXPECT_NE(error_of([&] {
              Dataset::open(base, options_for("fixed:16"));
            }).find(base + "/b: byte offset 48: truncated record"),
            std::string::npos);
  const std::string good = tfrecord("one") + tfrecord("two");
  write_bytes(dir.path() / "a", good);
  std::string bad = good;
  bad[good.size() - 6] ^= 4;  // the second record's data
  write_bytes(dir.path() / "b", bad);
  EXPECT_NE(error_of([&] { Dataset::open(base, options_for("tfrecord")); })
                .find(base + "/b: byte offset " + std::to_string(tfrecord("one").size()) +
                      ": wrong CRC-32C of the record's data"),
            std::string::npos);
  if (::geteuid() != 0) {  // root reads anything
    write_bytes(dir.path() / "b", good);
    fs::permissions(dir.path() / "b", fs::perms::none);
    EXPECT_NE(error_of([&] {
                Dataset::open(base, options_for("tfrecord"));
              }).find(base + "/b: cannot open: Permission denied"),
              std::string::npos);
  }
}

// One thread indexes every file through one reused buffer (1 MiB): records of odd sizes cross
// its edges, and a shorter file after a longer one finds none of the longer one's bytes.
TEST(DataDataset, OneThreadIndexesFilesLargerAndSmallerThanItsBufferThroughOneBuffer) {
  TempDir dir;
  const std::string base = dir.path().string();
  std::vector<std::string> records;
  std::string big;
  for (int i = 0; big.size() < (std::size_t{5} << 19); ++i) {  // 2.5 MiB of 993-1004 bytes
    records.push_back(std::to_string(i) + std::string(993 + static_cast<std::size_t>(i % 12), 'r'));
    big += tfrecord(records.back());
  }
  write_bytes(dir.path() / "part-0", big);
  write_bytes(dir.path() / "part-1", tfrecord("short"));
  OpenOptions options = options_for("tfrecord");
  options.threads = 1;
  options.use_cache = false;
  auto dataset = Dataset::open(base, options);
  ASSERT_EQ(dataset->records(), records.size() + 1);
  const std::uint64_t last = records.size() - 1;
  EXPECT_EQ(
      read_all(dataset, {0, 1057, 1058, last, last + 1}),
      (std::vector<std::string>{records[0], records[1057], records[1058], records[last], "short"}));
  // The short file cut inside its record: named, not completed from the buffer's old bytes.
  write_bytes(dir.path() / "part-1", tfrecord("short").substr(0, 15));
  EXPECT_NE(error_of([&] {
              Dataset::open(base, options);
            }).find(base + "/part-1: byte offset 0: truncated record"),
            std::string::npos)
      << error_of([&] { Dataset::open(base, options); });
}

TEST(DataDataset, TheIndexIsCachedBesideTheDataAndRebuiltWhenTheFileChanges) {
  TempDir dir;
  write_dataset(dir.path(), {5, 9}, "tfrecord");
  const std::string base = dir.path().string();
  auto first = Dataset::open(base, options_for("tfrecord"));
  EXPECT_EQ(first->files()[0].origin, IndexOrigin::kBuilt);
  EXPECT_EQ(first->files()[0].index_path, base + "/.part-0.primus-tfrecord-index");
  EXPECT_TRUE(fs::exists(base + "/.part-0.primus-tfrecord-index"));
  auto second = Dataset::open(base, options_for("tfrecord"));
  EXPECT_EQ(second->files()[1].origin, IndexOrigin::kCachedBeside);
  EXPECT_EQ(second->fingerprint(), first->fingerprint());

  // A new record: size, mtime and ctime change; the old index is not used.
  write_bytes(dir.path() / "part-1", read_bytes(dir.path() / "part-1") + tfrecord("more"));
  auto third = Dataset::open(base, options_for("tfrecord"));
  EXPECT_EQ(third->files()[1].origin, IndexOrigin::kBuilt);
  EXPECT_EQ(third->records(), 15U);
  EXPECT_NE(third->fingerprint(), first->fingerprint());
  EXPECT_EQ(read_all(third, {14}), (std::vector<std::string>{"more"}));

  // A file replaced by another of the same size (a new inode): rebuilt, not trusted.
  const std::string replaced = base + "/part-0";
  const std::string content = read_bytes(replaced);
  fs::remove(replaced);
  write_bytes(replaced, content);
  EXPECT_EQ(Dataset::open(base, options_for("tfrecord"))->files()[0].origin, IndexOrigin::kBuilt);
}

TEST(DataDataset, AnIndexSomeoneElseCouldWriteIsNotUsed) {
  TempDir dir;
  write_dataset(dir.path(), {4}, "lines");
  const std::string base = dir.path().string();
  Dataset::open(base, options_for("lines"));
  const std::string index = base + "/.part-0.primus-lines-index";
  ASSERT_EQ(::chmod(index.c_str(), 0666), 0);
  EXPECT_EQ(Dataset::open(base, options_for("lines"))->files()[0].origin, IndexOrigin::kBuilt);
  // The rebuilt one replaced it, with a safe mode.
  struct stat info {};
  ASSERT_EQ(::stat(index.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0077, 0U);
  EXPECT_EQ(Dataset::open(base, options_for("lines"))->files()[0].origin,
            IndexOrigin::kCachedBeside);
}

// The body of the read-only test; "" when it holds, else what failed.
std::string read_only_directory_case(const fs::path& root) {
  fs::create_directory(root / "data");
  write_dataset(root / "data", {6}, "tfrecord");
  fs::permissions(root / "data", fs::perms::owner_read | fs::perms::owner_exec);
  const std::string cache = (root / "job" / "index").string();
  auto first = Dataset::open((root / "data").string(), options_for("tfrecord", cache));
  if (first->files()[0].index_path.rfind(cache + "/", 0) != 0) {
    return "the index went to '" + first->files()[0].index_path + "', not the cache directory";
  }
  auto second = Dataset::open((root / "data").string(), options_for("tfrecord", cache));
  if (second->files()[0].origin != IndexOrigin::kCachedElsewhere) {
    return "the cache directory's index was not used";
  }
  // Without a cache directory it is kept in memory only.
  auto third = Dataset::open((root / "data").string(), options_for("tfrecord"));
  if (third->files()[0].origin != IndexOrigin::kBuilt || !third->files()[0].index_path.empty()) {
    return "an index was cached with nowhere to cache it";
  }
  fs::permissions(root / "data", fs::perms::owner_all);
  return "";
}

TEST(DataDataset, AReadOnlyDataDirectoryCachesInTheCacheDirectory) {
  TempDir dir;
  if (::geteuid() != 0) {
    EXPECT_EQ(read_only_directory_case(dir.path()), "");
    return;
  }
  // Root writes into read-only directories: run the case as nobody, in a child.
  constexpr uid_t kNobody = 65534;
  ASSERT_EQ(::chown(dir.path().c_str(), kNobody, kNobody), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(3);
    std::string failure;
    try {
      failure = read_only_directory_case(dir.path());
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) std::fprintf(stderr, "as nobody: %s\n", failure.c_str());
    ::_exit(failure.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "(3: could not become nobody)";
}

TEST(DataDataset, SeveralBuildersAtOnceLeaveOneSoundIndex) {
  TempDir dir;
  write_dataset(dir.path(), {400, 300, 200, 100}, "tfrecord");
  const std::string base = dir.path().string();
  std::atomic<int> failures{0};
  std::vector<std::thread> builders;
  for (int t = 0; t < 8; ++t) {
    builders.emplace_back([&] {
      try {
        if (Dataset::open(base, options_for("tfrecord"))->records() != 1000) ++failures;
      } catch (const Error&) {
        ++failures;
      }
    });
  }
  for (auto& builder : builders)
    builder.join();
  EXPECT_EQ(failures.load(), 0);
  const auto after = Dataset::open(base, options_for("tfrecord"));
  for (const DataFile& file : after->files())
    EXPECT_EQ(file.origin, IndexOrigin::kCachedBeside) << file.path;
  int leftovers = 0;
  for (const auto& entry : fs::directory_iterator(dir.path()))
    leftovers += entry.path().filename().string().find("-index.") != std::string::npos;
  EXPECT_EQ(leftovers, 0) << "temporary index files were left behind";
}

TEST(DataReader, ADamagedRecordIsNamedWhenRead) {
  TempDir dir;
  write_dataset(dir.path(), {10}, "tfrecord");
  const std::string base = dir.path().string();
  const auto dataset = Dataset::open(base, options_for("tfrecord"));
  const RecordLocation at = dataset->locate(6);
  // Same size, damaged data: the index still matches only if the identity does, so read it
  // through the dataset opened before the change.
  std::string bytes = read_bytes(dir.path() / "part-0");
  bytes[at.offset] ^= 0x20;
  {
    std::fstream out(dir.path() / "part-0", std::ios::in | std::ios::out | std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_NE(error_of([&] {
              read_all(dataset, {5, 6});
            })
                .find(base + "/part-0: byte offset " + std::to_string(at.frame_offset) +
                      ": wrong CRC-32C of the data"),
            std::string::npos);
  EXPECT_EQ(read_all(dataset, {5}).size(), 1U);
}

// A batch of more than 256 KiB is shared among the reader's threads in pieces: whatever the
// number of threads, the order of the ids and the format, every record comes back in its place.
TEST(DataReader, ABatchSharedAmongThreadsHasEveryRecordInItsPlace) {
  for (const std::string format : {"tfrecord", "lines", "fixed:16"}) {
    TempDir dir;
    const auto expected = write_dataset(dir.path(), {9000, 0, 17000, 5}, format);
    const auto dataset = Dataset::open(dir.path().string(), options_for(format));
    std::vector<std::uint64_t> in_order(expected.size());
    std::vector<std::uint64_t> scattered;
    for (std::size_t i = 0; i < in_order.size(); ++i) {
      in_order[i] = i;
      scattered.push_back(i * 7919 % expected.size());
    }
    for (const std::size_t threads : {1, 2, 4}) {
      EXPECT_EQ(read_all(dataset, in_order, threads), expected) << format << ", " << threads;
      const auto got = read_all(dataset, scattered, threads);
      for (std::size_t i = 0; i < scattered.size(); ++i) {
        ASSERT_EQ(got[i], expected[scattered[i]])
            << format << ", " << threads << " threads, record " << scattered[i];
      }
    }
  }
}

// Two damaged records in one shared batch: the error names the one that comes first in the
// batch's order (not the first a thread happened to meet, nor the first in the file).
TEST(DataReader, TheFirstDamagedRecordInTheBatchIsNamed) {
  TempDir dir;
  write_dataset(dir.path(), {30000}, "tfrecord");
  const std::string base = dir.path().string();
  const auto dataset = Dataset::open(base, options_for("tfrecord"));
  const RecordLocation early = dataset->locate(100);
  const RecordLocation late = dataset->locate(29000);
  std::string bytes = read_bytes(dir.path() / "part-0");
  bytes[early.offset] ^= 0x01;
  bytes[late.offset] ^= 0x01;
  {
    std::fstream out(dir.path() / "part-0", std::ios::in | std::ios::out | std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<std::uint64_t> descending;
  for (std::uint64_t id = 30000; id-- > 0;)
    descending.push_back(id);
  std::vector<std::uint64_t> ascending(descending.rbegin(), descending.rend());
  const auto named = [&](const RecordLocation& at) {
    return base + "/part-0: byte offset " + std::to_string(at.frame_offset) + ":";
  };
  EXPECT_NE(error_of([&] { read_all(dataset, descending, 4); }).find(named(late)),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_all(dataset, ascending, 4); }).find(named(early)),
            std::string::npos);
}

// start_read() lets the reader's threads begin while the caller still makes the records'
// memory: they touch a record's memory only once `ready` counts it; abandon_read() lets a
// caller that cannot finish stop them (ASan sees any write through a pointer not yet set).
TEST(DataReader, ThreadsWaitForTheMemoryOfEachRecord) {
  TempDir dir;
  const auto expected = write_dataset(dir.path(), {40000}, "lines");
  const auto dataset = Dataset::open(dir.path().string(), options_for("lines"));
  std::vector<std::uint64_t> ids(expected.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = i;
  RecordReader reader(dataset, 4);
  for (const bool abandon : {false, true}) {
    const auto& lengths = reader.locate(ids.data(), ids.size());
    std::vector<std::string> memory(ids.size());
    std::vector<std::uint8_t*> dest(ids.size(), nullptr);
    std::atomic<std::size_t> ready{0};
    reader.start_read(dest.data(), &ready);
    const std::size_t made = abandon ? ids.size() / 3 : ids.size();
    for (std::size_t i = 0; i < made; ++i) {
      memory[i].assign(lengths[i], '\0');
      dest[i] = reinterpret_cast<std::uint8_t*>(memory[i].data());
      if (i % 1000 == 999) {
        ready.store(i + 1, std::memory_order_release);
        std::this_thread::yield();
      }
    }
    if (abandon) {
      reader.abandon_read();
      continue;
    }
    ready.store(ids.size(), std::memory_order_release);
    reader.finish_read();
    EXPECT_EQ(memory, expected);
  }
  // The same reader reads again after an abandoned read.
  RecordBatch batch;
  reader.read(ids.data(), ids.size(), batch);
  ASSERT_EQ(batch.size(), expected.size());
  for (std::size_t i = 0; i < batch.size(); ++i)
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(batch.data(i)), batch.length(i)),
              expected[i]);
}

}  // namespace
}  // namespace primus::data
