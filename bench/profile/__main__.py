"""Profile one workload with py-spy and print where the time goes (`python -m bench.profile -h`).

list      GET a 50-driver page under wrk (16 connections), py-spy on `riskapi serve --no-worker` as bench.run runs it
bulk      1,000-driver creates one after another, py-spy on the same service
delivery  deliveries recorded in the outbox, py-spy on one `riskapi worker` while it sends them to a local receiver
probe     GET healthz under wrk as list runs the page: the cost of the machinery between socket and handler alone
soak      `python -m bench.soak --seconds S` of the checkout, py-spy on its serve (API processes and worker)

Each prints the operation's cost (server CPU ms per request, per driver, per delivery) and the profile:
only samples of a thread holding the GIL (`--gil`), by function and by module, self and inclusive.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench import seed, servers
from bench.profile import pyspy, workloads
from bench.profile.meter import Meter
from toolkit import ROOT
from toolkit.serving import free_port


def options(argv=None) -> argparse.Namespace:
    """Parse the command line; what follows `--` goes to bench.soak."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workload", choices=("list", "bulk", "probe", "delivery", "soak"))
    parser.add_argument(
        "--root", type=Path, default=ROOT, metavar="DIR", help="profile the code of checkout DIR (default: this one)"
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds of load under the profiler (default 15)")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples a second (default 250)")
    parser.add_argument("--top", type=int, default=25, help="lines per table (default 25)")
    parser.add_argument("--processes", type=int, default=1, help="API processes for list and bulk (default 1)")
    parser.add_argument("--drivers", type=int, default=20_000, help="drivers seeded for list (default 20000)")
    parser.add_argument("--per-page", type=int, default=50, help="drivers a page for list, 10 to 100 (default 50, as bench.run)")
    parser.add_argument("--size", type=int, default=1000, help="drivers per POST for bulk (default 1000)")
    parser.add_argument("--subscribed", type=int, default=0, help="bulk: webhooks subscribed to driver.created (default 0)")
    parser.add_argument("--deliveries", type=int, default=3000, help="deliveries for delivery (default 3000)")
    parser.add_argument("--keep-alive", action="store_true", help="delivery: the receiver keeps connections (default: closes)")
    parser.add_argument("--database-url", help="a database of your own (default: a fresh SQLite file; soak: required)")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw collapsed stacks in this file")
    args, rest = parser.parse_known_args(argv)
    if rest and args.workload != "soak":
        parser.error(f"unknown arguments: {' '.join(rest)}")
    args.soak_args = [arg for arg in rest if arg != "--"]
    if args.workload == "soak" and not args.database_url:
        parser.error("soak needs --database-url of a database of your own (bench.soak resets its default one)")
    if not servers.is_checkout(args.root):
        parser.error(f"{args.root} is not a checkout of riskapi")
    return args


def api(args, work: Path, url: str, drivers: int, redis_url: str) -> tuple[servers.Server, seed.Seeded, str]:
    """Seed, then start the service as bench.run does; return it, the seed and the list's path."""
    seeded = seed.seed(url, drivers)
    path = f"/api/v1/risks/{seeded.risk_uuid}/data/drivers"
    port = free_port()
    argv = servers.service_argv(port, args.processes, servers.python_of(args.root), args.root)
    server = servers.Server("service", argv, servers.service_env(url, redis_url), port, str(work), root=args.root)
    try:
        server.start(path + "?per_page=50", {"Authorization": f"Bearer {seeded.token}"})
    except BaseException:
        server.stop()  # what did start (serve, its API processes), by PID
        raise
    return server, seeded, path


def profile_api(args, work: Path, raw: Path) -> None:
    """Profile the list, the bulk create or the probe on the service as deployed."""
    url = args.database_url or f"sqlite:///{work}/bench.db"
    redis = servers.RedisServer(str(work)).start()
    server = None
    try:
        server, seeded, path = api(args, work, url, args.drivers if args.workload == "list" else 10, redis.url)
        run = {"list": workloads.list_load, "bulk": workloads.bulk_load, "probe": workloads.probe_load}[args.workload]
        meter = Meter(lambda: server.proc.pid, redis.url, redis.proc.pid, url)
        run(args, server, seeded, path, lambda: pyspy.Recording(server.proc.pid, raw, args.rate), meter)
    finally:
        if server is not None:
            server.stop()
        redis.stop()


def soak_processes(soak: psutil.Process) -> list[psutil.Process]:
    """Return the topmost riskapi processes under the soak (serve, or the API and worker processes of a many-host run)."""
    found = []
    for child in soak.children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            parent = child.parent()
            parents = " ".join(parent.cmdline()) if parent is not None else ""
        except psutil.Error:
            continue
        if "riskapi" in command and "riskapi" not in parents:
            found.append(child)
    return found


def profile_soak(args, work: Path) -> list[Path]:
    """Run the checkout's soak; once its load starts, record its riskapi processes for the load's seconds."""
    argv = [servers.python_of(args.root), "-u", "-m", "bench.soak", "--seconds", f"{args.seconds:g}",
            "--database-url", args.database_url, *args.soak_args]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(args.root)}
    print("$ " + " ".join(argv[1:]), flush=True)
    soak = subprocess.Popen(argv, cwd=args.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    recordings: list[pyspy.Recording] = []
    try:
        for line in soak.stdout:
            print("  soak| " + line, end="", flush=True)
            if line.startswith("load") and not recordings:
                for n, process in enumerate(soak_processes(psutil.Process(soak.pid))):
                    recordings.append(pyspy.Recording(process.pid, work / f"soak-{n}.raw", args.rate, args.seconds))
                print(f"  (py-spy on {len(recordings)} process tree(s) for {args.seconds:g} s)", flush=True)
        soak.wait()
    finally:
        if soak.poll() is None:
            soak.terminate()
            soak.wait(60)
    if not recordings:
        raise RuntimeError("the soak never said `load...`: nothing was recorded")
    return [recording.stop() for recording in recordings]


def main(argv=None) -> int:
    """Run the workload under py-spy and print the profile."""
    args = options(argv)
    work = Path(tempfile.mkdtemp(prefix="riskapi-profile-"))
    raw = args.raw or work / "profile.raw"
    started = time.monotonic()
    print(f"{args.workload} at {servers.commit_of(args.root)} ({args.root}), py-spy --gil -r {args.rate}", flush=True)
    try:
        if args.workload in ("list", "bulk", "probe"):
            profile_api(args, work, raw)
            raws = [raw]
        elif args.workload == "delivery":
            workloads.delivery_load(args, work, lambda pid: pyspy.Recording(pid, raw, args.rate))
            raws = [raw]
        else:
            raws = profile_soak(args, work)
        profile = pyspy.Profile()
        for path in raws:
            profile.add(path)
        print()
        profile.print(args.top)
        if args.raw and raws != [args.raw]:  # the soak's processes were recorded apart: keep them in one file
            args.raw.write_text("".join(path.read_text() for path in raws))
    except (RuntimeError, subprocess.SubprocessError) as exc:
        print(f"profile failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
        print(f"({time.monotonic() - started:.0f} s; raw stacks: {args.raw or 'removed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
