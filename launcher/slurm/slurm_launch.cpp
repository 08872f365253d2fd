// primus-launch inside a Slurm allocation (launch_settings.hpp): the job's setup (its
// directory, secret, control channel, layout and placement), then the one supervisor over an
// srun step per attempt (slurm_runner.hpp).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>

#include "../../common/cli/command_line.hpp"
#include "cli/launch_settings.hpp"
#include "cli/self_process.hpp"
#include "local/local_attempt.hpp"
#include "primus/common.hpp"
#include "primus/common/slurm_step.hpp"
#include "primus/common/tasks_per_node.hpp"
#include "primus/os/cpus.hpp"
#include "primus/os/job_secret.hpp"
#include "primus/os/node_address.hpp"
#include "process/child_process.hpp"
#include "slurm/lost_nodes.hpp"
#include "slurm/node_exclusions.hpp"
#include "slurm/slurm_queries.hpp"
#include "slurm/slurm_runner.hpp"
#include "slurm/step_layout.hpp"
#include "supervise/job_dir.hpp"
#include "supervise/resume.hpp"
#include "supervise/supervision.hpp"
#include "supervise/supervisor.hpp"

namespace primus::launch {
namespace {

// The ranks of the step srun starts in this allocation with no layout options of its own.
std::uint32_t slurm_world_size(const Environment& env) {
  if (const auto n = env_number(env, "SLURM_NTASKS", 0); n > 0) return n;
  const std::uint32_t nodes =
      env_number(env, "SLURM_JOB_NUM_NODES", env_number(env, "SLURM_NNODES", 1));
  return std::max<std::uint32_t>(1, nodes);
}

// primus-task, what every task of the step runs: beside primus-launch in the build tree, else in
// the libexec directory beside the bin directory it is installed in (an install moved whole, or
// `make install prefix=...`, keeps working), else where configure put it.
std::string task_executable() {
  const std::filesystem::path self = self_executable();
  const std::vector<std::filesystem::path> dirs = {
      self.parent_path(), self.parent_path().parent_path() / "libexec" / "primus",
      std::filesystem::path(PRIMUS_PKGLIBEXECDIR)};
  if (const auto found = installed_part(dirs, "primus-task", X_OK)) return found->string();
  throw Error("cannot find primus-task, which every task of the step runs (looked in " +
              listed_dirs(dirs) + "); reinstall Primus");
}

// `exec primus-launch` matters for --signal=B:...: Slurm signals the batch shell, which does not
// pass the signal on to a child.
void warn_without_exec() {
  const auto comm = [](pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(in, name);
    return name;
  };
  const auto parent_of = [](pid_t pid) -> pid_t {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t ppid = -1;
    rest >> state >> ppid;
    return ppid;
  };
  // The batch script runs as slurm_script, a child of slurmstepd; exec'd, the launcher is that
  // child itself.
  const pid_t parent = ::getppid();
  if (comm(parent) != "slurmstepd" && comm(parent_of(parent)) == "slurmstepd") {
    std::cerr << "primus-launch: note: the batch script runs primus-launch without exec; a "
                 "signal for the batch shell (sbatch --signal=B:SIG@T) stops at the shell. "
                 "Write 'exec primus-launch ...' or use --signal=SIG@T (no B:).\n";
  }
}

// The control channel's address: --primus-control-addr=HOST[:PORT], else this node's.
std::pair<std::string, std::uint16_t> control_address(const ResolvedOptions& options,
                                                      const std::string& node) {
  if (const auto given = options.get("primus-control-addr")) {
    const std::string& value = given->value;
    const auto colon = value.rfind(':');
    std::uint16_t port = 0;
    if (colon != std::string::npos) {
      port = static_cast<std::uint16_t>(*parse_unsigned(value.substr(colon + 1), 65535));
    }
    return {os::resolve_node_address(value.substr(0, colon), "--primus-control-addr"), port};
  }
  return {os::resolve_node_address(
              node,
              "the control channel's address (this node's name; --primus-control-addr=HOST "
              "chooses one that every node of the job can reach)"),
          0};
}

// The layout and, with --primus-spare-nodes or --primus-elastic, the placement's inputs: the
// same number of tasks on every node, on the job's nodes less the spares.
void plan_layout(SlurmJob& job, const Environment& env) {
  job.policy = node_policy(job.options);
  job.placing = places_ranks(job.policy);
  const bool placing = job.placing;
  job.job_nodes = hosts_of(
      lookup(env, "SLURM_JOB_NODELIST").value_or(lookup(env, "SLURM_NODELIST").value_or("")));
  if (const auto per_node = lookup(env, "SLURM_TASKS_PER_NODE")) {
    try {
      const TasksPerNode layout = TasksPerNode::parse(*per_node, "SLURM_TASKS_PER_NODE");
      job.tasks_per_node = layout.max_tasks();
      if (placing && layout.runs().size() != 1) {
        throw cli::UsageError(
            "--primus-spare-nodes and --primus-elastic need the same number of tasks on every "
            "node, and the job has SLURM_TASKS_PER_NODE=" +
            *per_node + " (submit with --ntasks-per-node)");
      }
    } catch (const cli::UsageError&) {
      throw;
    } catch (const std::exception&) {
      if (placing) throw;
    }
  }
  job.rank_nodes = static_cast<std::uint32_t>(job.job_nodes.size());
  if (placing) {
    if (job.job_nodes.empty()) {
      throw Error(
          "--primus-spare-nodes/--primus-elastic: cannot read the job's nodes "
          "(SLURM_JOB_NODELIST)");
    }
    if (job.job_nodes.size() <= job.policy.spare_nodes) {
      throw cli::UsageError("--primus-spare-nodes=" + std::to_string(job.policy.spare_nodes) +
                            ": the job holds " + std::to_string(job.job_nodes.size()) +
                            " node(s); ask for that many nodes more than the ranks use (-N)");
    }
    job.rank_nodes = static_cast<std::uint32_t>(job.job_nodes.size()) - job.policy.spare_nodes;
    if (job.policy.elastic_min && *job.policy.elastic_min > job.rank_nodes) {
      throw cli::UsageError("--primus-elastic=" + std::to_string(*job.policy.elastic_min) +
                            ": the ranks use only " + std::to_string(job.rank_nodes) + " node(s)");
    }
  }
  job.world_size = placing ? job.rank_nodes * job.tasks_per_node : slurm_world_size(env);
}

// Without placement the ranks take every node of the allocation: none of them may be one the
// job excluded (given by Slurm to a job requeued without its ExcNodeList, by hand or by Slurm
// itself). Why not, or empty.
std::string excluded_nodes_held(const SlurmJob& job, const std::filesystem::path& job_path) {
  if (job.placing) return "";
  std::string held;
  for (const Exclusion& e : job.exclusions->load()) {
    if (std::find(job.job_nodes.begin(), job.job_nodes.end(), e.node) == job.job_nodes.end()) {
      continue;
    }
    held += (held.empty() ? "" : "; ") + e.node + " (" + e.reason + ")";
  }
  if (held.empty()) return "";
  return "the allocation includes nodes this job excluded: " + held +
         "; submit with --exclude=NODES, or with --primus-spare-nodes=K and K nodes more (" +
         (job_path / "excluded-nodes.json").string() + ")";
}

// `primus-launch status JOBID` finds a job directory that is not the default one through the
// job's Comment (when the user left it empty). Recorded once the first srun has started: the
// two scontrol calls then overlap the step's start instead of delaying it. They run under
// SCHED_IDLE, taking only CPU time the step's start leaves: on 2 CPUs, 4 nodes x 2 tasks of
// /bin/true, a launch that records its directory took 341 ms against 333 ms for one that has
// none to record (25 interleaved rounds); under SCHED_IDLE the gap was 1 to 9 ms over five such
// runs, within what the runs vary by. Once per job: the job directory keeps a mark naming the
// job whose Comment is settled (recorded, or the user's own), and a later launch in the same
// job (a script that runs several; a requeued job's next run, which keeps its Comment) skips
// both calls: 1.5 to 4 ms a launch in the same setup (three runs of 25 rounds).
std::function<void()> job_dir_recorder(const std::string& job,
                                       const std::filesystem::path& job_path, bool needed) {
  const std::filesystem::path mark = job_path / "comment-recorded";
  if (needed) {
    std::ifstream in(mark);
    std::string recorded;
    if (in >> recorded && recorded == job) needed = false;
  }
  auto pending = std::make_shared<bool>(needed);
  return [job, job_path, mark, pending] {
    if (!*pending) return;
    *pending = false;
    const auto facts = query_job(job, /*idle=*/true);
    if (!facts) return;
    if (facts->comment.empty()) {
      if (const auto error = set_job_comment(job, job_dir_comment(job_path.string()))) {
        std::cerr << "primus-launch: note: cannot record the job directory in the job's Comment ("
                  << *error << "); primus-launch status needs JOBDIR for this job\n";
        return;
      }
    }
    std::ofstream(mark, std::ios::trunc) << job << "\n";
  };
}

}  // namespace

int slurm_launch(const Settings& s, const Environment& given_env, const ResolvedCommand& command) {
  SlurmJob job;
  job.job = *lookup(given_env, "SLURM_JOB_ID");
  // Run as a task of a step (srun --overlap -N1 -n1 primus-launch), the launcher starts the
  // ranks with the job's layout, not that step's one task.
  std::string resized;
  job.env = inside_a_step(given_env)
                ? job_layout_environment(given_env, query_job(job.job).value_or(JobFacts{}))
                : fit_to_allocation(given_env, resized);
  if (!resized.empty()) std::cerr << "primus-launch: " << resized << "\n";
  const Environment& env = job.env;
  const std::string job_id = primus_job_id(env);
  // What `scontrol requeue` names: <array job>_<task> in an array (the array job's own id
  // would requeue every task).
  job.requeue_target =
      lookup(env, "SLURM_ARRAY_JOB_ID") && lookup(env, "SLURM_ARRAY_TASK_ID")
          ? *lookup(env, "SLURM_ARRAY_JOB_ID") + "_" + *lookup(env, "SLURM_ARRAY_TASK_ID")
          : job.job;
  const std::string submit_dir =
      lookup(env, "SLURM_SUBMIT_DIR").value_or(std::filesystem::current_path().string());
  const std::filesystem::path job_path =
      absolute_from_here(resolve_job_dir(s.options, submit_dir, job_id));
  const JobDir job_dir(job_path);
  job.allocation = env_number(env, "SLURM_RESTART_COUNT", 0);
  job.max_requeues = option_number(s.options, "primus-max-requeues", 1000);
  const ResolvedCommand srun = resolve_command("srun", std::getenv("PATH"));
  if (srun.status != 0) {
    std::cerr << "primus-launch: srun: " << srun.reason << " (inside an allocation the ranks "
              << "are started with srun)\n";
    return srun.status;
  }
  job.srun = srun.path;
  job.executable = command.path;
  job.argv = s.command;
  job.options = with_job_dir(s, job_path);
  const ResolvedOptions& options = job.options;
  // The job's secret when sbatch or salloc made one (--primus); otherwise one for this launch,
  // which srun's plugin keeps for the step.
  job.secret = lookup(env, "PRIMUS_JOB_SECRET").value_or("");
  if (!os::is_job_secret(job.secret)) job.secret = os::make_job_secret();
  const std::string node = lookup(env, "SLURMD_NODENAME").value_or(this_hostname());
  const auto [control_host, control_port] = control_address(options, node);
  plan_layout(job, env);
  say_omp_threads(env, std::min(env_number(env, "SLURM_CPUS_ON_NODE", 0), os::online_cpus()),
                  job.tasks_per_node);
  const NodeExclusions exclusions(job_path / "excluded-nodes.json");
  job.exclusions = &exclusions;

  SupervisedJob supervised;
  JobSituation& situation = supervised.situation;
  situation.slurm = true;
  situation.allocation = job.allocation;
  situation.max_restarts = option_number(options, "primus-max-restarts", 1000);
  situation.max_requeues = job.max_requeues;
  situation.preempted_status =
      static_cast<int>(option_number(options, "primus-exit-preempted", 125));
  situation.placing = job.placing;
  // Restarts after a lost node: at least one per spare, and one per node the job may shrink by.
  situation.node_restarts = job.policy.spare_nodes +
                            (job.policy.elastic_min ? job.rank_nodes - *job.policy.elastic_min : 0);
  supervised.node = node;
  supervised.job_id = job_id;
  supervised.requeue_target = job.requeue_target;
  supervised.exclusions = &exclusions;
  supervised.exclude_after = option_number(options, "primus-exclude-after", 1000);
  supervised.dynamic_data = dynamic_data(options);
  supervised.fresh = option_enabled(options, "primus-fresh") && job.allocation == 0;

  block_launcher_signals();  // before the control channel's thread starts
  ControlServer control(control_host, control_port, job.secret, job.world_size,
                        [](const std::string& line) {
                          std::cerr << "primus-launch: control channel: " << line << "\n";
                        });
  EventLog events(job_dir.events_file(), job.allocation);
  JobMonitor monitor(monitor_setup(options, env, job_path, job_id, job.allocation, node), events);
  warn_without_exec();
  monitor.set_excluded_nodes(excluded_for_status(exclusions));
  job.after_start = job_dir_recorder(
      job.job, job_path, job_path != absolute_from_here(submit_dir) / ("primus-" + job_id));
  events.write({"launched",
                std::nullopt,
                node,
                {{"job", job_id},
                 {"ranks", std::to_string(job.world_size)},
                 {"command", command_text(s)},
                 {"mode", "slurm"},
                 {"control", control.address()}}});

  if (!dataset_ready(options, job_path, events, node)) return kExitUsage;
  job.task = task_executable();
  supervised.ckpt_root = resolve_ckpt_dir(options, submit_dir, job_path.string());
  supervised.given_resume = lookup(env, "PRIMUS_RESUME");
  if (const std::string why = excluded_nodes_held(job, job_path); !why.empty()) {
    std::cerr << "primus-launch: not starting the ranks: " << why << "\n";
    events.write({"failed", std::nullopt, node, {{"exit_status", "1"}, {"reason", why}}});
    monitor.set_state("failed");
    return 1;
  }
  RunnerSettings settings;
  settings.node = node;
  settings.control = &control;
  settings.events = &events;
  settings.monitor = &monitor;
  settings.preempted_status = situation.preempted_status;
  settings.hang_timeout = hang_timeout_of(options);
  settings.stop_grace = stop_grace_of(options);
  settings.warning_signal = signal_number(options.value_or("primus-preempt-signal", "USR2"));
  settings.stop_request = job_dir.stop_request_file();
  settings.label = s.label;
  settings.rejoin = options.value_or("primus-recover", "restart") == "rejoin";
  settings.rejoin_deadline = rejoin_deadline_of(options);
  settings.standby = !option_enabled(options, "primus-no-standby");
  settings.resolve_resume = [&supervised, &events, &node] {
    return resolve_resume(supervised.ckpt_root, supervised.given_resume, events, node);
  };
  SlurmRunner runner(settings, std::move(job));
  return supervise(supervised, job_dir, runner, events, monitor);
}

}  // namespace primus::launch
