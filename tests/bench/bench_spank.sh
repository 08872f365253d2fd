#!/usr/bin/env bash
# The cost of primus.so on step start: `srun -N4 -n8 /bin/true` with no plugin in the plugstack,
# with primus.so loaded but no --primus, and with --primus=pytorch, interleaved round by round in
# one run on the testbed (slurmstepd and srun read plugstack.conf at every step). The order of
# the three rotates from round to round, so that drift favours none of them. Prints the median
# time of each and its ratio to the first, against the goal: both ratios <= 1.05. Exits 1 when a
# goal is missed or an srun fails. Needs a running testbed started with the plugin.
#   tests/bench/bench_spank.sh [ROUNDS]   (default 30; a multiple of 3 gives each variant each
#                                          place in the order equally often; with 15 the medians
#                                          moved by up to 9 ms, 6 %, from run to run)
set -euo pipefail
export LC_ALL=C  # printf's %f reads the decimal point that awk prints
rounds=${1:-30}
goal=1.05
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench_spank.sh: ROUNDS must be a positive number, got '$rounds'" >&2; exit 2; }
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
testbed_env=$("$top/scripts/slurm-testbed" env)
eval "$testbed_env"
stack=$PRIMUS_TESTBED_DIR/plugstack.conf
loaded=$(cat "$stack")
grep -q primus.so <<<"$loaded" || { echo "the testbed does not load primus.so (PRIMUS_SPANK_PLUGIN)" >&2; exit 1; }
user=${PRIMUS_TESTBED_USER:-primus-test}
work=$(mktemp -d "$PRIMUS_TESTBED_DIR/work/bench.XXXXXX"); chown "$user" "$work"
trap 'printf "%s\n" "$loaded" > "$stack"; rm -rf "$work"' EXIT

labels=("no plugin" "primus.so, no --primus" "primus.so, --primus=pytorch")

# Prints the seconds one srun of variant $1 took (0, 1 or 2: an index into labels); returns 1
# when srun fails. A command substitution does not inherit set -e: every step checks itself.
run_once() {
  local variant=$1 start end args=()
  if [[ $variant -eq 0 ]]; then
    : > "$stack" || return 1
  else
    printf "%s\n" "$loaded" > "$stack" || return 1
  fi
  [[ $variant -eq 2 ]] && args=(--primus=pytorch)
  start=$(date +%s.%N) || return 1
  if ! (cd "$work" && runuser -u "$user" -- env SLURM_CONF="$SLURM_CONF" \
      srun -N4 -n8 "${args[@]}" /bin/true) >&2; then
    echo "bench_spank.sh: srun -N4 -n8 ${args[*]} /bin/true failed (${labels[variant]})" >&2
    return 1
  fi
  end=$(date +%s.%N) || return 1
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }'
}

declare -a times0 times1 times2
for ((i = 0; i < rounds; i++)); do
  for ((k = 0; k < 3; k++)); do
    v=$(( (i + k) % 3 ))  # round 0: 0 1 2, round 1: 1 2 0, round 2: 2 0 1, ...
    t=$(run_once "$v") || exit 1
    case $v in 0) times0+=("$t") ;; 1) times1+=("$t") ;; 2) times2+=("$t") ;; esac
  done
done
median() { printf "%s\n" "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
medians=("$(median "${times0[@]}")" "$(median "${times1[@]}")" "$(median "${times2[@]}")")
m0=${medians[0]}
printf "srun -N4 -n8 /bin/true, %d rounds in rotating order, median seconds (goal: ratio <= %s)\n" "$rounds" "$goal"
printf "  %-32s %8.3f  1.00\n" "${labels[0]}" "$m0"
missed=0
for v in 1 2; do
  # ratio, verdict and the excess over the goal, from one awk.
  read -r ratio verdict over < <(awk -v a="${medians[v]}" -v b="$m0" -v g="$goal" 'BEGIN {
    if (b <= 0) { print "nan", "no-baseline", 0; exit }
    r = a / b; printf "%.3f %s %.4f\n", r, (r <= g ? "met" : "missed"), a - g * b }')
  printf "  %-32s %8.3f  %.2f\n" "${labels[v]}" "${medians[v]}" "$ratio"
  case $verdict in
    met) ;;
    missed)
      printf "GOAL NOT MET: %s: median %.3f s is %.3f x no plugin's %.3f s (goal <= %s, over by %.3f s)\n" \
        "${labels[v]}" "${medians[v]}" "$ratio" "$m0" "$goal" "$over"
      missed=1 ;;
    *)
      echo "MISSING: the no-plugin median is $m0 s: nothing to compare ${labels[v]} with"
      missed=1 ;;
  esac
done
if [[ $missed -ne 0 ]]; then exit 1; fi
echo "all goals met"
