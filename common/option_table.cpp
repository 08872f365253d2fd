// The rows of the option table. To add a setting, add a row here: the plugin, primus-launch,
// the environment parser and the man page pick it up.
#include <algorithm>

#include "option_validators.hpp"
#include "primus/common/options.hpp"

namespace primus {

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = {
      {"primus", "PRIMUS_FRAMEWORK", "framework", "FRAMEWORK", OptionArg::kOptional,
       OptionScope::kUser, "pytorch", "", validators::framework,
       "Run the job or step with Primus, for FRAMEWORK: pytorch (the default when no value is "
       "given), tensorflow, or none to turn Primus off for a step. The plugstack key sets the "
       "framework that --primus alone selects; it turns Primus on for no job."},
      {"primus-ckpt-dir", "PRIMUS_CKPT_DIR", "", "PATH", OptionArg::kRequired, OptionScope::kUser,
       "", "", validators::path,
       "Directory for the job's checkpoints. Default: $PRIMUS_JOB_DIR/ckpt. A relative path is "
       "taken from the submit directory; it must lie under the site's allowed roots, if any."},
      {"primus-ckpt-trust-shared", "PRIMUS_CKPT_TRUST_SHARED", "ckpt_trust_shared", "",
       OptionArg::kNone, OptionScope::kUser, "1", "0", validators::boolean,
       "Load checkpoints from a directory that other users can write (a group-shared or "
       "world-writable root). Refused by default: a checkpoint is input as trusted as code, and "
       "in such a directory someone else may have put it."},
      {"primus-fresh", "PRIMUS_FRESH", "", "", OptionArg::kNone, OptionScope::kUser, "1", "0",
       validators::boolean,
       "Start the job afresh: before its first start, move its checkpoint directory aside as "
       "CKPT.old-TIME (kept, never mixed with the new run's), so that it does not resume from an "
       "earlier run's checkpoints. A requeue or a restart of the same job still resumes from its "
       "own. Done by primus-launch, else by rank 0 of a plain srun or script."},
      {"primus-coll-integrity", "PRIMUS_COLL_INTEGRITY", "coll_integrity", "", OptionArg::kNone,
       OptionScope::kUser, "1", "0", validators::boolean,
       "Authenticate every message of Primus's own connections (its CPU collectives and TCP "
       "store), not only the connection: a tag per 64 KiB under a key of each connection, so that "
       "data altered on the way is refused instead of used. Costs CPU time (about 1.2 x at 1 MiB "
       "and 1.3 x at 64 MiB per allreduce here); the data is not encrypted. Every rank of a step "
       "must agree."},
      {"primus-job-dir", "PRIMUS_JOB_DIR", "", "PATH", OptionArg::kRequired, OptionScope::kUser, "",
       "", validators::path,
       "Directory for the job's logs and events. Default: primus-$PRIMUS_JOB_ID in the submit "
       "directory."},
      {"primus-master-port", "PRIMUS_MASTER_PORT", "master_port", "PORT|auto", OptionArg::kRequired,
       OptionScope::kUser, "", "auto", validators::port_or_auto,
       "MASTER_PORT for the rendezvous. auto takes it from the ports Slurm reserved for the step "
       "(MpiParams=ports) or derives it from the job and step ids."},
      {"primus-bind-gpus", "PRIMUS_BIND_GPUS", "bind_gpus", "auto|none", OptionArg::kRequired,
       OptionScope::kUser, "", "auto", validators::auto_or_none,
       "auto: where every rank of a node sees all of its GPUs, give each local rank a disjoint "
       "block in CUDA_VISIBLE_DEVICES (GPUs that Slurm bound per task are left alone). none: "
       "leave CUDA_VISIBLE_DEVICES as Slurm set it."},
      {"primus-max-restarts", "PRIMUS_MAX_RESTARTS", "max_restarts", "N", OptionArg::kRequired,
       OptionScope::kUser, "", "0", validators::restart_count,
       "primus-launch: start the ranks again in the same allocation, from the newest committed "
       "checkpoint, up to N times after a rank fails (0: the first failure ends the job)."},
      {"primus-exit-preempted", "PRIMUS_EXIT_PREEMPTED", "exit_preempted", "STATUS",
       OptionArg::kRequired, OptionScope::kUser, "", "75", validators::exit_status,
       "The exit status of a rank, and of primus-launch, that stopped as asked (preemption, a "
       "time limit, primus-launch stop) after saving a checkpoint. Default 75 (EX_TEMPFAIL); "
       "sites may set RequeueExit=75 in slurm.conf."},
      {"primus-max-requeues", "PRIMUS_MAX_REQUEUES", "max_requeues", "N", OptionArg::kRequired,
       OptionScope::kUser, "", "3", validators::requeue_count,
       "primus-launch: put a job that stopped at its time limit (after a checkpoint) back in the "
       "queue while it has been requeued fewer than N times (SLURM_RESTART_COUNT, every kind of "
       "requeue counted); at the cap it exits 1. A preempted job is always requeued once."},
      {"primus-preempt-signal", "PRIMUS_PREEMPT_SIGNAL", "preempt_signal", "SIG",
       OptionArg::kRequired, OptionScope::kUser, "", "USR2", validators::stop_signal,
       "The warning signal that, like SIGTERM, makes the ranks save at the next step and exit "
       "with --primus-exit-preempted: give the same to sbatch --signal (for example "
       "--signal=USR2@120)."},
      {"primus-hang-timeout", "PRIMUS_HANG_TIMEOUT", "hang_timeout", "SECONDS|off",
       OptionArg::kRequired, OptionScope::kUser, "", "off", validators::seconds_or_off,
       "primus-launch: end the attempt when a rank's steps (or its heartbeats) stop advancing "
       "for SECONDS, naming that rank (then restart it under --primus-max-restarts). Only ranks "
       "that report through the primus package are watched."},
      {"primus-recover", "PRIMUS_RECOVER", "recover", "rejoin|restart", OptionArg::kRequired,
       OptionScope::kUser, "", "restart", validators::recover_mode,
       "primus-launch: what a rank's failure does. restart: every rank ends and starts again "
       "from the newest committed checkpoint. rejoin (CPU ranks under primus.train; on one "
       "machine, and under srun for a rank's failure or hang): the other ranks stay alive, a "
       "replacement starts (under srun in the failed rank's own task), and every rank goes on "
       "from that checkpoint in the same attempt, bitwise as after a restart; where a rejoin "
       "cannot be made (no checkpoint yet, a rank that cannot rejoin, its deadline) the restart "
       "is made. Each rejoin counts against --primus-max-restarts."},
      {"primus-rejoin-deadline", "PRIMUS_REJOIN_DEADLINE", "rejoin_deadline", "SECONDS",
       OptionArg::kRequired, OptionScope::kUser, "", "60", validators::seconds,
       "primus-launch: how long a rejoin (--primus-recover=rejoin) may take, from the failure to "
       "every rank's groups up again, before the ranks are restarted instead."},
      {"primus-rejoin-memory", "PRIMUS_REJOIN_MEMORY", "rejoin_memory", "MIB", OptionArg::kRequired,
       OptionScope::kUser, "", "4096", validators::mebibytes,
       "With --primus-recover=rejoin, each rank keeps its newest committed checkpoint in memory "
       "(two copies at most: the committed one and the next save's), so that a rejoin restores "
       "from memory and a broadcast rather than from the file system; every byte restored is "
       "checked against the CRC-32C in the checkpoint's manifest, and a copy that does not verify "
       "gives way to the file. MIB bounds those copies per rank (0: none kept); a state whose two "
       "copies do not fit is not kept, with a warning."},
      {"primus-no-standby", "PRIMUS_NO_STANDBY", "no_standby", "", OptionArg::kNone,
       OptionScope::kUser, "1", "0", validators::boolean,
       "primus-launch, with --primus-recover=rejoin: start a failed rank's replacement afresh. "
       "By default a standby Python process, started once every rank is up, has imported torch "
       "and primus already and becomes the replacement, which saves the interpreter's start and "
       "torch's import (most of a rejoin). Only a command that runs a Python script or module "
       "(python SCRIPT, python -m MODULE) can have one; its output is in standby-N.log until it "
       "becomes a rank. Under srun there is one per node, started by the node's first task "
       "(standby-NODE.log), and each replacement on the node is a fork of it."},
      {"primus-stop-grace", "PRIMUS_STOP_GRACE", "stop_grace", "SECONDS", OptionArg::kRequired,
       OptionScope::kUser, "", "120", validators::seconds,
       "primus-launch: after asking the ranks to stop (a signal on one machine, primus-launch "
       "stop under Slurm), SIGKILL those still running SECONDS later. A stop that Slurm began "
       "(preemption, the time limit) ends by Slurm's own deadlines: GraceTime, the time limit."},
      {"primus-spare-nodes", "PRIMUS_SPARE_NODES", "", "K", OptionArg::kRequired,
       OptionScope::kUser, "", "0", validators::spare_nodes,
       "primus-launch: run the ranks on K nodes fewer than the job holds (submit with --no-kill "
       "and K more nodes); after a node is lost the ranks start again on a spare at the same "
       "world size, from the newest committed checkpoint, in the same allocation. Implies "
       "--primus-max-restarts of at least K."},
      {"primus-elastic", "PRIMUS_ELASTIC", "", "MIN_NODES|off", OptionArg::kRequired,
       OptionScope::kUser, "", "off", validators::elastic_nodes,
       "primus-launch: after a node is lost and no spare is left (submit with --no-kill), start "
       "the ranks again on the surviving nodes, at least MIN_NODES, from the newest checkpoint: "
       "the largest node count whose rank count divides the global batch size. Every record is "
       "still read exactly once per epoch."},
      {"primus-exclude-after", "PRIMUS_EXCLUDE_AFTER", "", "N", OptionArg::kRequired,
       OptionScope::kUser, "", "2", validators::exclude_after,
       "primus-launch: keep the ranks off a node where N different ranks failed (a lost node, "
       "a hang or a hardware error excludes it at once), in this allocation and every later one "
       "(excluded-nodes.json in the job directory)."},
      {"primus-heartbeat-interval", "PRIMUS_HEARTBEAT_INTERVAL", "heartbeat_interval", "SECONDS",
       OptionArg::kRequired, OptionScope::kUser, "", "5", validators::seconds,
       "How often each rank reports its progress to primus-launch (0: never)."},
      {"primus-metrics", "PRIMUS_METRICS", "", "[ADDR:]PORT", OptionArg::kRequired,
       OptionScope::kUser, "", "", validators::listen_address,
       "primus-launch: serve the job's metrics for Prometheus at http://ADDR:PORT/metrics "
       "(default address 127.0.0.1, only this node; port 0 picks a free one). The address is "
       "written to metrics.addr in the job directory. Anyone who can reach it can read the "
       "metrics: choose another address only on a trusted network."},
      {"primus-metrics-file", "PRIMUS_METRICS_FILE", "", "PATH", OptionArg::kRequired,
       OptionScope::kUser, "", "", validators::path,
       "primus-launch: write the job's metrics in Prometheus's text format to PATH every "
       "heartbeat interval (a temporary file, then a rename), for node_exporter's textfile "
       "collector."},
      {"primus-progress-interval", "PRIMUS_PROGRESS_INTERVAL", "progress_interval", "SECONDS",
       OptionArg::kRequired, OptionScope::kUser, "", "60", validators::seconds,
       "primus-launch: print a progress line (step, samples/s, time since the checkpoint) every "
       "SECONDS, at most every 10 s on a terminal (0: never)."},
      {"primus-straggler-window", "PRIMUS_STRAGGLER_WINDOW", "straggler_window", "SECONDS",
       OptionArg::kRequired, OptionScope::kUser, "", "60", validators::seconds,
       "primus-launch: a rank whose median lateness over the last SECONDS exceeds half the "
       "median step time is a straggler: an event, a warning and a flag in primus-launch status "
       "(0: not judged)."},
      {"primus-control-addr", "PRIMUS_CONTROL_ADDR", "", "HOST[:PORT]", OptionArg::kRequired,
       OptionScope::kUser, "", "", validators::host_and_port,
       "primus-launch: the address its control channel listens on, which every node must reach. "
       "Default: this node's address (its name as Slurm knows it), any free port."},
      {"primus-data", "PRIMUS_DATA", "", "SPEC", OptionArg::kRequired, OptionScope::kUser, "", "",
       validators::path,
       "The dataset that primus.data.Dataset reads: a glob (sorted by name), a directory (its "
       "files, sorted by name, not recursive), a single file, or @FILE, a manifest listing one "
       "file per line. primus-launch checks and indexes it before any rank starts."},
      {"primus-data-format", "PRIMUS_DATA_FORMAT", "data_format", "FORMAT", OptionArg::kRequired,
       OptionScope::kUser, "", "tfrecord", validators::data_format,
       "The dataset's record format: tfrecord (TFRecord framing, every CRC checked), lines (one "
       "record per text line) or fixed:N (records of N bytes)."},
      {"primus-data-mode", "PRIMUS_DATA_MODE", "", "static|dynamic", OptionArg::kRequired,
       OptionScope::kUser, "", "static", validators::data_mode,
       "static: every rank reads its share of every global batch (synchronous training). "
       "dynamic: primus-launch hands out splits of the dataset to the ranks that ask, so faster "
       "ranks read more (asynchronous or uneven work; not with DDP)."},
      {"primus-global-batch-size", "PRIMUS_GLOBAL_BATCH_SIZE", "", "N", OptionArg::kRequired,
       OptionScope::kUser, "", "", validators::global_batch_size,
       "Records per global batch (one step of all ranks together). Global batch k is the same "
       "records at every number of ranks, so a job resumes on more or fewer ranks exactly."},
      {"primus-seed", "PRIMUS_SEED", "", "N", OptionArg::kRequired, OptionScope::kUser, "", "0",
       validators::seed, "The seed of the shuffle: with the epoch, it fixes every epoch's order."},
      {"primus-shuffle", "PRIMUS_SHUFFLE", "", "none|records|blocks", OptionArg::kRequired,
       OptionScope::kUser, "", "records", validators::shuffle,
       "The order of each epoch: records (every record anywhere), blocks (runs of "
       "--primus-shuffle-block consecutive records, the runs shuffled: faster on disks) or none "
       "(as stored)."},
      {"primus-shuffle-block", "PRIMUS_SHUFFLE_BLOCK", "", "N", OptionArg::kRequired,
       OptionScope::kUser, "", "1024", validators::shuffle_block,
       "Records per run for --primus-shuffle=blocks."},
      {"primus-drop-last", "PRIMUS_DROP_LAST", "", "", OptionArg::kNone, OptionScope::kUser, "1",
       "0", validators::boolean,
       "Drop an epoch's last global batch when it is short, instead of splitting it among the "
       "ranks as evenly as possible (a rank's share may then be empty)."},
      {"primus-verbose", "PRIMUS_VERBOSE", "verbose", "", OptionArg::kNone, OptionScope::kUser, "1",
       "0", validators::boolean, "Log what Primus sets up for every rank."},
      {"port-range", "", "port_range", "LO-HI", OptionArg::kRequired, OptionScope::kSite, "",
       "20000-29999", validators::port_range,
       "Site: ports from which steps derive their block when Slurm reserves none (no "
       "MpiParams=ports in slurm.conf)."},
      {"ckpt-roots", "", "ckpt_roots", "DIR[:DIR...]", OptionArg::kRequired, OptionScope::kSite, "",
       "", validators::absolute_path_list,
       "Site: directories under which checkpoint and job directories must lie. Default: "
       "anywhere the user may write."},
      {"metrics-sd-dir", "", "metrics_sd_dir", "DIR", OptionArg::kRequired, OptionScope::kSite, "",
       "", validators::absolute_path,
       "Site: a directory where primus-launch of a job with --primus-metrics writes a "
       "Prometheus file_sd targets file <job id>.json, removed at the job's end, so that the "
       "site's Prometheus finds every running job (file_sd_configs). It must be writable by the "
       "users, like /tmp (mode 1777)."},
  };
  return table;
}

const std::vector<std::string_view>& reserved_option_names() {
  static const std::vector<std::string_view> names = {};
  return names;
}

namespace {

template <typename Field>
const OptionSpec* find_by(std::string_view wanted, Field field) {
  if (wanted.empty()) return nullptr;
  const auto& table = option_table();
  const auto it = std::find_if(table.begin(), table.end(),
                               [&](const OptionSpec& spec) { return spec.*field == wanted; });
  return it == table.end() ? nullptr : &*it;
}

}  // namespace

const OptionSpec* find_option(std::string_view name) {
  return find_by(name, &OptionSpec::name);
}

const OptionSpec* find_option_by_env(std::string_view env) {
  return find_by(env, &OptionSpec::env);
}

const OptionSpec* find_option_by_site_key(std::string_view key) {
  return find_by(key, &OptionSpec::site_key);
}

}  // namespace primus
