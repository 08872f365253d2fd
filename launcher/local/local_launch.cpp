// primus-launch on this machine, --nproc N (launch_settings.hpp): the job's setup (its
// directory, secret, control channel on the loopback), then the one supervisor over the local
// runner (local_attempt.hpp).
#include <sys/prctl.h>
#include <unistd.h>

#include <iostream>

#include "cli/launch_settings.hpp"
#include "cli/self_process.hpp"
#include "local/local_attempt.hpp"
#include "primus/common.hpp"
#include "primus/os/cpus.hpp"
#include "primus/os/job_secret.hpp"
#include "process/child_process.hpp"
#include "process/reaper.hpp"
#include "supervise/job_dir.hpp"
#include "supervise/resume.hpp"
#include "supervise/supervisor.hpp"

namespace primus::launch {

int local_launch(const Settings& s, const Environment& env, const ResolvedCommand& command) {
  // The job directory: --primus-job-dir (or PRIMUS_JOB_DIR), else ./primus-local, so that the
  // same command in the same directory resumes.
  const std::filesystem::path job_path = absolute_from_here(
      resolve_job_dir(s.options, std::filesystem::current_path().string(), "", true));
  const JobDir job_dir(job_path);
  LocalCommand local;
  local.executable = command.path;
  local.argv = s.command;
  local.env = env;
  local.options = with_job_dir(s, job_path);
  const ResolvedOptions& options = local.options;
  const std::uint32_t allocation = job_dir.next_allocation();
  EventLog events(job_dir.events_file(), allocation);
  const std::string node = this_hostname();

  OneMachineJob& job = local.job;
  job.nproc = s.nproc;
  job.hostname = node;
  job.job_id = "local-" + std::to_string(::getpid());
  job.submit_dir = std::filesystem::current_path().string();
  job.port_seed = static_cast<std::uint64_t>(::getpid());
  job.job_secret = os::make_job_secret();
  job.cpus = os::usable_cpus();
  say_omp_threads(env, job.cpus, s.nproc);
  // Before any thread starts: every thread must have the stop signals blocked, so that they
  // reach the signalfd only.
  block_launcher_signals();
  // The ranks report on this machine's loopback: heartbeats, checkpoints, hangs.
  ControlServer control("127.0.0.1", 0, job.job_secret, s.nproc, [](const std::string& line) {
    std::cerr << "primus-launch: control channel: " << line << "\n";
  });
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Reaper reaper;
  JobMonitor monitor(monitor_setup(options, env, job_path, job.job_id, allocation, node), events);
  events.write({"launched",
                std::nullopt,
                node,
                {{"nproc", std::to_string(s.nproc)},
                 {"command", command_text(s)},
                 {"mode", "one machine"}}});
  if (!dataset_ready(options, job_path, events, node)) return kExitUsage;

  SupervisedJob supervised;
  supervised.situation.allocation = allocation;
  supervised.situation.max_restarts = option_number(options, "primus-max-restarts", 1000);
  supervised.situation.preempted_status =
      static_cast<int>(option_number(options, "primus-exit-preempted", 125));
  supervised.node = node;
  supervised.job_id = job.job_id;
  supervised.ckpt_root = resolve_ckpt_dir(options, job.submit_dir, job_path.string());
  supervised.given_resume = lookup(env, "PRIMUS_RESUME");
  supervised.dynamic_data = dynamic_data(options);
  supervised.fresh = option_enabled(options, "primus-fresh");
  RunnerSettings settings;
  settings.node = node;
  settings.control = &control;
  settings.events = &events;
  settings.monitor = &monitor;
  settings.preempted_status = supervised.situation.preempted_status;
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
  LocalRunner runner(settings, std::move(local), reaper);
  return supervise(supervised, job_dir, runner, events, monitor);
}

}  // namespace primus::launch
