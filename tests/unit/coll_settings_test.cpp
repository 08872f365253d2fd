// bootstrap_settings(): which bootstrap the environment asks for, and errors that name the
// variable and what was expected.
#include <gtest/gtest.h>

#include <map>

#include "primus/collectives/bootstrap.hpp"
#include "primus/collectives/error.hpp"

namespace primus::coll {
namespace {

const std::string kSecret(64, 'c');  // the form the plugin makes

BootstrapSettings settings(const std::map<std::string, std::string>& env) {
  return bootstrap_settings([&](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    settings(env);
  } catch (const CollectiveError& e) {
    return e.what();
  }
  return "no error";
}

const std::map<std::string, std::string> kTcp = {{"PRIMUS_JOB_SECRET", kSecret},
                                                 {"RANK", "2"},
                                                 {"WORLD_SIZE", "4"},
                                                 {"MASTER_ADDR", "n1"},
                                                 {"PRIMUS_PORT", "29501"},
                                                 {"MASTER_PORT", "29500"}};

TEST(CollSettings, TheTcpStoreUsesPrimusPortNotMasterPort) {
  const BootstrapSettings s = settings(kTcp);
  EXPECT_EQ(s.method, "tcp");
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.size, 4);
  EXPECT_EQ(s.master_addr, "n1");
  EXPECT_EQ(s.port, 29501);
  EXPECT_EQ(s.secret, kSecret);
  EXPECT_FALSE(s.timeout);
  EXPECT_EQ(s.job, "");
  EXPECT_EQ(s.step, "");
  auto env = kTcp;
  env["PRIMUS_JOB_ID"] = "41_2";
  env["SLURM_STEP_ID"] = "3";
  EXPECT_EQ(settings(env).job, "41_2");
  EXPECT_EQ(settings(env).step, "3");
}

// The library takes the secret in the form the plugin makes; its value is never in a message.
TEST(CollSettings, ASecretOfAnotherFormIsRefusedWithoutPrintingIt) {
  for (const std::string& bad : {std::string("s3cret"), std::string(63, 'a'), std::string(64, 'A'),
                                 std::string(63, 'a') + "g"}) {
    auto env = kTcp;
    env["PRIMUS_JOB_SECRET"] = bad;
    const std::string error = error_of(env);
    EXPECT_NE(error.find("PRIMUS_JOB_SECRET: expected 64 lowercase hexadecimal digits"),
              std::string::npos)
        << error;
    EXPECT_EQ(error.find(bad), std::string::npos) << error;
  }
}

TEST(CollSettings, PmixWhenAskedOrWhenAPmixServerIsThere) {
  EXPECT_EQ(settings({{"PRIMUS_JOB_SECRET", kSecret}, {"PMIX_RANK", "0"}}).method, "pmix");
  EXPECT_EQ(settings({{"PRIMUS_JOB_SECRET", kSecret}, {"PRIMUS_BOOTSTRAP", "pmix"}}).method,
            "pmix");
  auto env = kTcp;
  env["PMIX_RANK"] = "3";
  env["PRIMUS_BOOTSTRAP"] = "tcp";  // the plugin's choice wins
  EXPECT_EQ(settings(env).method, "tcp");
  env["PRIMUS_COLL_TIMEOUT"] = "7";
  env["SLURMD_NODENAME"] = "n3";
  EXPECT_EQ(settings(env).timeout, std::chrono::seconds(7));
  EXPECT_EQ(settings(env).node, "n3");
}

TEST(CollSettings, IntegrityIsOffUnlessAskedForInTheOptionTablesSpellings) {
  EXPECT_FALSE(settings(kTcp).integrity);
  for (const char* on : {"1", "yes", "true"}) {
    auto env = kTcp;
    env["PRIMUS_COLL_INTEGRITY"] = on;
    EXPECT_TRUE(settings(env).integrity) << on;
  }
  for (const char* off : {"0", "no", "false", ""}) {
    auto env = kTcp;
    env["PRIMUS_COLL_INTEGRITY"] = off;
    EXPECT_FALSE(settings(env).integrity) << off;
  }
  auto env = kTcp;
  env["PRIMUS_COLL_INTEGRITY"] = "on";
  EXPECT_EQ(error_of(env),
            "PRIMUS_COLL_INTEGRITY='on': expected 1/yes/true (authenticate every message) or "
            "0/no/false");
}

// PRIMUS_GENERATION (a rejoin's generation) is 0 when unset or empty, and a number otherwise.
TEST(CollSettings, TheGenerationIsZeroUnlessGiven) {
  EXPECT_EQ(settings(kTcp).generation, 0u);
  auto env = kTcp;
  env["PRIMUS_GENERATION"] = "";
  EXPECT_EQ(settings(env).generation, 0u);
  env["PRIMUS_GENERATION"] = "3";
  EXPECT_EQ(settings(env).generation, 3u);
  env["PRIMUS_GENERATION"] = "-1";
  EXPECT_NE(error_of(env).find("PRIMUS_GENERATION='-1'"), std::string::npos) << error_of(env);
  env["PRIMUS_GENERATION"] = "two";
  EXPECT_NE(error_of(env).find("a generation number, 0 or more"), std::string::npos)
      << error_of(env);
}

TEST(CollSettings, ErrorsNameTheVariableAndWhatWasExpected) {
  auto env = kTcp;
  env.erase("PRIMUS_JOB_SECRET");
  EXPECT_NE(error_of(env).find("PRIMUS_JOB_SECRET is not set"), std::string::npos);
  env = kTcp;
  env["PRIMUS_BOOTSTRAP"] = "mpi";
  EXPECT_EQ(error_of(env), "PRIMUS_BOOTSTRAP='mpi': expected pmix or tcp");
  env = kTcp;
  env["RANK"] = "4";
  EXPECT_EQ(error_of(env), "RANK='4': expected a rank from 0 to WORLD_SIZE-1 (3)");
  env = kTcp;
  env["WORLD_SIZE"] = "0";
  EXPECT_EQ(error_of(env), "WORLD_SIZE='0': expected a positive number of ranks");
  env = kTcp;
  env["PRIMUS_PORT"] = "70000";
  EXPECT_EQ(error_of(env), "PRIMUS_PORT='70000': expected a port from 1 to 65535");
  env = kTcp;
  env["PRIMUS_PORT"] = "12x";
  EXPECT_EQ(error_of(env), "PRIMUS_PORT='12x': expected a port from 1 to 65535");
  env = kTcp;
  env.erase("MASTER_ADDR");
  EXPECT_NE(error_of(env).find("MASTER_ADDR is not set"), std::string::npos);
  env = kTcp;
  env["PRIMUS_COLL_TIMEOUT"] = "-1";
  EXPECT_NE(error_of(env).find("PRIMUS_COLL_TIMEOUT='-1'"), std::string::npos);
}

}  // namespace
}  // namespace primus::coll
