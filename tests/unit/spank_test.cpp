// The plugin's OS-facing helpers that run without Slurm: allowed roots and the job secret.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <vector>

#include "../../spank/allowed_roots.hpp"
#include "primus/common/error.hpp"
#include "primus/os/job_secret.hpp"

namespace primus::spank {
namespace {

namespace fs = std::filesystem;

class AllowedRoots : public testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/primus-roots-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    top_ = fs::canonical(pattern);
    fs::create_directories(top_ / "scratch" / "alice");
    fs::create_directories(top_ / "elsewhere");
    fs::create_directory_symlink(top_ / "elsewhere", top_ / "scratch" / "alice" / "escape");
  }
  void TearDown() override { fs::remove_all(top_); }
  std::string roots() const { return (top_ / "scratch").string(); }
  fs::path top_;
};

TEST_F(AllowedRoots, CanonicalPathsResolveLinksAndDots) {
  const std::string base = (top_ / "scratch" / "alice").string();
  EXPECT_EQ(canonical_path("ckpt", base), base + "/ckpt");
  EXPECT_EQ(canonical_path("./a/../b/new", base), base + "/b/new");
  EXPECT_EQ(canonical_path("escape/ckpt", base), (top_ / "elsewhere" / "ckpt").string());
  EXPECT_EQ(canonical_path(base + "/../alice/x", "/"), base + "/x");
}

TEST_F(AllowedRoots, InsideIsAcceptedOutsideIsNamed) {
  const std::string base = (top_ / "scratch" / "alice").string();
  EXPECT_NO_THROW(check_under_roots("--primus-ckpt-dir", "ckpt", base, roots()));
  EXPECT_NO_THROW(check_under_roots("--primus-ckpt-dir", "/anything", base, ""));
  const std::vector<std::string> outside = {"escape/ckpt", "../../elsewhere", "/etc",
                                            (top_ / "scratchy").string()};
  for (const std::string& bad : outside) {
    try {
      check_under_roots("--primus-ckpt-dir", bad, base, roots());
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("--primus-ckpt-dir: '" + bad + "' resolves to"), std::string::npos)
          << message;
      EXPECT_NE(message.find("outside the directories this site allows"), std::string::npos);
    }
  }
}

TEST(JobSecret, RandomHexOf64Digits) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string secret = os::make_job_secret();
    EXPECT_TRUE(os::is_job_secret(secret)) << secret;
    EXPECT_TRUE(seen.insert(secret).second);
  }
  EXPECT_FALSE(os::is_job_secret(""));
  EXPECT_FALSE(os::is_job_secret(std::string(63, 'a')));
  EXPECT_FALSE(os::is_job_secret(std::string(64, 'A')));
  EXPECT_FALSE(os::is_job_secret(std::string(63, 'a') + "g"));
}

}  // namespace
}  // namespace primus::spank
