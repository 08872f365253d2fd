#include "primus/common/options.hpp"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "primus/common/error.hpp"

namespace primus {
namespace {

std::string error_of(void (*f)()) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OptionTable, EveryRowIsCompleteAndUnique) {
  std::set<std::string_view> names;
  std::set<std::string_view> envs;
  std::set<std::string_view> keys;
  for (const OptionSpec& spec : option_table()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    if (!spec.env.empty()) {
      EXPECT_TRUE(envs.insert(spec.env).second) << spec.env;
      EXPECT_EQ(spec.env.substr(0, 7), "PRIMUS_") << spec.env;
    }
    if (!spec.site_key.empty()) {
      EXPECT_TRUE(keys.insert(spec.site_key).second) << spec.site_key;
    }
    EXPECT_FALSE(spec.help.empty()) << spec.name;
    ASSERT_NE(spec.validate, nullptr) << spec.name;
    if (!spec.default_value.empty()) {
      EXPECT_EQ(spec.validate(spec.default_value), std::nullopt) << spec.name;
    }
    if (spec.scope == OptionScope::kUser) {
      EXPECT_EQ(spec.name.substr(0, 6), "primus") << spec.name;
      EXPECT_FALSE(spec.env.empty()) << spec.name;
    } else {
      EXPECT_FALSE(spec.site_key.empty()) << spec.name;
    }
    for (const std::string_view reserved : reserved_option_names()) {
      EXPECT_NE(spec.name, reserved) << "a reserved name became an option: update the list";
    }
  }
  EXPECT_NE(find_option("primus-ckpt-dir"), nullptr);
  EXPECT_EQ(find_option_by_env("PRIMUS_MASTER_PORT"), find_option("primus-master-port"));
  EXPECT_EQ(find_option_by_site_key("bind_gpus"), find_option("primus-bind-gpus"));
  EXPECT_EQ(find_option("primus-nonsense"), nullptr);
}

TEST(Options, CommandLineErrorsNameTheOptionAndTheExpectation) {
  const std::string message = error_of([] {
    parse_command_line_options(OptionSource::kSrun, {{"primus-master-port", "99999"}});
  });
  EXPECT_EQ(message,
            "--primus-master-port: expected a port number (1-65535) or 'auto', got '99999'");
  EXPECT_EQ(error_of([] {
              parse_command_line_options(OptionSource::kSbatch, {{"primus", "jax"}});
            }),
            "--primus: expected one of pytorch, tensorflow, none, got 'jax'");
  EXPECT_NE(error_of([] {
              parse_command_line_options(OptionSource::kSrun, {{"primus-ckpt-dir", std::nullopt}});
            }).find("--primus-ckpt-dir: expected a value"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_command_line_options(OptionSource::kSrun, {{"port-range", "1-100"}});
            }).find("unknown option"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_command_line_options(OptionSource::kSrun, {{"primus-ckpt-dir", "a\nb"}});
            }).find("--primus-ckpt-dir"),
            std::string::npos);
}

TEST(Options, TheDataRowsCheckTheirValues) {
  const auto check = [](const char* name, const char* value) -> std::string {
    try {
      parse_command_line_options(OptionSource::kSrun, {{name, value}});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, const char*>>{{"primus-data-format", "tfrecord"},
                                                        {"primus-data-format", "fixed:3072"},
                                                        {"primus-data-mode", "dynamic"},
                                                        {"primus-global-batch-size", "4096"},
                                                        {"primus-seed", "18446744073709551615"},
                                                        {"primus-shuffle", "blocks"},
                                                        {"primus-shuffle-block", "1"},
                                                        {"primus-data", "/scratch/train-*"}}) {
    EXPECT_EQ(check(name, value), "") << name << "=" << value;
  }
  EXPECT_EQ(check("primus-data-format", "csv"),
            "--primus-data-format: expected lines, fixed:N (N-byte records, N from 1 to "
            "1073741824) or tfrecord, got 'csv'");
  EXPECT_NE(check("primus-data-format", "fixed:0").find("expected lines"), std::string::npos);
  EXPECT_NE(check("primus-data-mode", "elastic").find("'static' or 'dynamic'"), std::string::npos);
  EXPECT_NE(check("primus-global-batch-size", "0").find("from 1"), std::string::npos);
  EXPECT_NE(check("primus-seed", "18446744073709551616").find("--primus-seed"), std::string::npos);
  EXPECT_NE(check("primus-shuffle", "files").find("none, records, blocks"), std::string::npos);
  EXPECT_NE(check("primus-shuffle-block", "-1").find("--primus-shuffle-block"), std::string::npos);
  EXPECT_EQ(find_option("primus-global-batch-size")->default_value, "")
      << "a global batch size has no default";
}

TEST(Options, TheMonitorRowsCheckTheirValues) {
  const auto check = [](const char* name, const char* value) -> std::string {
    try {
      parse_command_line_options(OptionSource::kSrun, {{name, value}});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"primus-metrics", "0"},
           {"primus-metrics", "9100"},
           {"primus-metrics", "0.0.0.0:9100"},
           {"primus-metrics", "node-1:0"},
           {"primus-metrics-file", "/var/lib/node_exporter/primus.prom"},
           {"primus-progress-interval", "0"},
           {"primus-straggler-window", "120"}}) {
    EXPECT_EQ(check(name, value), "") << name << "=" << value;
  }
  EXPECT_NE(check("primus-metrics", "70000").find("--primus-metrics: expected [ADDR:]PORT"),
            std::string::npos);
  EXPECT_NE(check("primus-metrics", "a b:1").find("[ADDR:]PORT"), std::string::npos);
  EXPECT_NE(check("primus-metrics", "host:").find("[ADDR:]PORT"), std::string::npos);
  EXPECT_NE(check("primus-straggler-window", "1h").find("--primus-straggler-window"),
            std::string::npos);
  EXPECT_EQ(parse_site_arguments({"metrics_sd_dir=/var/lib/primus-sd"})
                .values.at("metrics-sd-dir")
                .value_or(""),
            "/var/lib/primus-sd");
  EXPECT_NE(error_of([] {
              parse_site_arguments({"metrics_sd_dir=relative"});
            }).find("metrics_sd_dir: expected an absolute path"),
            std::string::npos);
}

TEST(Options, SiteArgumentsAreValidatedByKey) {
  const OptionLayer layer = parse_site_arguments({"framework=tensorflow", "port_range=30000-30999",
                                                  "verbose=yes", "ckpt_roots=/scratch:/home"});
  EXPECT_EQ(layer.values.at("primus").value_or(""), "tensorflow");
  EXPECT_EQ(layer.values.at("port-range").value_or(""), "30000-30999");
  EXPECT_EQ(layer.values.at("primus-verbose").value_or(""), "1");
  EXPECT_NE(error_of([] { parse_site_arguments({"colour=blue"}); }).find("unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_site_arguments({"framework"}); }).find("expected key=value"),
            std::string::npos);
  EXPECT_EQ(error_of([] { parse_site_arguments({"port_range=1000-1010"}); }),
            "plugstack argument port_range: expected a port range LO-HI holding at least 32 "
            "ports, got '1000-1010'");
  EXPECT_NE(error_of([] { parse_site_arguments({"ckpt_roots=/a:relative"}); }).find("ckpt_roots"),
            std::string::npos);
}

TEST(Options, EnvironmentErrorsNameTheVariable) {
  EXPECT_EQ(error_of([] {
              parse_environment_options({{"PRIMUS_BIND_GPUS", "some"}});
            }),
            "PRIMUS_BIND_GPUS: expected 'auto' or 'none', got 'some'");
  const OptionLayer layer =
      parse_environment_options({{"PRIMUS_VERBOSE", "true"}, {"UNRELATED", "x"}});
  EXPECT_EQ(layer.values.size(), 1U);
  EXPECT_EQ(layer.values.at("primus-verbose").value_or(""), "1");
}

// Precedence, lowest first: default < plugstack < environment < sbatch < srun.
TEST(Options, PrecedenceIsPlugstackEnvironmentSbatchSrun) {
  const OptionLayer site = parse_site_arguments({"master_port=30001", "bind_gpus=none"});
  const OptionLayer env =
      parse_environment_options({{"PRIMUS_MASTER_PORT", "30002"}, {"PRIMUS_CKPT_DIR", "/env"}});
  const OptionLayer sbatch = parse_command_line_options(
      OptionSource::kSbatch, {{"primus-master-port", "30003"}, {"primus-ckpt-dir", "/sbatch"}});
  const OptionLayer srun =
      parse_command_line_options(OptionSource::kSrun, {{"primus-master-port", "30004"}});

  // Layers given out of order resolve the same way.
  const ResolvedOptions all = ResolvedOptions::resolve({srun, site, sbatch, env});
  EXPECT_EQ(all.get("primus-master-port")->value, "30004");
  EXPECT_EQ(all.get("primus-master-port")->source, OptionSource::kSrun);
  EXPECT_EQ(all.get("primus-ckpt-dir")->value, "/sbatch");
  EXPECT_EQ(all.get("primus-bind-gpus")->value, "none");
  EXPECT_EQ(all.get("primus-bind-gpus")->source, OptionSource::kSite);
  EXPECT_EQ(all.get("port-range")->value, "20000-29999");
  EXPECT_EQ(all.get("port-range")->source, OptionSource::kDefault);
  EXPECT_FALSE(all.is_set("primus-job-dir"));

  EXPECT_EQ(ResolvedOptions::resolve({site, env, sbatch}).get("primus-master-port")->value,
            "30003");
  EXPECT_EQ(ResolvedOptions::resolve({site, env}).get("primus-master-port")->value, "30002");
  EXPECT_EQ(ResolvedOptions::resolve({site}).get("primus-master-port")->value, "30001");
  EXPECT_EQ(ResolvedOptions::resolve({}).get("primus-master-port")->value, "auto");
}

TEST(Options, PrimusWithoutValueKeepsTheFrameworkChosenBelow) {
  const auto srun_flag =
      parse_command_line_options(OptionSource::kSrun, {{"primus", std::nullopt}});
  EXPECT_EQ(ResolvedOptions::resolve({srun_flag}).get("primus")->value, "pytorch");

  const auto site = parse_site_arguments({"framework=tensorflow"});
  const auto resolved = ResolvedOptions::resolve({site, srun_flag});
  EXPECT_EQ(resolved.get("primus")->value, "tensorflow");
  EXPECT_EQ(resolved.get("primus")->source, OptionSource::kSrun);
  EXPECT_EQ(ResolvedOptions::resolve({site}).get("primus")->source, OptionSource::kSite);

  const auto sbatch = parse_command_line_options(OptionSource::kSbatch, {{"primus", "none"}});
  EXPECT_EQ(ResolvedOptions::resolve({site, sbatch, srun_flag}).get("primus")->value, "none");
  const auto srun_tf = parse_command_line_options(OptionSource::kSrun, {{"primus", "pytorch"}});
  EXPECT_EQ(ResolvedOptions::resolve({site, sbatch, srun_tf}).get("primus")->value, "pytorch");
}

TEST(Options, PrimusIsRequestedOnlyByTheUser) {
  const auto site = parse_site_arguments({"framework=tensorflow"});
  EXPECT_FALSE(primus_requested(ResolvedOptions::resolve({})));
  EXPECT_FALSE(primus_requested(ResolvedOptions::resolve({site})));
  const auto srun = parse_command_line_options(OptionSource::kSrun, {{"primus", std::nullopt}});
  EXPECT_TRUE(primus_requested(ResolvedOptions::resolve({site, srun})));
  const auto env = parse_environment_options({{"PRIMUS_FRAMEWORK", "pytorch"}});
  EXPECT_TRUE(primus_requested(ResolvedOptions::resolve({env})));
  const auto off = parse_command_line_options(OptionSource::kSrun, {{"primus", "none"}});
  EXPECT_FALSE(primus_requested(ResolvedOptions::resolve({env, off})));
}

TEST(Options, FlagsTakeTheirImplicitValue) {
  const auto srun =
      parse_command_line_options(OptionSource::kSrun, {{"primus-verbose", std::nullopt}});
  EXPECT_EQ(ResolvedOptions::resolve({srun}).get("primus-verbose")->value, "1");
  EXPECT_EQ(ResolvedOptions::resolve({}).get("primus-verbose")->value, "0");
}

}  // namespace
}  // namespace primus
