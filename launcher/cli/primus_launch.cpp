// primus-launch: one per allocation, it starts and supervises the ranks of a job (docs/man/
// primus-launch.1, docs/architecture.md "The launcher and its control channel"). Inside a Slurm
// allocation it runs the ranks as one srun step of task wrappers and supervises them through
// the control channel; outside one, --nproc N ranks on this machine, with the rank environment
// the plugin gives ranks under srun.
#include <malloc.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli/command_path.hpp"
#include "cli/job_commands.hpp"
#include "cli/launch_settings.hpp"
#include "cli/self_process.hpp"
#include "primus/common.hpp"
#include "process/rank_process.hpp"

namespace primus::launch {
namespace {

constexpr const char* kUsage =
    "Usage: primus-launch [options] [--] COMMAND [ARGS...]      (inside a Slurm allocation)\n"
    "       primus-launch [options] --nproc N [--] COMMAND [ARGS...]   (on this machine)\n"
    "       primus-launch status [JOBID|JOBDIR] [--json] [--watch [--interval S]]\n"
    "       primus-launch report [JOBID|JOBDIR] [--out DIR]\n"
    "       primus-launch stop [JOBID|JOBDIR]\n"
    "\n"
    "Starts COMMAND once per rank with the rank environment of primus(7) (RANK, WORLD_SIZE,\n"
    "LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...), supervises the ranks and ends them together.\n"
    "Inside an allocation the ranks are one srun step with the job's layout (srun's own\n"
    "options through its SLURM_* and SRUN_* input variables). COMMAND starts at the first word\n"
    "that is not an option (or after --); SCRIPT.py and -m MODULE run under the Python the\n"
    "primus package is installed for (PRIMUS_PYTHON overrides it), as torchrun runs them.\n"
    "  --nproc N          N ranks on this machine (outside a Slurm allocation); torchrun's\n"
    "                     --nproc-per-node N (or --nproc_per_node) too; inside an allocation\n"
    "                     the job's tasks per node\n"
    "  --label            prefix every output line with '<rank>: '\n"
    "  --help, --version\n"
    "Every --primus option of srun and sbatch is accepted (see primus(7)); PRIMUS_* variables\n"
    "apply below them. Among them: --primus-max-restarts=N (start the ranks again after a\n"
    "failure, default 0), --primus-max-requeues=N (3), --primus-hang-timeout=SECONDS (off),\n"
    "--primus-exit-preempted=STATUS (75), --primus-stop-grace=SECONDS (120: after a stop,\n"
    "SIGKILL to ranks still running), --primus-job-dir=PATH (default primus-JOBID in the\n"
    "submit directory, or ./primus-local on one machine: logs, events.jsonl, checkpoints).\n"
    "\n"
    "status [JOBID|JOBDIR]: the job's state, every rank (node, step, samples/s, lateness, last\n"
    "step, last checkpoint, memory, straggler) and every node (CPU, memory, network), from the\n"
    "job directory's status.json (rewritten every heartbeat interval). --json prints that file\n"
    "(its schema: primus-launch(1)); --watch redraws the table every --interval seconds (2).\n"
    "report [JOBID|JOBDIR]: report.html, PNG figures and report.json in JOBDIR/report (or\n"
    "--out DIR): samples/s per rank, the primus.log scalars and every event over time.\n"
    "stop [JOBID|JOBDIR]: asks the launcher of a job to stop its ranks gracefully; they save\n"
    "and exit, and the job is not requeued (default: $PRIMUS_JOB_DIR, else ./primus-local).\n"
    "\n"
    "Exit status: 0 the ranks finished (or stopped by primus-launch stop under Slurm); 75 they\n"
    "stopped for preemption or a time limit after a checkpoint; 1 the requeue cap was reached;\n"
    "2 a usage or configuration error; 126/127 COMMAND cannot run or is not found; otherwise\n"
    "the first failing rank's status (128+N for signal N).\n";

int launch(const std::vector<std::string>& args) {
  raise_open_file_limit();
  const Environment env = process_environment();
  Settings s = parse(args, env, kUsage);
  const ResolvedCommand command = resolve_command(s.command.front(), std::getenv("PATH"));
  if (command.status != 0) {
    std::cerr << "primus-launch: " << s.command.front() << ": " << command.reason << "\n";
    return command.status;
  }
  if (s.nproc == 0) return slurm_launch(s, env, command);
  return local_launch(s, env, command);
}

}  // namespace
}  // namespace primus::launch

int main(int argc, char** argv) {
  using namespace primus::launch;
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args.front() == "status") {
      return status_command(std::vector<std::string>(args.begin() + 1, args.end()), kUsage);
    }
    if (!args.empty() && args.front() == "report") {
      return report_command(std::vector<std::string>(args.begin() + 1, args.end()), kUsage);
    }
    if (!args.empty() && args.front() == "stop") {
      return stop_command(std::vector<std::string>(args.begin() + 1, args.end()), kUsage);
    }
    // The monitor builds status.json's text once a second (420 KB at 1,024 ranks) and frees
    // it: glibc gave that memory back to the kernel (brk) and took it again with fresh page
    // faults every second, 4 % of the launcher's CPU at 1,024 heartbeating ranks. The heap now
    // keeps up to 64 MiB of free memory, and only blocks of 16 MiB or more get their own mapping.
    ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
    ::mallopt(M_MMAP_THRESHOLD, 16 << 20);
    return launch(args);
  } catch (const std::exception& e) {
    std::cerr << "primus-launch: " << e.what() << "\n";
    return kExitUsage;
  }
}
