"""Run the whole benchmark: seed, serve both sides, print the three figures (`python -m bench.run -h`)."""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from bench import figures, load, seed, servers
from bench.client import Client
from riskapi.config import Settings
from toolkit.serving import free_port

AIMS = {"throughput": 0.6, "depth": 1.3, "bulk": 3.0}


def options(argv=None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--drivers", type=int, default=100_000, help="drivers to seed (default 100000)")
    parser.add_argument("--processes", type=int, default=2, help="server processes on EACH side (default 2)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load per round and side (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds A,B,B,A... (default 2)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up load per side (default 2)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections (default 16)")
    parser.add_argument("--load", choices=("auto", "wrk", "python"), default="auto", help="load generator (default: wrk if any)")
    parser.add_argument("--baseline-server", choices=("gunicorn", "uvicorn"), default="gunicorn",
                        help="gunicorn sync workers (default) or uvicorn + a2wsgi like the service")  # fmt: skip
    parser.add_argument("--depth", type=int, default=90_000, help="position of the deep page (default 90000)")
    parser.add_argument("--samples", type=int, default=200, help="timed requests per page for the depth figure (default 200)")
    parser.add_argument("--bulk-runs", type=int, default=5, help="timed 1,000-driver creates (default 5)")
    parser.add_argument("--database-url", help="seed and serve this database instead of a fresh SQLite file (rows are added)")
    parser.add_argument("--metrics-cost", action="store_true",
                        help="only figure (d): the service with metrics (as serve runs it) vs RISKAPI_METRICS=0")  # fmt: skip
    args = parser.parse_args(argv)
    if args.load == "auto":
        args.load = "wrk" if load.wrk_available() else "python"
    if args.load == "python":
        args.connections = min(args.connections, load.PYTHON_CLIENTS)
        print("note: using the Python load generator (weaker than wrk; `apt-get install -y wrk` for better figures)")
    if args.baseline_server == "gunicorn" and not servers.has_gunicorn():
        print("note: gunicorn not installed (`pip install gunicorn`); the baseline runs under uvicorn + a2wsgi")
        args.baseline_server = "uvicorn"
    if args.depth >= args.drivers:
        parser.error("--depth must be below --drivers")
    return args


def report(name: str, value: float, aim: str, met: bool) -> None:
    """Print one figure next to its aim."""
    print(f"{name:<36} {value:6.2f}   (aim {aim}: {'met' if met else 'NOT met'})")


def describe(args) -> None:
    """Say what each side runs."""
    threads = Settings.from_env().threads
    print(f"service : uvicorn --workers {args.processes}, riskapi.api.app:asgi (Connexion; a2wsgi pool of {threads} threads)")
    kind = "app, sync workers" if args.baseline_server == "gunicorn" else f"asgi, a2wsgi pool of {threads} threads"
    print(f"baseline: {args.baseline_server} --workers {args.processes}, bench.baseline:{kind} (bare Flask + Peewee)")


def measure(args, seeded, service: servers.Server, baseline: servers.Server, path: str) -> dict:
    """Measure the three figures against running servers."""
    page = path + "?per_page=50"
    print(f"(a) GET {page} with {args.load}, {args.connections} connections, {args.rounds} x {args.duration:g} s per side")
    rounds = figures.throughput(
        figures.Target("service", service, page), figures.Target("baseline", baseline, page), seeded.token, args
    )
    ours, theirs = ([rate for rate, _ in rounds[name]] for name in ("service", "baseline"))
    cpu = [statistics.mean(ms for _, ms in rounds[name]) for name in ("service", "baseline")]
    print(f"    mean: service {statistics.mean(ours):.0f} req/s, baseline {statistics.mean(theirs):.0f} req/s;"
          f" server CPU per request: service {cpu[0]:.2f} ms, baseline {cpu[1]:.2f} ms")  # fmt: skip
    client = Client(service.port, seeded.token)
    try:
        first, deep = figures.depth_ratio(client, path, args.depth, args.samples)
        print(f"(b) median of {args.samples}: first page {first:.2f} ms, page at {args.depth} {deep:.2f} ms")
        api, raw = figures.bulk_ratio(client, seeded.agency_id, args.bulk_runs)
        print(f"(c) median of {args.bulk_runs}: 1,000-driver POST {api:.1f} ms, raw insert_many {raw:.1f} ms")
    finally:
        client.close()
    return {
        "throughput": statistics.mean(ours) / statistics.mean(theirs),
        "cpu": cpu[1] / cpu[0],
        "depth": deep / first,
        "bulk": api / raw,
    }


def run(args, workdir: str) -> dict:
    """Seed, start both servers, measure, always stop them."""
    url = args.database_url or "sqlite:///" + os.path.join(workdir, "bench.db")
    started = time.perf_counter()
    seeded = seed.seed(url, args.drivers)
    print(f"seeded {seeded.drivers} drivers in {time.perf_counter() - started:.1f} s ({url.split('://')[0]})")
    env, path = {"DATABASE_URL": url}, f"/api/v1/risks/{seeded.risk_uuid}/data/drivers"
    ports = free_port(), free_port()
    service = servers.Server("service", servers.service_argv(ports[0], args.processes), env, ports[0], workdir)
    baseline_argv = servers.baseline_argv(ports[1], args.processes, args.baseline_server)
    baseline = servers.Server("baseline", baseline_argv, env, ports[1], workdir)
    try:
        for server in (service, baseline):
            server.start(path + "?per_page=50", {"Authorization": f"Bearer {seeded.token}"})
        describe(args)
        return measure(args, seeded, service, baseline, path)
    finally:
        service.stop()
        baseline.stop()


def metrics_cost(args, workdir: str) -> dict:
    """Figure (d): list throughput of the service with metrics on, as `serve` runs it, over the same without metrics."""
    url = args.database_url or "sqlite:///" + os.path.join(workdir, "bench.db")
    seeded = seed.seed(url, args.drivers)
    path = f"/api/v1/risks/{seeded.risk_uuid}/data/drivers"
    # As under `riskapi serve`: one multiprocess directory for the service's processes.
    counted = {"DATABASE_URL": url, "RISKAPI_METRICS": "1", "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(dir=workdir)}
    plain = {"DATABASE_URL": url, "RISKAPI_METRICS": "0"}
    ports = free_port(), free_port()
    sides = [
        servers.Server("metrics", servers.service_argv(ports[0], args.processes), counted, ports[0], workdir),
        servers.Server("none", servers.service_argv(ports[1], args.processes), plain, ports[1], workdir),
    ]
    try:
        for server in sides:
            server.start(path + "?per_page=50", {"Authorization": f"Bearer {seeded.token}"})
        page = path + "?per_page=50"
        print(f"(d) GET {page}: the service with metrics vs without, {args.rounds} x {args.duration:g} s per side")
        rounds = figures.throughput(
            figures.Target("metrics", sides[0], page), figures.Target("none", sides[1], page), seeded.token, args
        )
    finally:
        for server in sides:
            server.stop()
    on, off = (statistics.mean(rate for rate, _ in rounds[name]) for name in ("metrics", "none"))
    cpu_on, cpu_off = (statistics.mean(ms for _, ms in rounds[name]) for name in ("metrics", "none"))
    print(f"    mean: with metrics {on:.0f} req/s, without {off:.0f} req/s; CPU per request {cpu_on:.2f} vs {cpu_off:.2f} ms")
    return {"metrics": on / off, "metrics_cpu": cpu_off / cpu_on}


def summary(found: dict) -> None:
    """Print the figures against their aims."""
    print()
    report("(a) throughput service/baseline", found["throughput"], ">= 0.6", found["throughput"] >= AIMS["throughput"])
    print(f"{'    (CPU per request baseline/service)':<36} {found['cpu']:6.2f}   (less sensitive to a noisy machine)")
    report("(b) deep page / first page", found["depth"], "<= 1.3", found["depth"] <= AIMS["depth"])
    report("(c) bulk create / raw insert_many", found["bulk"], "<= 3", found["bulk"] <= AIMS["bulk"])


def main(argv=None) -> int:
    """Run the benchmark; exit 1 on errors only (a missed aim is a figure, not an error)."""
    args = options(argv)
    workdir = tempfile.mkdtemp(prefix="riskapi-bench-")
    try:
        if args.metrics_cost:
            found = metrics_cost(args, workdir)
            print()
            report("(d) throughput with/without metrics", found["metrics"], ">= 0.95", found["metrics"] >= 0.95)
            print(f"{'    (CPU per request without/with)':<36} {found['metrics_cpu']:6.2f}")
            return 0
        summary(run(args, workdir))
    except Exception as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
