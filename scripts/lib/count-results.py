#!/usr/bin/env python3
"""Counts the test results of every suite of scripts/test and prints one line per suite and the
total 'N passed, N failed, N skipped'; exits 1 when anything failed.

Arguments: [--seconds NAME=N ...] NAME=PATH ..., where N is how long suite NAME took (printed
in its line), and PATH is one of
- a file NAME.status holding PASS, FAIL or SKIP: a single check;
- a directory that scripts/test filled for a suite:
    exit-status   the exit status of `make check` or pytest (required);
    tests.txt     for a make-check suite: the TESTS list, one test per line (the build tree's
                  relative names); every test in it must have left a result;
    <test>.trs    automake's result of each test, at the test's name without .test;
    <test>.xml    JUnit XML of that test, where it wrote one (GoogleTest, pytest): its cases are
                  counted one by one, and the .trs must agree;
    *.xml         for a pytest suite (no tests.txt): its JUnit XML files.

Rules (a green total must mean that every test ran and passed):
- a suite whose exit status is not 0 has failed, even when no result says FAIL (a test program
  that did not compile, a collection error, a crash of the harness);
- a test of tests.txt without a result has failed (not built, not run);
- a .trs that says FAIL or ERROR fails its test even when its XML is all-pass (a leak report or a
  crash at exit comes after the XML is written); an XML with no case, or one that does not
  parse, has failed;
- under CI=true a skip is a failure, unless it matches a line of tests/expected-skips (a glob over
  the skip's name, then the reason it is expected). A skip's name is the test's name
  (tests/ckpt/disk-full.test) or, for a case of an XML, TEST::CLASS::CASE.
"""

import fnmatch
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED_SKIPS = HERE.parent.parent / "tests" / "expected-skips"


class Counts:
    def __init__(self, ci, expected):
        self.passed = self.failed = self.skipped = 0
        self.ci = ci
        self.expected = expected
        self.notes = []

    def passes(self, n=1):
        self.passed += n

    def fail(self, why):
        self.failed += 1
        self.notes.append("FAIL " + why)

    def skip(self, name, why=""):
        pattern = next((p for p in self.expected if fnmatch.fnmatchcase(name, p)), None)
        if self.ci and pattern is None:
            self.fail(f"{name}: skipped under CI and not listed in tests/expected-skips"
                      + (f" ({why})" if why else ""))
            return
        self.skipped += 1
        self.notes.append(f"SKIP {name}" + (f" ({why})" if why else "")
                          + (" [expected]" if pattern else ""))


def load_expected_skips(path):
    patterns = []
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                patterns.append(line.split()[0])
    return patterns


def trs_result(path):
    """automake's :test-result: of a .trs (the last one), or None without one."""
    result = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(":test-result:"):
            result = line.split(":", 2)[2].strip()
    return result


def count_xml(path, test, counts):
    """Counts the cases of a JUnit XML; returns (cases, failed cases), or None if unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as error:
        counts.fail(f"{test}: its XML {path.name} does not parse ({error})")
        return None
    cases = failed = 0
    for case in root.iter("testcase"):
        cases += 1
        name = f"{test}::{case.get('classname', '')}::{case.get('name', '')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            failed += 1
            message = (problem.get("message") or problem.text or "").strip().splitlines()
            counts.fail(name + (f": {message[0][:200]}" if message else ""))
        elif skipped is not None or case.get("status") == "notrun" \
                or case.get("result") == "skipped":
            why = skipped.get("message", "") if skipped is not None else "not run"
            counts.skip(name, why)
        else:
            counts.passes()
    # pytest reports collection errors as <error> of a <testsuite> with no testcase
    errors = sum(int(s.get("errors", 0) or 0) for s in root.iter("testsuite"))
    if cases == 0:
        counts.fail(f"{test}: {path.name} holds no test case" +
                    (f" ({errors} errors)" if errors else ""))
        return cases, 1
    return cases, failed


def count_make_check(where, counts):
    tests = (where / "tests.txt").read_text().split()
    if not tests:
        counts.fail(f"{where.name}: its TESTS list is empty")
    for test in tests:
        base = test[:-len(".test")] if test.endswith(".test") else test
        trs = where / (base + ".trs")
        xml = where / (base + ".xml")
        if not trs.is_file():
            counts.fail(f"{test}: no result (not built, or not run)")
            continue
        result = trs_result(trs)
        if xml.is_file():
            got = count_xml(xml, test, counts)
            if got is None:
                continue
            cases, failed = got
            if result in ("FAIL", "ERROR", "XPASS", None) and failed == 0:
                counts.fail(f"{test}: {result or 'no :test-result:'} although its {cases} cases "
                            "passed (a crash, a sanitizer or leak report, or a failed check "
                            "after the cases; see its .log)")
            elif result == "SKIP":
                counts.skip(test, "the test exited 77 after writing its XML")
        elif result == "PASS" or result == "XFAIL":
            counts.passes()
        elif result == "SKIP":
            counts.skip(test, skip_reason(where / (base + ".log")))
        else:
            counts.fail(f"{test}: {result or 'no :test-result:'}")


def skip_reason(log):
    """The test's own 'SKIP: why' line, when it printed one."""
    try:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("SKIP:"):
                return line[5:].strip()
    except OSError:
        pass
    return ""


def count_suite(name, where, counts):
    if where.is_file():
        status = where.read_text().strip()
        if status == "PASS":
            counts.passes()
        elif status == "SKIP":
            counts.skip(name)
        else:
            counts.fail(f"{name}: {status or 'no status'}")
        return
    if not where.is_dir():
        counts.fail(f"{name}: no results at {where}")
        return
    status_file = where / "exit-status"
    status = status_file.read_text().strip() if status_file.is_file() else ""
    before = counts.failed
    if (where / "tests.txt").is_file():
        count_make_check(where, counts)
    else:
        xmls = sorted(where.glob("*.xml"))
        if not xmls:
            counts.fail(f"{name}: no JUnit XML in {where}")
        for xml in xmls:
            count_xml(xml, name, counts)
    if status != "0" and counts.failed == before:
        counts.fail(f"{name}: exited {status or '(no exit status recorded)'} although no test "
                    "result failed (a build error, a collection error or a crash of the harness)")


def parse_args(argv):
    """(suites as [(name, path)], {name: seconds}); exits 2 on a malformed argument."""
    suites, seconds = [], {}
    args = iter(argv)
    for arg in args:
        if arg == "--seconds":
            name, _, value = next(args, "").partition("=")
            if not name or not value.isdigit():
                sys.exit("count-results.py: --seconds: expected NAME=SECONDS")
            seconds[name] = int(value)
            continue
        name, sep, where = arg.partition("=")
        if not name or not sep or not where:
            sys.exit(f"count-results.py: '{arg}': expected NAME=PATH")
        suites.append((name, where))
    return suites, seconds


def main(argv):
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    expected = load_expected_skips(Path(os.environ.get("PRIMUS_EXPECTED_SKIPS", EXPECTED_SKIPS)))
    suites, seconds = parse_args(argv)
    total = [0, 0, 0]
    notes = []
    if not suites:
        total[1] += 1
        notes.append("  (no suite): FAIL nothing was run, so nothing passed")
    for name, where in suites:
        counts = Counts(ci, expected)
        count_suite(name, Path(where), counts)
        took = f"{seconds[name]:6d} s" if name in seconds else ""
        print(f"  {name:<28} {counts.passed:5d} passed {counts.failed:5d} failed "
              f"{counts.skipped:5d} skipped {took}".rstrip())
        notes += [f"  {name}: {note}" for note in counts.notes]
        total[0] += counts.passed
        total[1] += counts.failed
        total[2] += counts.skipped
    for note in notes:
        print(note)
    if ci:
        print("CI=true: a skip not listed in tests/expected-skips counts as a failure")
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
