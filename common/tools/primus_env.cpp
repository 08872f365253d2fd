// primus-env: prints the Primus rank environment, computed by the same code as the SPANK plugin
// and primus-launch. Under srun it prints the calling task's; with --nproc N, each of N ranks on
// this machine. The job secret is always redacted.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "../cli/command_line.hpp"
#include "primus/common.hpp"
#include "primus/os/cpus.hpp"
#include "primus/os/job_secret.hpp"
#include "primus/os/node_address.hpp"

extern char** environ;

namespace {

constexpr const char* kUsage =
    "Usage: primus-env [--primus[=FRAMEWORK]] [--primus-OPTION=VALUE ...] [--nproc N]\n"
    "\n"
    "Prints the environment Primus gives a rank (secrets redacted).\n"
    "  under srun     the calling task's variables, from its Slurm step environment\n"
    "  --nproc N      the variables of each of N ranks on this machine (no Slurm)\n"
    "  --help         this text; --version the version\n"
    "\n"
    "Every --primus option of srun and sbatch is accepted (see primus(7)); PRIMUS_* variables\n"
    "in the environment apply below them.\n";

primus::Environment process_environment() {
  primus::Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* text = *entry;
    const char* eq = std::strchr(text, '=');
    if (eq != nullptr) env.emplace(std::string(text, eq), std::string(eq + 1));
  }
  return env;
}

std::string this_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string current_dir() {
  std::vector<char> buffer(4096);
  if (getcwd(buffer.data(), buffer.size()) == nullptr) return "/";
  return buffer.data();
}

int run(int argc, char** argv) {
  using primus::cli::Arg;
  primus::cli::Parser parser(" (see primus-env --help)");
  parser.add({"version", Arg::kNone, "", "", "the version"});
  primus::cli::Option nproc_option{"nproc", Arg::kRequired, "N", "a number of ranks from 1 to 4096",
                                   "the variables of each of N ranks on this machine (no Slurm)"};
  nproc_option.check = [](const std::string& value) -> std::optional<std::string> {
    const auto n = primus::parse_unsigned(value, 4096);
    if (n && *n > 0) return std::nullopt;
    return "a number of ranks from 1 to 4096";
  };
  parser.add(std::move(nproc_option)).add_option_table();
  const primus::cli::Parsed args = parser.parse(std::vector<std::string>(argv + 1, argv + argc));
  if (args.help) {
    std::cout << kUsage;
    return 0;
  }
  if (args.has("version")) {
    std::cout << "primus-env " << PACKAGE_VERSION << "\n";
    return 0;
  }
  std::optional<std::uint64_t> nproc;
  if (const auto value = args.value("nproc")) nproc = primus::parse_unsigned(*value, 4096);
  const auto& given = args.table;

  const primus::Environment env = process_environment();
  const primus::ResolvedOptions options = primus::ResolvedOptions::resolve(
      {primus::parse_environment_options(env),
       primus::parse_command_line_options(primus::OptionSource::kSrun, given)});

  if (nproc) {
    primus::OneMachineJob job;
    job.nproc = static_cast<std::uint32_t>(*nproc);
    job.hostname = this_hostname();
    job.job_id = "local-" + std::to_string(getpid());
    job.submit_dir = current_dir();
    job.port_seed = static_cast<std::uint64_t>(getpid());
    job.cpus = primus::os::usable_cpus();
    // The caller's secret where it is one (a launcher's), else a new one for this run.
    const auto caller_secret = primus::lookup(env, "PRIMUS_JOB_SECRET");
    job.job_secret = caller_secret && primus::os::is_job_secret(*caller_secret)
                         ? *caller_secret
                         : primus::os::make_job_secret();
    for (std::uint32_t rank = 0; rank < job.nproc; ++rank) {
      std::cout << "# rank " << rank << "\n"
                << primus::format_environment(
                       primus::one_machine_environment(job, rank, env, options));
    }
    return 0;
  }
  if (!primus::lookup(env, "SLURM_STEP_ID")) {
    throw primus::Error(
        "not inside a Slurm job step (SLURM_STEP_ID is not set): run it under "
        "srun, or give --nproc N");
  }
  std::cout << primus::format_environment(primus::slurm_task_environment(
      env, options, primus::os::node_address, primus::os::online_cpus()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "primus-env: " << e.what() << "\n";
    return 2;
  }
}
