# shellcheck shell=bash disable=SC2154  # the caller sets the variables named below
# scripts/lib/make-suites.sh: the suites that `make check` runs, built and run in two halves so
# that scripts/test can compile one build while the end-to-end tests run (sourced by
# scripts/test, after results.sh).
#
# The caller sets: top (the source tree), results, python, jobs.

# build_suite DIR SUITE WHAT [configure args...]: configures DIR unless it is configured with
# the same arguments already (its Makefile and config.status there: a tree left with a Makefile
# but no config.status failed with "./config.status: No such file or directory"), then builds
# WHAT there: "all" (what make builds, which the
# end-to-end tests use) or "check" (all, and the test programs, running no test). On failure it
# prints the errors and returns 1; the logs are $results/SUITE-configure.log and -make.log.
build_suite() {
  local dir=$1 suite=$2 what=$3; shift 3
  local args="PYTHON=$python $*"
  mkdir -p "$dir"
  if [[ ! -f $dir/Makefile || ! -x $dir/config.status ||
        $(cat "$dir/.primus-configure-args" 2>/dev/null) != "$args" ]]; then
    step "configure $suite: $*"
    if ! (cd "$dir" && "$top/configure" PYTHON="$python" "$@" >"$results/$suite-configure.log" 2>&1); then
      tail -30 "$results/$suite-configure.log"
      echo "scripts/test: configure failed ($suite)" >&2
      return 1
    fi
    echo "$args" >"$dir/.primus-configure-args"
    sed -n '/^Primus .* configured/,$p' "$results/$suite-configure.log"
  fi
  step "make $suite ($what)"
  local targets=(all)
  # TESTS= : make check's programs without its tests.
  [[ $what == check ]] && targets=(check TESTS=)
  if ! make -C "$dir" -j"$jobs" "${targets[@]}" >>"$results/$suite-make.log" 2>&1; then
    grep -E 'error|Error' "$results/$suite-make.log" | head -40
    echo "scripts/test: build failed ($suite)" >&2
    return 1
  fi
}

# check_suites DIR SUITE [DIR SUITE...]: runs make check in each DIR (built by build_suite) at the
# same time, then prints what each said and files it as SUITE. The test programs of two builds
# share nothing (each test makes its own temporary files and takes ports from the kernel), and
# the Python suite, the longest test, keeps one core busy alone: the other suites fill the other.
check_suites() {
  local pids=() names=() dir suite
  while [[ $# -ge 2 ]]; do
    dir=$1 suite=$2; shift 2
    step "make check $suite"
    suite_begin "$suite"
    run_make_check "$dir" "$suite" >"$results/$suite-check.out" 2>&1 </dev/null &
    pids+=($!) names+=("$suite")
  done
  local i
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    suite=${names[$i]}
    echo "--- make check ${suite}:"
    cat "$results/$suite-check.out"
    suite_end "$suite" "$results/$suite"
  done
}

# run_make_check DIR SUITE: make check in DIR; the suite's folder $results/SUITE gets make check's
# exit status, the TESTS list and every test's .trs, .log and JUnit XML, from which
# count-results.py counts each test (and each case of a test that writes XML), and fails tests
# that left no result. Prints the results, and the end of each failed test's log.
run_make_check() {
  local dir=$1 suite=$2
  local out=$results/$suite test base ext rc
  mkdir -p "$out"
  make -C "$dir" -j"$jobs" check >"$results/$suite-check.log" 2>&1
  rc=$?
  echo "$rc" >"$out/exit-status"
  grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):|^# ' "$results/$suite-check.log"
  if [[ $rc -ne 0 ]] && ! grep -qE '^(FAIL|ERROR):' "$results/$suite-check.log"; then
    echo "--- make check exited $rc with no failed test: its errors"
    grep -E 'error|Error' "$results/$suite-check.log" | head -40
  fi
  make -s --no-print-directory -C "$dir" print-tests | tr ' ' '\n' | grep -v '^$' >"$out/tests.txt"
  [[ -s $out/tests.txt ]] || echo "scripts/test: make print-tests listed no test in $dir" >&2
  while read -r test; do
    base=${test%.test}
    for ext in trs log xml; do
      [[ -f $dir/$base.$ext ]] || continue
      mkdir -p "$(dirname "$out/$base")"
      cp "$dir/$base.$ext" "$out/$base.$ext"
    done
    if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$dir/$base.trs" 2>/dev/null; then
      echo "--- $dir/$base.log"; tail -40 "$dir/$base.log"
    fi
  done <"$out/tests.txt"
}

# Builds that run beside the end-to-end tests. They compile only (no test runs there, so no
# test's timing is at stake), at the lowest CPU priority, so that the end-to-end tests, which
# wait on Slurm most of the time, keep the cores whenever they want them. Their output goes to
# $results/background-build.log and is printed when they are waited for.
background_pid=""

# background_builds SPEC...: each SPEC is "DIR|SUITE|configure argument|..." (fields split on
# '|'); builds each for check, in order, in the background. SUITE's outcome is then
# $results/SUITE-build.status (PASS or FAIL) and its time $results/SUITE-build.seconds.
background_builds() {
  local spec
  (
    renice -n 19 -p "$BASHPID" >/dev/null 2>&1
    for spec in "$@"; do
      local fields began
      IFS='|' read -r -a fields <<<"$spec"
      began=$SECONDS
      if build_suite "${fields[0]}" "${fields[1]}" check "${fields[@]:2}"; then
        echo PASS >"$results/${fields[1]}-build.status"
      else
        echo FAIL >"$results/${fields[1]}-build.status"
      fi
      echo $((SECONDS - began)) >"$results/${fields[1]}-build.seconds"
    done
  ) >"$results/background-build.log" 2>&1 </dev/null &
  background_pid=$!
}

# background_wait: waits for the background builds and prints what they said.
background_wait() {
  [[ -n $background_pid ]] || return 0
  step "waiting for the test builds (background)"
  wait "$background_pid"
  background_pid=""
  sed 's/^=== /=== (background) /' "$results/background-build.log"
}

# built SUITE: whether SUITE's background build succeeded; files it as the check build-SUITE,
# with the time it took.
built() {
  local status
  status=$(cat "$results/$1-build.status" 2>/dev/null)
  record "build-$1" "${status:-FAIL}"
  # shellcheck disable=SC2034  # read by finish (results.sh)
  suite_seconds["build-$1"]=$(cat "$results/$1-build.seconds" 2>/dev/null || echo 0)
  [[ $status == PASS ]]
}
