# shellcheck shell=bash disable=SC2154  # the caller sets top
# scripts/lib/testbed_report.sh: the Slurm testbed's state after an end-to-end suite failed, so
# that a failure seen only in CI says whether the cluster itself was broken (sourced by
# scripts/lib/e2e.sh). A node that stops answering, a daemon gone without a core, a slurmstepd
# or a job process that does not end: each leaves every later job pending, and the tests that
# follow fail by timing out, which alone says nothing of the cause.

# testbed_env: SLURM_CONF and PRIMUS_TESTBED_DIR of the running testbed (in the caller's shell).
testbed_env() {
  eval "$("$top/scripts/slurm-testbed" env)"
}

# testbed_processes: "pid" of every slurmstepd and job process of the testbed.
testbed_processes() {
  local f pid comm
  # shellcheck disable=SC2013 # /proc paths: one word each
  for f in $(grep -lzxF -- "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ 2>/dev/null); do
    pid=${f#/proc/}; pid=${pid%/environ}
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    if [[ $comm == slurmstepd ]] || grep -qz '^SLURM_JOB_ID=' "$f" 2>/dev/null; then
      echo "$pid"
    fi
  done
}

# testbed_daemons_down: the testbed's daemons that are not running, comma-separated.
testbed_daemons_down() {
  "$top/scripts/slurm-testbed" status 2>/dev/null | sed -n 's/^  \([a-z0-9-]*\) *stopped$/\1/p' \
    | paste -sd, -
}

# thread_backtraces PID LINES: where each thread of a live process waits.
thread_backtraces() {
  if ! command -v gdb >/dev/null; then echo "(no gdb here)"; return; fi
  timeout 60 gdb -p "$1" -batch -ex 'thread apply all bt 10' 2>&1 \
    | grep -vE '^(\[New LWP|warning: |\[Thread debugging|Using host libthread)' | head -"$2"
}

# testbed_report: daemons, nodes with the reason Slurm gives, jobs not ended with theirs, the
# testbed's processes (state, kernel wait channel, seconds alive); the threads of a slurmd whose
# node does not respond while its process lives, and of a slurmstepd alive a minute or more
# after the suite (a job's processes that do not end keep its nodes completing).
testbed_report() (
  testbed_env
  local pid node state pids
  echo "--- the testbed after the suite"
  "$top/scripts/slurm-testbed" status 2>&1 | grep -E '^  (munged|slurm)'
  echo "nodes (state, reason):"
  timeout 15 sinfo -h -N -o '  %N %T %E' 2>&1 | sort -u
  echo "jobs not ended (id, partition, state, reason, nodes):"
  timeout 15 squeue -h -o '  %i %P %T %r %N' 2>&1
  mapfile -t pids < <(testbed_processes)
  echo "slurmstepd and job processes: ${#pids[@]}"
  if [[ ${#pids[@]} -gt 0 ]]; then
    ps -o pid=,ppid=,stat=,wchan:22=,etimes=,user:12=,args= -p "$(IFS=,; echo "${pids[*]}")" \
      | cut -c1-170 | head -40
  fi
  while read -r node state; do
    [[ $state == *'*'* || $state == down* ]] || continue
    pid=$(cat "$PRIMUS_TESTBED_DIR/run/slurmd-$node.pid" 2>/dev/null) || continue
    [[ -d /proc/$pid ]] || continue
    echo "--- slurmd-$node (pid $pid) lives and its node is $state: its threads"
    thread_backtraces "$pid" 80
  done < <(timeout 15 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
  for pid in "${pids[@]}"; do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == slurmstepd ]] || continue
    [[ $(ps -o etimes= -p "$pid") -ge 60 ]] || continue
    echo "--- $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)(pid $pid) alive for a minute or more after the suite: its threads"
    thread_backtraces "$pid" 40
  done | head -130
)

# testbed_summary: one line: the nodes that are not idle, the daemons not running, the
# processes left and those in uninterruptible sleep.
testbed_summary() (
  testbed_env
  local nodes dead left stuck
  nodes=$(timeout 15 sinfo -h -N -o '%N %T' 2>/dev/null | sort -u | grep -v ' idle$' | paste -sd, -)
  dead=$(testbed_daemons_down)
  left=$(testbed_processes | wc -l)
  stuck=$(testbed_processes | while read -r p; do ps -o stat= -p "$p"; done | grep -c '^D' || true)
  echo "nodes not idle: ${nodes:-none}; daemons not running: ${dead:-none}; job processes left: $left (in D state: $stuck)"
)
