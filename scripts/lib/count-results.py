#!/usr/bin/env python3
"""Counts test results over all suites: JUnit XML files (GoogleTest, pytest) and automake .trs
files of tests that write no XML. Prints one line per suite and the total
'N passed, N failed, N skipped'; exits 1 when anything failed."""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def count_xml(path):
    passed = failed = skipped = 0
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return 0, 1, 0
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun" \
                or case.get("result") == "skipped":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def count_trs(path):
    result = ""
    for line in Path(path).read_text(errors="replace").splitlines():
        if line.startswith(":test-result:"):
            result = line.split(":", 2)[2].strip()
    if result == "PASS":
        return 1, 0, 0
    if result == "SKIP":
        return 0, 0, 1
    return 0, 1, 0


def main():
    """Arguments: SUITE=DIR ... Each DIR holds *.xml files and possibly *.trs files; a .trs
    whose test wrote an XML (same base name) is not counted twice. SUITE=FILE.status holds
    'PASS', 'FAIL' or 'SKIP' for single checks."""
    total = [0, 0, 0]
    for arg in sys.argv[1:]:
        name, _, where = arg.partition("=")
        where = Path(where)
        counts = [0, 0, 0]
        if where.is_file():
            status = where.read_text().strip()
            counts = {"PASS": [1, 0, 0], "SKIP": [0, 0, 1]}.get(status, [0, 1, 0])
        elif where.is_dir():
            xml_names = set()
            for xml in sorted(where.rglob("*.xml")):
                xml_names.add(xml.stem)
                for i, n in enumerate(count_xml(xml)):
                    counts[i] += n
            for trs in sorted(where.rglob("*.trs")):
                if trs.stem in xml_names:
                    continue
                for i, n in enumerate(count_trs(trs)):
                    counts[i] += n
        else:
            counts = [0, 1, 0]
            print(f"{name}: no results at {where}")
        print(f"  {name:<24} {counts[0]:5d} passed {counts[1]:5d} failed {counts[2]:5d} skipped")
        for i in range(3):
            total[i] += counts[i]
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main())
