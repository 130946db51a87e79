"""A database outage under delivery load: what it costs (`python -m bench.outage -h`).

`riskapi serve` (by default, or with --workers N) runs on a PostgreSQL of its own (initdb in a temporary
directory, on a free port; the shared server is never touched), with its embedded Redis and one webhook to
the toolkit's HTTPS receiver. Drivers are written at --rate POSTs a second (--per-write drivers each, one
delivery each) for --seconds; after --after seconds the database crashes (`pg_ctl stop -m immediate`) for
--crash seconds, or stops cleanly (--stop), or restarts fast (--restart); then every delivery settles.

Figures: writes answered by status, writes lost (2xx, not committed) and committed though not answered 2xx,
the slowest 503, seconds from the database answering to the first 2xx, deliveries expected, lost and
duplicated (same delivery id received twice), bad signatures, what the worker kept while the database was
away, what the relay's rescue handed back, children serve restarted, tracebacks, and log lines in another
format. Any checkout can be measured: --root /tmp/w25-old --command "python -m riskapi.cli" runs the code
before the change (its serve), driven from here.
"""

import argparse
import dataclasses
import json
import shlex
import sys
import tempfile
from pathlib import Path

from toolkit import ROOT
from toolkit.outage import Plan, run


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    fault = parser.add_mutually_exclusive_group()
    fault.add_argument("--crash", type=float, metavar="S", help="crash the database for S seconds (default 10)")
    fault.add_argument("--stop", type=float, metavar="S", help="stop the database cleanly for S seconds")
    fault.add_argument("--restart", action="store_true", help="restart the database fast (pg_ctl restart -m fast)")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers (API processes; default 1)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of load in all (default 60)")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of load before the fault (default 10)")
    parser.add_argument("--rate", type=float, default=30.0, help="writes a second (default 30)")
    parser.add_argument("--per-write", type=int, default=7, help="drivers (deliveries) per write (default 7)")
    parser.add_argument("--settle", type=float, default=300.0, help="seconds to wait for every delivery to settle")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run (default this one)")
    parser.add_argument("--command", default=f"{sys.executable} -m riskapi", help="its CLI (old code: python -m riskapi.cli)")
    parser.add_argument("--log", type=Path, help="keep serve's log here (default: a temporary file)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one outage and print its figures as JSON."""
    args = options(argv)
    fault, down = (
        ("restart", 0.0) if args.restart else ("stop", args.stop) if args.stop is not None else ("crash", args.crash or 10.0)
    )
    plan = Plan(
        root=args.root,
        command=shlex.split(args.command),
        fault=fault,
        after=args.after,
        down=down,
        seconds=args.seconds,
        rate=args.rate,
        per_write=args.per_write,
        workers=args.workers,
        settle=args.settle,
    )
    log = args.log or Path(tempfile.mkstemp(prefix="riskapi-outage-", suffix=".log")[1])
    figures = run(plan, log)
    summary = {"fault": fault, "down_s": down, "workers": args.workers, "root": str(args.root), "log": str(log)}
    summary |= dataclasses.asdict(figures)
    summary["answered"] = {str(status): n for status, n in sorted(figures.answered.items(), key=str)}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
