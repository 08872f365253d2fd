// What primus-launch asks Slurm (OS adapter around scontrol and scancel, with the parsing of
// their output pure): the job's state and PreemptTime, signals to the step, a requeue.
#pragma once

#include <chrono>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "process/run_command.hpp"

namespace primus::launch {

// `scontrol show job -o` prints one record of Key=Value words; a value may hold spaces (a
// command, a reason), so a word that does not start with Key= continues the previous value.
std::map<std::string, std::string> parse_scontrol_record(const std::string& line);

struct JobFacts {
  std::string state;       // JobState: RUNNING, CANCELLED, TIMEOUT, ...
  bool preempted = false;  // PreemptTime is set: the job is in its preemption grace time
  std::string preempt_time;
  std::string num_nodes;  // NumNodes and NumTasks: the job's layout, as sbatch or salloc got it
  std::string num_tasks;
  std::string comment;  // Comment: primus-launch records a job directory there
  // EndTime: when slurmctld ends the job at its time limit, as seconds since the epoch;
  // nullopt when scontrol says Unknown (a job without a time limit: during a preemption too,
  // until the grace time is over; seen on the testbed).
  std::optional<std::time_t> end_time;
  std::optional<std::time_t> preempted_at;  // PreemptTime, as seconds since the epoch
  std::string partition;
  std::string node_list;  // NodeList: the nodes the job holds now (a --no-kill job loses some)
  std::string excluded;   // ExcNodeList: the nodes the job may not be given
};
// From a parsed record (pure).
JobFacts job_facts(const std::map<std::string, std::string>& record);
// scontrol's time, 2026-12-02T20:25:29 in the local time zone, as seconds since the epoch;
// nullopt for anything else (Unknown, None).
std::optional<std::time_t> parse_slurm_time(const std::string& text);

// scontrol show job -o JOB; nullopt (and a line on stderr) when scontrol fails. `idle`: scontrol
// runs under SCHED_IDLE (run_command).
std::optional<JobFacts> query_job(const std::string& job, bool idle = false);
// scancel --signal=NAME TARGET (TARGET: "job" or "job.step"); true when scancel succeeded.
bool signal_job(const std::string& target, int sig);
// scancel TARGET: SIGKILL to a step (or the job).
bool cancel(const std::string& target);
// The Comment that tells `primus-launch status JOBID` where the job directory is (pure), and
// the directory back from a Comment (nullopt: not one of ours).
std::string job_dir_comment(const std::string& job_dir);
std::optional<std::string> job_dir_from_comment(const std::string& comment);
// scontrol update JobId=JOB Comment=TEXT, under SCHED_IDLE; the error scontrol printed when it
// fails.
std::optional<std::string> set_job_comment(const std::string& job, const std::string& text);
// The arguments of the Primus plugin's line in a plugstack.conf text (pure): the words after
// the plugin's path on the first line naming a primus.so; empty when there is none.
std::vector<std::string> primus_plugstack_arguments(const std::string& plugstack);
// The site's setting KEY (metrics_sd_dir, ...) as the plugstack gives it to the Primus plugin:
// scontrol show config for PlugStackConfig, then that file. nullopt when it is not set or
// cannot be read.
std::optional<std::string> site_setting(const std::string& key);
// The GraceTime of a partition from its parsed `scontrol show partition -o` record (pure), and
// asked of scontrol; nullopt when not known.
std::optional<std::chrono::seconds> grace_time(const std::map<std::string, std::string>& record);
std::optional<std::chrono::seconds> query_grace_time(const std::string& partition);
// scontrol show node -o NODE, parsed; nullopt (and a line on stderr) when scontrol fails.
std::optional<std::map<std::string, std::string>> query_node(const std::string& node);
// slurmctld's SlurmdTimeout (scontrol show config): how long a node's slurmd may be silent
// before slurmctld marks it DOWN; nullopt when not known.
std::optional<std::chrono::seconds> query_slurmd_timeout();
// The SlurmdTimeout line's value in `scontrol show config` output ("120 sec") (pure).
std::optional<std::chrono::seconds> slurmd_timeout(const std::string& config);
// scontrol requeue JOB; the error scontrol printed when it fails. With `excluded` nodes, the job
// goes back to the queue unable to get them: scontrol requeuehold, update ExcNodeList (the
// job's own and `excluded`; it can change only while the job is pending), release (checked on
// the testbed from inside the job itself, as its user: the three take about 40 ms, well within
// the KillWait after the hold's SIGTERM, which the launcher holds blocked).
std::optional<std::string> requeue_job(const std::string& job,
                                       const std::vector<std::string>& excluded = {});
// ExcNodeList's value for a job that had `current` (a hostlist, empty for none) and must also
// avoid `more` (pure): the union, compressed.
std::string merged_exclusions(const std::string& current, const std::vector<std::string>& more);

}  // namespace primus::launch
