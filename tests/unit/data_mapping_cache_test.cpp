// The process's shared mappings of data files (data/mapping_cache.hpp): one mapping per file
// whoever reads it, kept after its last reader up to a bound, made anew for a file that was
// replaced or rewritten, and none of the parent's in a forked child. Real files in /var/tmp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../../data/mapping_cache.hpp"
#include "primus/data/reader.hpp"

namespace primus::data {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = "/var/tmp/primus-mapping-cache-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    drop_idle_mappings();
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path file(const std::string& name, const std::string& bytes) const {
    const fs::path path = path_ / name;
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

 private:
  fs::path path_;
};

// The mapping of `path` (opened, mapped, the descriptor closed again).
std::shared_ptr<const MappedFile> map_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  auto map = shared_mapping(fd);
  ::close(fd);
  return map;
}

TEST(DataMappingCache, ReadersOfAFileShareOneMappingThatOutlivesThem) {
  drop_idle_mappings();
  TempDir dir;
  const fs::path a = dir.file("a", std::string(10000, 'a'));
  const std::uint64_t before = mapping_cache_state().mappings;
  auto first = map_path(a);
  auto second = map_path(a);
  ASSERT_TRUE(first);
  EXPECT_EQ(first, second) << "one mapping for both";
  EXPECT_EQ(first->size(), 10000U);
  EXPECT_EQ(first->data()[9999], 'a');
  EXPECT_EQ(mapping_cache_state().mappings, before + 1);
  EXPECT_EQ(mapping_cache_state().idle_bytes, 0U) << "held by its readers";
  const MappedFile* kept = first.get();
  first.reset();
  second.reset();
  EXPECT_EQ(mapping_cache_state().idle_bytes, 10000U) << "kept for the next reader";
  EXPECT_EQ(map_path(a).get(), kept) << "the next reader finds it";
  drop_idle_mappings();
  EXPECT_EQ(mapping_cache_state().idle_bytes, 0U);
  EXPECT_EQ(mapping_cache_state().mappings, before);
}

TEST(DataMappingCache, AFileReplacedOrRewrittenIsMappedAnew) {
  drop_idle_mappings();
  TempDir dir;
  const fs::path a = dir.file("a", std::string(8192, 'a'));
  const auto old_map = map_path(a);
  ASSERT_TRUE(old_map);
  // Replaced by another file of the same size: another inode.
  const fs::path b = dir.file("b", std::string(8192, 'b'));
  fs::rename(b, a);
  const auto replaced = map_path(a);
  ASSERT_TRUE(replaced);
  EXPECT_NE(replaced, old_map);
  EXPECT_EQ(replaced->data()[0], 'b');
  // Rewritten in place, longer: its size (and time) differ.
  { std::ofstream(a, std::ios::binary | std::ios::app) << std::string(4096, 'c'); }
  const auto longer = map_path(a);
  ASSERT_TRUE(longer);
  EXPECT_NE(longer, replaced);
  EXPECT_EQ(longer->size(), 8192U + 4096U);
  EXPECT_EQ(longer->data()[8192], 'c');
  // Nothing to map: empty files, directories.
  EXPECT_FALSE(map_path(dir.file("empty", "")));
  EXPECT_FALSE(map_path(a.parent_path()));
}

// The bound holds from each new mapping on: it unmaps the least recently used idle ones.
TEST(DataMappingCache, IdleMappingsBeyondTheBoundGoLeastRecentlyUsedFirst) {
  drop_idle_mappings();
  TempDir dir;
  // Sparse files: mapped, never touched, they cost no memory.
  const std::uint64_t big = kIdleMappedBytes / 2 + 4096;
  std::vector<fs::path> files;
  for (const char* name : {"x", "y", "z"}) {
    files.push_back(dir.file(name, "!"));
    fs::resize_file(files.back(), big);
  }
  const MappedFile* x = map_path(files[0]).get();
  const MappedFile* y = map_path(files[1]).get();
  EXPECT_EQ(mapping_cache_state().idle_bytes, 2 * big) << "both released since the last map";
  EXPECT_EQ(map_path(files[0]).get(), x) << "x used again: y is now the least recent";
  auto z = map_path(files[2]);  // the bound applies: y goes, x stays
  ASSERT_TRUE(z);
  EXPECT_EQ(mapping_cache_state().idle_bytes, big);
  EXPECT_EQ(mapping_cache_state().mappings, 2U);
  EXPECT_EQ(map_path(files[0]).get(), x);
  (void)y;
}

TEST(DataMappingCache, AForkedChildStartsWithNoneOfItsParentsMappings) {
  drop_idle_mappings();
  TempDir dir;
  const auto map = map_path(dir.file("a", std::string(4096, 'a')));
  ASSERT_TRUE(map);
  ASSERT_GE(mapping_cache_state().mappings, 1U);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(mapping_cache_state().mappings == 0 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child saw its parent's";
  EXPECT_GE(mapping_cache_state().mappings, 1U) << "the parent keeps its own";
}

}  // namespace
}  // namespace primus::data
