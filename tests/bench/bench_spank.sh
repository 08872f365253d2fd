#!/usr/bin/env bash
# The cost of primus.so on step start: `srun -N4 -n8 /bin/true` with no plugin in the plugstack,
# with primus.so loaded but no --primus, and with --primus=pytorch, interleaved round by round in
# one run on the testbed (slurmstepd and srun read plugstack.conf at every step). Prints the median
# time of each and its ratio to the first. Needs a running testbed started with the plugin.
#   tests/bench/bench_spank.sh [ROUNDS]   (default 15)
set -euo pipefail
rounds=${1:-15}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
eval "$("$top/scripts/slurm-testbed" env)"
stack=$PRIMUS_TESTBED_DIR/plugstack.conf
loaded=$(cat "$stack")
grep -q primus.so <<<"$loaded" || { echo "the testbed does not load primus.so (PRIMUS_SPANK_PLUGIN)" >&2; exit 1; }
user=${PRIMUS_TESTBED_USER:-primus-test}
work=$(mktemp -d "$PRIMUS_TESTBED_DIR/work/bench.XXXXXX"); chown "$user" "$work"
trap 'printf "%s\n" "$loaded" > "$stack"; rm -rf "$work"' EXIT

run_once() {  # prints seconds for one srun
  local start end
  start=$(date +%s.%N)
  (cd "$work" && runuser -u "$user" -- env SLURM_CONF="$SLURM_CONF" srun -N4 -n8 "$@" /bin/true)
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }'
}
declare -a none plugin primus
for ((i = 0; i < rounds; i++)); do
  : > "$stack";                       none+=("$(run_once)")
  printf "%s\n" "$loaded" > "$stack"; plugin+=("$(run_once)")
  primus+=("$(run_once --primus=pytorch)")
done
median() { printf "%s\n" "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m0=$(median "${none[@]}"); m1=$(median "${plugin[@]}"); m2=$(median "${primus[@]}")
printf "srun -N4 -n8 /bin/true, %d interleaved rounds, median seconds\n" "$rounds"
printf "  %-32s %8.3f  1.00\n" "no plugin" "$m0"
printf "  %-32s %8.3f  %.2f\n" "primus.so, no --primus" "$m1" "$(awk -v a="$m1" -v b="$m0" 'BEGIN { print a / b }')"
printf "  %-32s %8.3f  %.2f\n" "primus.so, --primus=pytorch" "$m2" "$(awk -v a="$m2" -v b="$m0" 'BEGIN { print a / b }')"
