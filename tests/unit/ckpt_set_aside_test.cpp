// --primus-fresh's move of a checkpoint root (set_aside), on real directories: the new name,
// never over an existing one, nothing moved on bad input.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "ckpt_test_util.hpp"
#include "primus/ckpt.hpp"
#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

TEST(CkptSetAside, NamesTheRootByTheUtcTimeAndCountsOnWhenTaken) {
  const std::time_t when = 1796524380;  // 2026-12-06T02:33:00Z
  EXPECT_EQ(set_aside_name("ckpt", when, 1), "ckpt.old-20261206T023300Z");
  EXPECT_EQ(set_aside_name("ckpt", when, 2), "ckpt.old-20261206T023300Z-2");
}

TEST(CkptSetAside, MovesTheRootAsideWithWhatItHoldsAndNeverOverAnother) {
  TempDir dir;
  const fs::path root = dir.path() / "ckpt";
  fs::create_directories(root / "step-000000000005");
  std::ofstream(root / "LATEST") << "step-000000000005\n";
  const auto first = set_aside(root / "");  // "ckpt/" names ckpt
  ASSERT_TRUE(first);
  EXPECT_EQ(first->parent_path(), dir.path());
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::is_directory(*first / "step-000000000005"));
  EXPECT_TRUE(fs::is_regular_file(*first / "LATEST"));

  // A second root moved aside in the same second (forced: the names it would take first are
  // there already) gets the next free name; the others are left as they were.
  const std::time_t now = std::time(nullptr);
  for (const std::time_t t : {now, now + 1, now + 2}) {
    fs::create_directories(dir.path() / set_aside_name("ckpt", t, 1) / "keep");
  }
  fs::create_directories(root / "step-000000000009");
  const auto second = set_aside(root);
  ASSERT_TRUE(second);
  EXPECT_NE(*second, *first);
  EXPECT_TRUE(fs::is_directory(*second / "step-000000000009"));
  EXPECT_NE(second->filename().string().find("-2"), std::string::npos) << *second;
  for (const std::time_t t : {now, now + 1, now + 2}) {
    EXPECT_TRUE(fs::is_directory(dir.path() / set_aside_name("ckpt", t, 1) / "keep"));
  }
}

TEST(CkptSetAside, NothingToMoveIsNoneAndAFileIsRefused) {
  TempDir dir;
  EXPECT_FALSE(set_aside(dir.path() / "ckpt"));
  std::ofstream(dir.path() / "file") << "x";
  try {
    set_aside(dir.path() / "file");
    FAIL() << "a file was moved aside";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("file: not a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "file"));
}

}  // namespace
}  // namespace primus::ckpt
