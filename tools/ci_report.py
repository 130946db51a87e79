"""Print the failed tests of pytest's JUnit XML reports, so a CI log's tail says what failed.

`python -m tools.ci_report REPORT...` prints, for every failure or error, the test's id, its
message and the last lines of its traceback; a report that does not exist is named and passed
over (its environment did not run). Exit 0 always: it only reports, the run's status is CI's.

Why: CI keeps only the end of a run's output, and `.ci/run` runs lint, spec and fuzz after the
test suite, so a failing test's report scrolls out of the part a reviewer sees.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TRACEBACK_LINES = 30


def failures(report: Path) -> list[tuple[str, str, str]]:
    """Return (test id, message, traceback) for each failed or errored test case of a report."""
    found = []
    for case in ET.parse(report).iter("testcase"):
        for outcome in ("failure", "error"):
            for element in case.findall(outcome):
                test = f"{case.get('classname', '')}::{case.get('name', '')}"
                found.append((f"{outcome.upper()} {test}", element.get("message", ""), element.text or ""))
    return found


def main(argv: list[str] | None = None) -> int:
    """Print every report's failures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for report in args.reports:
        if not report.is_file():
            print(f"{report}: no report (that environment did not run)")
            continue
        found = failures(report)
        print(f"{report}: {len(found)} failed")
        for test, message, traceback in found:
            print(f"  {test}\n    {message.splitlines()[0] if message else ''}")
            for line in traceback.splitlines()[-TRACEBACK_LINES:]:
                print(f"    | {line}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
