"""Soak: mixed traffic on `riskapi serve` while webhook deliveries flow (`python -m bench.soak -h`).

`--connections` connections (32) for `--seconds` (60) across `--agencies` agencies (10), each with one risk
profile and one webhook subscribed to driver.created/updated/deleted that points at a local HTTPS receiver
(toolkit/receiver.py, throw-away CA, keep-alive; one per webhook unless --receivers says fewer) run in a
process of their own. RISKAPI_WEBHOOK_MAX_RATE (100 attempts a second per webhook) stays on: 10 webhooks
keep it from binding, `--agencies 2` shows it holding. The load starts once a create per agency has been
delivered; it (aiohttp, asyncio) mixes filtered lists following next_page_url, creates of 1-20 drivers,
PATCHes and DELETEs of drivers created earlier. Then it waits (up to --drain seconds) for every delivery due.

Prints requests/s, status counts, read and write latency, the CPU split (serve's API processes, its delivery
side, Redis, this database's PostgreSQL backends, the bench, the rest of the machine), deliveries expected /
received / lost / duplicated / badly signed, the share that arrived during the load and how long the backlog
took to drain; draws the same second by second into one PNG (--png) with a CSV beside it. `--root DIR`
serves another checkout's code (DIR/.venv/bin/python), e.g. the code before a change. Exits 1 on any 5xx,
transport error, lost, duplicated, unexpected or badly signed delivery; the aims printed are not failures.
"""

import argparse
import sys
from pathlib import Path

from bench import servers
from bench.soak import run
from bench.soak.load import Checkout
from toolkit.serving import free_port

NAME = "soak"  # the database is riskapi_soak


def options(argv=None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    run.add_options(parser, f"riskapi_{NAME}")
    parser.add_argument("--processes", type=int, default=2, help="API processes of `riskapi serve --workers` (default 2)")
    return parser.parse_args(argv)


class Serve:
    """One `riskapi serve --workers N`: API processes, the relay and a worker, and (without --redis-url) its Redis."""

    def __init__(self, processes: int):
        self.processes = processes
        self.description = f"riskapi serve --workers {processes}"
        self.server: servers.Server | None = None

    def start(self, checkout: Checkout, env: dict, work: Path) -> list[str]:
        """Start serve and wait until it answers its liveness probe."""
        port = free_port()
        argv = [
            checkout.python,
            "-m",
            servers.main_module(checkout.root),
            "serve",
            "--port",
            str(port),
            "--workers",
            str(self.processes),
        ]
        self.server = servers.Server("service", argv, env, port, str(work), root=checkout.root)
        self.server.start("/api/v1/healthz", {})
        return [f"http://127.0.0.1:{port}/api/v1"]

    def pids(self) -> list[int]:
        """Return serve's PID: its tree holds every process it started."""
        return [self.server.proc.pid] if self.server is not None and self.server.proc is not None else []

    def stop(self) -> None:
        """Stop serve and anything it left behind, by PID."""
        if self.server is not None:
            self.server.stop()

    def logs(self) -> list[Path]:
        """Return serve's log (its children's output goes there too)."""
        return [Path(self.server.log_path)] if self.server is not None else []


def main(argv=None) -> int:
    """Run one soak; exit 1 when it was not clean."""
    args = options(argv)
    return run.run_once(args, Serve(args.processes), NAME)


if __name__ == "__main__":
    sys.exit(main())
