"""One soak run on any layout of the service: set up, load, drain, tally, then the text summary and the PNG."""

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Protocol

import httpx
import psycopg

from bench.soak import pauses, report
from bench.soak.load import EVENTS, Checkout, Stats, describe_mix, load, make_tenants, warm_up
from bench.soak.receiver import Receiving, tally
from bench.soak.series import CpuSampler
from foundation.config import Settings
from toolkit import ROOT
from toolkit.workers import delete_queue

POSTGRES = "postgresql://postgres@127.0.0.1:5432"


class Layout(Protocol):
    """How the service runs: started with the run's environment, its process trees, stopped by PID."""

    description: str

    def start(self, checkout: Checkout, env: dict, work: Path) -> list[str]:
        """Start every process; return the API base URLs (…/api/v1) once each answers."""

    def pids(self) -> list[int]:
        """Return the PIDs at the top of the service's process trees."""

    def stop(self) -> None:
        """Stop every process started, by PID."""

    def logs(self) -> list[Path]:
        """Return the service's log files."""


def add_options(parser: argparse.ArgumentParser, database: str) -> None:
    """Add the options every layout shares."""
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of load (default 60)")
    parser.add_argument("--connections", type=int, default=32, help="concurrent connections (default 32)")
    parser.add_argument("--agencies", type=int, default=10,
                        help="agencies with a risk profile and a webhook each (default 10; 2 shows the webhook cap)")  # fmt: skip
    parser.add_argument("--receivers", type=int,
                        help="HTTPS receivers (a port each) the webhooks point at in turn (default: one per webhook, "
                             "as agencies' own endpoints; 1: all on one, sharing the worker's kept connections)")  # fmt: skip
    parser.add_argument("--database-url", help=f"add rows to this database (default: reset {database} on {POSTGRES})")
    parser.add_argument("--redis-url", help="a shared Redis (a queue of this run's own); default: the layout's own")
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to wait for the backlog (default 120)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="serve the code of this checkout with its .venv/bin/python (default: this one)")  # fmt: skip
    parser.add_argument("--png", help="the picture's path (default: <layout>-<UTC time>.png here; a .csv beside it)")
    parser.add_argument("--gc", action="store_true",
                        help="record the service's garbage collections (bench/gc_probe) and print them by process")  # fmt: skip


def checkout_of(args) -> Checkout:
    """Return the checkout to serve: this one with this interpreter, or --root with its own venv's."""
    root = args.root.resolve()
    python = sys.executable if root == ROOT.resolve() else str(root / ".venv" / "bin" / "python")
    if not Path(python).exists():
        raise SystemExit(f"{python} does not exist: --root needs a checkout with its own .venv")
    return Checkout(root, python)


def database(args, name: str, work: Path) -> str:
    """Return the database to serve: --database-url, our own freshly reset PostgreSQL database, or SQLite."""
    if args.database_url:
        return args.database_url
    try:
        # CREATE/DROP DATABASE refuse to run inside a transaction.
        conn = psycopg.connect(f"{POSTGRES}/postgres", connect_timeout=3, autocommit=True)
    except psycopg.OperationalError as exc:
        print(f"note: PostgreSQL did not answer ({str(exc).strip().splitlines()[0]}); using SQLite, figures are not comparable")
        return f"sqlite:///{work}/soak.db"
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # Only ever our own database.
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    return f"{POSTGRES}/{name}"


def version(root: Path) -> str:
    """Return the checkout's commit (and -dirty when its tree has changes)."""
    run = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return run.stdout.strip() or "unknown"


def webhook_cap() -> float:
    """Return RISKAPI_WEBHOOK_MAX_RATE as the service reads it (attempts a second per webhook)."""
    raw = os.environ.get("RISKAPI_WEBHOOK_MAX_RATE")
    return float(raw) if raw else Settings.webhook_max_rate


def subscribe(base: str, tenants: list, urls: list[str]) -> None:
    """Give every tenant one webhook subscribed to the driver events, on the receivers in turn."""
    for number, tenant in enumerate(tenants):
        webhook = {"type": "custom", "url": urls[number % len(urls)], "events": EVENTS}
        body = {"data": [{"object": "webhook", "data": webhook}]}
        hook = httpx.post(base + "/webhooks", json=body, headers=tenant.headers, timeout=30).raise_for_status().json()
        tenant.webhook, tenant.secret = hook["data"][0]["uuid"], hook["data"][0]["meta"]["signing_secret"]


def excerpt(logs: list[Path], errors: int = 5, tail: int = 10) -> str:
    """Return the first error lines and the last lines of each log, each cut short (a logged traceback is one line)."""
    parts = []
    for log in logs:
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        first = [line for line in lines if "level=ERROR" in line or "Traceback" in line][:errors]
        # A traceback's line: its start says where, its end what was raised.
        shown = [line if len(line) <= 600 else f"{line[:200]} [...] {line[-400:]}" for line in first + ["..."] + lines[-tail:]]
        parts.append(f"--- {log.name}: {len(lines)} lines, first errors then the end\n" + "\n".join(shown))
    return "service logs:\n" + "\n".join(parts)


def run(args, layout: Layout, name: str, work: Path) -> bool:
    """Start everything, load, wait for the deliveries, report; stop what was started whatever happens."""
    checkout, db_name = checkout_of(args), name.replace("-", "_")
    url = database(args, f"riskapi_{db_name}", work)
    queue = f"{name}-{uuid.uuid4().hex[:8]}"
    with Receiving(args.receivers or args.agencies) as receiver:
        env = {"DATABASE_URL": url, "REDIS_URL": args.redis_url or "", "RISKAPI_WEBHOOK_QUEUE": queue,
               "RISKAPI_WEBHOOK_ALLOW_PRIVATE": "1", "RISKAPI_WEBHOOK_CA_BUNDLE": receiver.ca_path,
               "RISKAPI_VALIDATE_RESPONSES": "0"}  # fmt: skip
        if args.gc:
            (work / "gc").mkdir()
            env["BENCH_GC_DIR"] = str(work / "gc")
        sampler = CpuSampler(layout.pids, url.rsplit("/", 1)[-1], lambda: [receiver.pid])
        try:
            bases = layout.start(checkout, env, work)
            tenants = make_tenants(checkout, url, args.agencies)
            subscribe(bases[0], tenants, receiver.urls)
            cap = webhook_cap()
            meta = {"layout": layout.description, "code": f"{version(checkout.root)} ({checkout.root})",
                    "database": f"{url.split('://')[0]} ({url.rsplit('/', 1)[-1]})",
                    "redis": args.redis_url or "the layout's own",
                    "webhooks": f"{len(tenants)} (one per agency) on {len(receiver.urls)} receiver(s), "
                                f"RISKAPI_WEBHOOK_MAX_RATE {cap:g}/s each: "
                                f"delivery capped at {cap * len(tenants):g}/s in all",
                    "load": f"{args.seconds:g} s, {args.connections} connections over {len(bases)} API address(es), "
                            f"{len(tenants)} agencies, {describe_mix()}"}  # fmt: skip
            for key, value in meta.items():
                if key != "load":
                    print(f"{key}: {value}", flush=True)
            # The load starts once deliveries flow (serve's worker may take seconds to start on a busy machine):
            # a backlog the bench made by starting early would be the bench's, not the service's.
            stats = Stats()
            asyncio.run(warm_up(tenants, bases[0], stats))
            if not receiver.wait_for(stats.warm_up, timeout=120.0):
                raise RuntimeError(f"{len(receiver.requests)} of the warm-up's {stats.warm_up} deliveries came in 120 s")
            # Last, right before the load: bench.profile starts its recording on this line.
            print(f"load: {meta['load']}", flush=True)
            started = time.monotonic()
            sampler.start(started)
            asyncio.run(load(tenants, bases, args.seconds, args.connections, stats))
            stopped = time.monotonic()
            # What the receiver got during the load is read only now, off the load's CPU; a tally (a parse and
            # an HMAC per delivery) only once as many have come as are due, not while the backlog drains.
            receiver.wait_for(sum(stats.expected.values()), timeout=max(0.0, stopped + args.drain - time.monotonic()))
            while (result := tally(receiver, tenants, stats.expected))["lost"] and time.monotonic() < stopped + args.drain:
                receiver.wait_for(len(receiver.requests) + 1, timeout=0.5)
            time.sleep(1.0)  # A late duplicate would show up here (and the series gets its last second).
            sampler.stop()
            receiver.wait_for(0)
            result = tally(receiver, tenants, stats.expected)
        finally:
            sampler.stop()
            layout.stop()
            if args.redis_url:
                delete_queue(args.redis_url, queue)
    run_ = report.Run(meta, args, stats, result, receiver, sampler.samples, started, stopped)
    if args.gc:
        run_.pauses = pauses.describe(pauses.read(work / "gc", started, stopped))
    ok = report.report(run_, png=args.png or f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.png")
    if not ok:
        print(excerpt(layout.logs()))
    return ok


def run_once(args, layout: Layout, name: str) -> int:
    """Run one soak in a work folder of its own, removed after; print the result and return the exit status."""
    work = Path(tempfile.mkdtemp(prefix=f"riskapi-{name}-"))
    try:
        ok = run(args, layout, name, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("result: " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1
