// The reader's two paths on real files: records in the page cache are checked and copied from
// the file's mapping, the others are read with pread(); both give the same records and name the
// same damage. A file that shrinks under a mapping raises SIGBUS, which guard_bus turns into an
// error instead of the end of the process. The files live in /var/tmp, on a disk: on tmpfs the
// page cache is the file, and its pages cannot be dropped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../../data/mapped_file.hpp"
#include "primus/common/error.hpp"
#include "primus/data/dataset.hpp"
#include "primus/data/format.hpp"
#include "primus/data/reader.hpp"

namespace primus::data {
namespace {

namespace fs = std::filesystem;

class DiskDir {
 public:
  DiskDir() {
    std::string pattern = "/var/tmp/primus-data-mapped-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~DiskDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  DiskDir(const DiskDir&) = delete;
  DiskDir& operator=(const DiskDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string le_bytes(std::uint64_t value, int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

std::string tfrecord(const std::string& data) {
  const std::string length = le_bytes(data.size(), 8);
  return length + le_bytes(masked_crc32c(length.data(), 8), 4) + data +
         le_bytes(masked_crc32c(data.data(), data.size()), 4);
}

std::string record_text(int id) {
  return "record-" + std::to_string(id) + std::string(static_cast<std::size_t>(id % 300), 'x');
}

// `files` files of `per_file` TFRecord records, written, synced (clean pages can be dropped).
std::vector<std::string> write_dataset(const fs::path& dir, int files, int per_file) {
  std::vector<std::string> all;
  for (int f = 0; f < files; ++f) {
    std::string bytes;
    for (int i = 0; i < per_file; ++i) {
      all.push_back(record_text(f * per_file + i));
      bytes += tfrecord(all.back());
    }
    const fs::path path = dir / ("part-" + std::to_string(f));
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const int fd = ::open(path.c_str(), O_RDONLY);
    ::fsync(fd);
    ::close(fd);
  }
  return all;
}

// Drops the files' pages from the page cache; false when they stay (they cannot be dropped).
// Pages that a mapping holds stay: the readers' mappings, kept after them, go first.
bool drop_pages(const fs::path& dir) {
  drop_idle_mappings();
  bool dropped = true;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("part-", 0) != 0) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    const MappedFile map(fd, fs::file_size(entry.path()));
    if (map.resident(0, 1)) dropped = false;
    ::close(fd);
  }
  return dropped;
}

std::vector<std::string> read_all(const std::shared_ptr<const Dataset>& dataset,
                                  std::size_t threads) {
  std::vector<std::uint64_t> ids(dataset->records());
  for (std::uint64_t i = 0; i < ids.size(); ++i)
    ids[i] = i;
  RecordReader reader(dataset, threads);
  RecordBatch batch;
  reader.read(ids.data(), ids.size(), batch);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < batch.size(); ++i)
    out.emplace_back(reinterpret_cast<const char*>(batch.data(i)), batch.length(i));
  return out;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

OpenOptions tfrecord_options() {
  OpenOptions options;
  options.format = *parse_format("tfrecord");
  return options;
}

TEST(DataMappedFile, ResidentSaysWhetherThePagesAreInThePageCache) {
  DiskDir dir;
  write_dataset(dir.path(), 1, 2000);
  const fs::path path = dir.path() / "part-0";
  const std::uint64_t size = fs::file_size(path);
  const int fd = ::open(path.c_str(), O_RDONLY);
  const MappedFile map(fd, size);
  ASSERT_TRUE(map);
  EXPECT_EQ(map.size(), size);
  EXPECT_TRUE(map.resident(0, size));  // just written
  EXPECT_FALSE(map.resident(0, size + 1)) << "past the mapping";
  EXPECT_FALSE(map.resident(5, 5)) << "an empty range";
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  EXPECT_FALSE(map.resident(0, size));
  ::close(fd);
  EXPECT_FALSE(MappedFile(fd, 0)) << "nothing to map";
}

TEST(DataMappedFile, GuardBusTurnsAPageTheFileLostIntoFalse) {
  DiskDir dir;
  write_dataset(dir.path(), 1, 2000);
  const fs::path path = dir.path() / "part-0";
  const int fd = ::open(path.c_str(), O_RDWR);
  const MappedFile map(fd, fs::file_size(path));
  ASSERT_GT(map.size(), 3U * 4096U);
  struct Touch {
    const MappedFile* map;
    std::uint64_t at;
    unsigned sum;
  } touch{&map, 3 * 4096, 0};
  const auto read_one = [](void* t) {
    auto& touch = *static_cast<Touch*>(t);
    touch.sum += *static_cast<const volatile std::uint8_t*>(touch.map->data() + touch.at);
  };
  EXPECT_TRUE(guard_bus(read_one, &touch));
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  EXPECT_FALSE(guard_bus(read_one, &touch)) << "the page is gone: SIGBUS, caught";
  EXPECT_FALSE(guard_bus(read_one, &touch)) << "and caught again";
  touch.at = 0;
  EXPECT_TRUE(guard_bus(read_one, &touch)) << "the first page is still there";
  ::close(fd);
}

// Whether the reader reads from the mapping (cached) or with pread() (dropped), with one thread
// or four, every record comes back; a damaged one is named alike.
TEST(DataReader, CachedAndUncachedRecordsAreReadAlike) {
  DiskDir dir;
  const std::vector<std::string> expected = write_dataset(dir.path(), 3, 3000);
  const auto dataset = Dataset::open(dir.path().string(), tfrecord_options());
  for (const std::size_t threads : {1, 4}) {
    EXPECT_EQ(read_all(dataset, threads), expected) << threads << " threads, cached";
    ASSERT_TRUE(drop_pages(dir.path()));
    EXPECT_EQ(read_all(dataset, threads), expected) << threads << " threads, from the disk";
  }
  const fs::path part1 = dir.path() / "part-1";
  const RecordLocation at = dataset->locate(3000 + 1234);
  {
    std::fstream out(part1, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(at.offset + 3));
    out.put('!');
  }
  const std::string named = part1.string() + ": byte offset " + std::to_string(at.frame_offset) +
                            ": wrong CRC-32C of the data";
  EXPECT_NE(error_of([&] { read_all(dataset, 2); }).find(named), std::string::npos);
  ASSERT_TRUE(drop_pages(dir.path()));
  EXPECT_NE(error_of([&] { read_all(dataset, 2); }).find(named), std::string::npos);
}

// A file that shrinks after it was indexed: an error naming it, and the process goes on.
TEST(DataReader, AFileThatShrankIsNamedAndTheProcessGoesOn) {
  DiskDir dir;
  write_dataset(dir.path(), 2, 3000);
  const auto dataset = Dataset::open(dir.path().string(), tfrecord_options());
  RecordReader reader(dataset, 2);
  RecordBatch batch;
  const std::uint64_t first = 0;
  reader.read(&first, 1, batch);  // opens and maps part-0
  const fs::path part0 = dir.path() / "part-0";
  fs::resize_file(part0, fs::file_size(part0) / 2);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = 2000; i < 2100; ++i)
    ids.push_back(i);
  const std::string error = error_of([&] { reader.read(ids.data(), ids.size(), batch); });
  EXPECT_NE(error.find(part0.string() + ": "), std::string::npos) << error;
  EXPECT_NE(error.find("changed"), std::string::npos) << error;
  const std::uint64_t other = 3000 + 10;
  reader.read(&other, 1, batch);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(batch.data(0)), batch.length(0)),
            record_text(3010));
}

}  // namespace
}  // namespace primus::data
