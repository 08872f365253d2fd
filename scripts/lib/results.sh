# shellcheck shell=bash disable=SC2154  # the caller sets the variables named below
# scripts/lib/results.sh: the suites of one scripts/test run, their times, its closing count and
# exit status, and CI's verdict on its output (sourced by scripts/test, .ci/run and
# tests/tools/test-results.test).
#
# The caller sets: results (the folder for results), python (the interpreter), here (scripts/),
# start_time (the run's start, date +%s).

suites=()            # NAME=PATH for count-results.py
notes=()             # said before the count
failures=0           # single checks recorded FAIL
declare -A suite_started=() suite_seconds=()

step() { printf '\n=== %s (%ds)\n' "$*" $(( $(date +%s) - start_time )); }

# suite_begin NAME: the suite's clock starts (its time is printed in the summary).
suite_begin() { suite_started[$1]=$(date +%s); }

# suite_end NAME PATH: the suite's results are at PATH (a folder, or a NAME.status file).
suite_end() {
  suites+=("$1=$2")
  [[ -n ${suite_started[$1]:-} ]] && suite_seconds[$1]=$(( $(date +%s) - ${suite_started[$1]} ))
  return 0
}

# record NAME PASS|FAIL|SKIP: a single check, counted as a suite of one.
record() {
  mkdir -p "$results"
  echo "$2" >"$results/$1.status"
  [[ $2 == FAIL ]] && failures=$((failures + 1))
  suite_end "$1" "$results/$1.status"
}

# finish: the notes, every suite's counts and time, the line 'N passed, N failed, N skipped' last;
# exits 1 when anything failed (a counted failure, a recorded FAIL, or no suite at all).
finish() {
  local note name rc timing=()
  step "results"
  for note in "${notes[@]}"; do echo "  note: $note"; done
  for name in "${!suite_seconds[@]}"; do timing+=(--seconds "$name=${suite_seconds[$name]}"); done
  "$python" "$here/lib/count-results.py" "${timing[@]}" "${suites[@]}"
  rc=$?
  [[ $failures -gt 0 && $rc -eq 0 ]] && rc=1
  exit "$rc"
}

# ci_verdict LOG STATUS: CI passes only when scripts/test exited 0 (STATUS) and its output (LOG)
# ends its count with a line 'N passed, 0 failed, N skipped' (the last such line counts; notes
# may follow it); either alone is not enough (an exit status can be
# lost, a count can be missing). Ends with the last count line of LOG, so that it is the last
# line CI prints. Returns 0 to pass, 1 to fail.
ci_verdict() {
  local log=$1 status=$2 count verdict=0
  count=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
  if [[ -z $count ]]; then
    echo ".ci/run: scripts/test printed no line 'N passed, N failed, N skipped' (exit $status): failing"
    verdict=1
  elif [[ ! $count =~ ^[0-9]+\ passed,\ 0\ failed, ]]; then
    [[ $status -eq 0 ]] && echo ".ci/run: scripts/test exited 0 but counted failures: failing"
    verdict=1
  elif [[ $status -ne 0 ]]; then
    echo ".ci/run: scripts/test exited $status: failing"
    verdict=1
  fi
  [[ -n $count ]] && echo "$count"
  return $verdict
}
