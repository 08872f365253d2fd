// The command line of a launch and the options both modes read (launch_settings.hpp).
#include "cli/launch_settings.hpp"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "../../common/cli/command_line.hpp"
#include "cli/self_process.hpp"
#include "monitor/metrics_server.hpp"
#include "primus/common.hpp"
#include "primus/common/tasks_per_node.hpp"
#include "slurm/slurm_queries.hpp"
#include "supervise/data_check.hpp"

namespace primus::launch {

namespace {

// --nproc-per-node N (or --nproc_per_node): on one machine N ranks, as --nproc; inside an
// allocation the ranks per node are the job's, so N must be its tasks per node.
std::optional<std::uint32_t> nproc_per_node(const cli::Parsed& parsed, const Environment& env,
                                            bool in_allocation) {
  std::optional<std::string> given = parsed.value("nproc-per-node");
  if (!given) given = parsed.value("nproc_per_node");
  if (!given) return std::nullopt;
  const auto n = static_cast<std::uint32_t>(*parse_unsigned(*given, 4096));
  if (!in_allocation) return n;
  const std::string layout = lookup(env, "SLURM_TASKS_PER_NODE").value_or("");
  std::optional<std::uint32_t> tasks;
  try {
    const TasksPerNode per = TasksPerNode::parse(layout, "SLURM_TASKS_PER_NODE");
    if (per.runs().size() == 1) tasks = per.max_tasks();
  } catch (const Error&) {
  }
  if (tasks != n) {
    throw cli::UsageError(
        "--nproc-per-node " + std::to_string(n) + ": inside a Slurm allocation the ranks per " +
        "node are the job's (SLURM_TASKS_PER_NODE=" + (layout.empty() ? "unset" : layout) +
        "); leave the option out, or ask sbatch or salloc for --ntasks-per-node=" +
        std::to_string(n));
  }
  return n;
}

}  // namespace

void say_omp_threads(const Environment& env, std::uint32_t cpus, std::uint32_t ranks) {
  if (lookup(env, "OMP_NUM_THREADS") || lookup(env, "SLURM_CPUS_PER_TASK") || cpus == 0 ||
      ranks == 0) {
    return;
  }
  const std::uint32_t threads = std::max<std::uint32_t>(1, cpus / ranks);
  std::cerr << "primus-launch: OMP_NUM_THREADS=" << threads << " for every rank (" << cpus
            << " CPUs for " << ranks << " ranks per node); set OMP_NUM_THREADS to choose\n";
}

std::string python_for_scripts() {
  const char* given = std::getenv("PRIMUS_PYTHON");
  return given != nullptr && *given != '\0' ? given : PRIMUS_PYTHON;
}

std::vector<std::string> with_python(std::vector<std::string> command) {
  if (command.empty()) return command;
  const std::string& first = command.front();
  const bool script = first.size() > 3 && first.compare(first.size() - 3, 3, ".py") == 0;
  if (first == "-m" || script) command.insert(command.begin(), python_for_scripts());
  return command;
}

Settings parse(const std::vector<std::string>& args, const Environment& env, const char* usage) {
  cli::Parser parser(" (see primus-launch --help)");
  parser.add({"version", cli::Arg::kNone, "", "", "the version"})
      .add({"label", cli::Arg::kNone, "", "", "prefix each output line with '<rank>: '"});
  cli::Option nproc_option{"nproc", cli::Arg::kRequired, "N", "a number of ranks from 1 to 4096",
                           "N ranks on this machine"};
  nproc_option.check = [](const std::string& value) -> std::optional<std::string> {
    const auto n = parse_unsigned(value, 4096);
    if (n && *n > 0) return std::nullopt;
    return "a number of ranks from 1 to 4096";
  };
  // torchrun's spellings of it: on one machine the same; inside an allocation only the job's
  // own tasks per node (checked below).
  for (const char* synonym : {"nproc-per-node", "nproc_per_node"}) {
    cli::Option option = nproc_option;
    option.name = synonym;
    option.help = "the same as --nproc (torchrun's spelling)";
    parser.add(std::move(option));
  }
  parser.add(std::move(nproc_option));
  parser.add_option_table().command("COMMAND", true);
  // --version, like --help, needs no command.
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (std::find(args.begin(), dashes, "--version") != dashes &&
      std::find(args.begin(), dashes, "--help") == dashes) {
    std::cout << "primus-launch " << PACKAGE_VERSION << "\n";
    std::exit(0);
  }
  const cli::Parsed parsed = parser.parse(args);
  Settings s;
  if (parsed.help) {
    std::cout << usage;
    std::exit(0);
  }
  const bool in_allocation = lookup(env, "SLURM_JOB_ID").has_value();
  const std::optional<std::uint32_t> per_node = nproc_per_node(parsed, env, in_allocation);
  if (parsed.has("nproc") && in_allocation) {
    throw cli::UsageError(
        "--nproc: runs the ranks on this machine only, and this is a Slurm allocation "
        "(SLURM_JOB_ID is set); run primus-launch outside one, or start the ranks with srun "
        "--primus");
  }
  if (!parsed.has("nproc") && !per_node && !in_allocation) {
    throw cli::UsageError(
        "--nproc N is required outside a Slurm allocation (how many ranks to start)");
  }
  if (parsed.has("nproc")) {
    s.nproc = static_cast<std::uint32_t>(*parse_unsigned(*parsed.value("nproc"), 4096));
    if (per_node && !in_allocation && *per_node != s.nproc) {
      throw cli::UsageError("--nproc " + std::to_string(s.nproc) + " and --nproc-per-node " +
                            std::to_string(*per_node) + " disagree: give one of them");
    }
  } else if (per_node && !in_allocation) {
    s.nproc = *per_node;
  }
  s.label = parsed.has("label");
  s.command = with_python(parsed.command);
  s.layers = {parse_environment_options(env),
              parse_command_line_options(OptionSource::kSrun, parsed.table)};
  s.options = ResolvedOptions::resolve(s.layers);
  return s;
}

std::uint32_t option_number(const ResolvedOptions& options, std::string_view name,
                            std::uint64_t max) {
  return static_cast<std::uint32_t>(parse_unsigned(options.value_or(name, "0"), max).value_or(0));
}

ResolvedOptions with_job_dir(const Settings& s, const std::filesystem::path& job_dir) {
  OptionLayer fixed;
  fixed.source = OptionSource::kSrun;
  fixed.values["primus-job-dir"] = job_dir.string();
  std::vector<OptionLayer> layers = s.layers;
  layers.push_back(fixed);
  return ResolvedOptions::resolve(layers);
}

std::string command_text(const Settings& s) {
  std::string text;
  for (const std::string& word : s.command)
    text += (text.empty() ? "" : " ") + word;
  return text;
}

bool dynamic_data(const ResolvedOptions& options) {
  return options.value_or("primus-data-mode", "static") == "dynamic";
}

// The dataset, checked and indexed before any rank starts; false (after saying why) when it
// cannot be read.
bool dataset_ready(const ResolvedOptions& options, const std::filesystem::path& job_dir,
                   EventLog& events, const std::string& node) {
  const auto check = check_dataset(options, job_dir, std::chrono::hours(24));
  if (!check) return true;
  const std::string spec = options.value_or("primus-data", "");
  if (!check->ok) {
    std::cerr << "primus-launch: the dataset (--primus-data=" << spec
              << ") cannot be read; no rank was started: " << check->message << "\n";
    events.write(
        {"dataset-failed", std::nullopt, node, {{"spec", spec}, {"error", check->message}}});
    return false;
  }
  events.write({"dataset-checked", std::nullopt, node, {{"spec", spec}}});
  return true;
}

std::chrono::milliseconds stop_grace_of(const ResolvedOptions& options) {
  return std::chrono::seconds(
      parse_unsigned(options.value_or("primus-stop-grace", "120"), std::uint64_t{7} * 24 * 3600)
          .value_or(120));
}

std::chrono::milliseconds rejoin_deadline_of(const ResolvedOptions& options) {
  return std::chrono::seconds(
      parse_unsigned(options.value_or("primus-rejoin-deadline", "60"), 3600).value_or(60));
}

std::optional<std::chrono::milliseconds> hang_timeout_of(const ResolvedOptions& options) {
  const std::string hang = options.value_or("primus-hang-timeout", "off");
  if (hang == "off" || hang == "0") return std::nullopt;
  return std::chrono::seconds(parse_unsigned(hang, std::uint64_t{7} * 24 * 3600).value_or(0));
}

std::uint32_t env_number(const Environment& env, std::string_view name, std::uint32_t fallback) {
  const auto value = lookup(env, name);
  if (!value) return fallback;
  return static_cast<std::uint32_t>(parse_unsigned(*value, 1U << 30).value_or(fallback));
}

// What the monitor needs from the options: intervals, --primus-metrics, --primus-metrics-file
// and the site's file_sd directory (PRIMUS_METRICS_SD_DIR, set by the plugin at submission).
JobMonitorSetup monitor_setup(const ResolvedOptions& options, const Environment& env,
                              const std::filesystem::path& job_dir, const std::string& job_id,
                              std::uint32_t allocation, const std::string& node) {
  JobMonitorSetup m;
  m.job_dir = job_dir;
  m.job_id = job_id;
  m.allocation = allocation;
  m.node = node;
  const auto interval = option_number(options, "primus-heartbeat-interval", 3600);
  m.status_interval = std::chrono::seconds(interval > 0 ? interval : 5);
  m.progress_interval =
      std::chrono::seconds(option_number(options, "primus-progress-interval", 3600));
  m.straggler_window_seconds = option_number(options, "primus-straggler-window", 3600);
  if (const auto metrics = options.get("primus-metrics")) {
    m.metrics = parse_listen_address(metrics->value);
    if (!m.metrics)
      throw cli::UsageError("--primus-metrics: expected [ADDR:]PORT, got '" + metrics->value + "'");
  }
  if (const auto file = options.get("primus-metrics-file")) {
    m.metrics_file = absolute_from_here(file->value);
  }
  // The site's file_sd directory: the plugin's metrics_sd_dir in the plugstack (a job submitted
  // with --primus also has it as PRIMUS_METRICS_SD_DIR).
  if (m.metrics && lookup(env, "SLURM_JOB_ID")) {
    const auto sd_dir = lookup(env, "PRIMUS_METRICS_SD_DIR");
    const auto site = sd_dir ? sd_dir : site_setting("metrics_sd_dir");
    if (site && !site->empty() && site->front() == '/') m.sd_dir = *site;
  }
  m.sd_name = job_id;
  m.terminal = ::isatty(STDERR_FILENO) == 1;
  return m;
}

// What --primus-spare-nodes, --primus-elastic and --primus-global-batch-size ask of the
// placement.
NodePolicy node_policy(const ResolvedOptions& options) {
  NodePolicy policy;
  policy.spare_nodes = option_number(options, "primus-spare-nodes", 1000);
  const std::string elastic = options.value_or("primus-elastic", "off");
  if (elastic != "off") policy.elastic_min = option_number(options, "primus-elastic", 100000);
  if (const auto batch = options.get("primus-global-batch-size")) {
    policy.global_batch = parse_unsigned(batch->value, std::uint64_t{1} << 40);
  }
  return policy;
}

}  // namespace primus::launch
