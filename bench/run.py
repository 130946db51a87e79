"""Run the whole benchmark: seed, serve every side, print the three figures (`python -m bench.run -h`)."""

import argparse
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import figures, load, seed, servers
from bench.client import Client
from foundation.config import Settings
from toolkit import ROOT
from toolkit.serving import free_port

AIMS = {"throughput": 0.9, "depth": 1.3, "bulk": 1.3}  # issue 24's aims for (a) and (c)


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
                        help="gunicorn sync workers (default) or uvicorn + a2wsgi (as the service ran Flask before)")  # fmt: skip
    parser.add_argument("--depth", type=int, default=90_000, help="position of the deep page (default 90000)")
    parser.add_argument("--samples", type=int, default=200, help="timed requests per page for the depth figure (default 200)")
    parser.add_argument("--bulk-runs", type=int, default=5, help="timed 1,000-driver creates (default 5)")
    parser.add_argument("--database-url", help="seed and serve this database instead of a fresh SQLite file (rows are added)")
    parser.add_argument("--root", type=Path, default=ROOT, metavar="DIR",
                        help="run the service from checkout DIR (DIR/.venv/bin/python, PYTHONPATH=DIR)")  # fmt: skip
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="a third side: the service of checkout DIR, in turn with the others")  # fmt: skip
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
    for root in (args.root, args.against):
        if root is not None and not servers.is_checkout(root):
            parser.error(f"{root} is not a checkout of riskapi")
    return args


def report(name: str, value: float, aim: str, met: bool) -> None:
    """Print one figure next to its aim."""
    print(f"{name:<46} {value:6.2f}   (aim {aim}: {'met' if met else 'NOT met'})")


def service(name: str, root: Path, url: str, redis_url: str, args, workdir: str, **env: str) -> servers.Server:
    """Return (not started) the API of checkout root as `riskapi serve --no-worker` runs it."""
    port = free_port()
    argv = servers.service_argv(port, args.processes, servers.python_of(root), root)
    return servers.Server(name, argv, {**servers.service_env(url, redis_url), **env}, port, workdir, root=root)


def describe(args, services: dict, redis: servers.RedisServer) -> None:
    """Say what each side runs."""
    threads = Settings.from_env().threads
    for name, server in services.items():
        print(f"{name:<8}: riskapi serve --no-worker --workers {args.processes} at {servers.commit_of(server.root)}"
              f" ({server.root}; {threads} handler threads)")  # fmt: skip
    print(f"          as deployed: metrics on (serve's multiprocess directory), the access log on (to the server's log),"
          f" the rate limit on Redis {redis.url} with RISKAPI_RATE_LIMIT={servers.RATE_LIMIT_NEVER}: every request"
          f" goes through the limiter, none is ever answered 429")  # fmt: skip
    kind = "app, sync workers" if args.baseline_server == "gunicorn" else f"asgi, a2wsgi pool of {threads} threads"
    print(f"baseline: {args.baseline_server} --workers {args.processes}, bench.yardsticks.baseline:{kind} (bare Flask + Peewee)")
    print(f"floor   : uvicorn --workers {args.processes} --loop uvloop --http httptools, bench.yardsticks.floor:app (bare ASGI +"
          " asyncpg + orjson, PostgreSQL only: the least a Python process pays for the page)")  # fmt: skip


def check_deployed(server: servers.Server, page: str, token: str) -> None:
    """Fail unless the service answers with the rate limit's headers (the limiter is on and reaches Redis)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", page, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        response.read()
        limit = response.getheader("X-RateLimit-Limit")
    finally:
        conn.close()
    if limit != str(servers.RATE_LIMIT_NEVER):
        raise RuntimeError(f"{server.name}: no rate limit header (X-RateLimit-Limit: {limit}):\n{server.log_tail()}")


def measure(args, seeded, services: dict, baseline: servers.Server, floor: servers.Server | None, path: str) -> dict:
    """Measure the three figures against running servers."""
    page = path + "?per_page=50"
    names = list(services)
    print(f"(a) GET {page} with {args.load}, {args.connections} connections, {args.rounds} x {args.duration:g} s per side")
    targets = [figures.Target(name, server, page) for name, server in services.items()]
    targets.insert(1, figures.Target("baseline", baseline, page))
    if floor is not None:
        targets.insert(2, figures.Target("floor", floor, page))
    rounds = figures.throughput(targets, seeded.token, args)
    rate = {name: statistics.mean(r for r, _ in rounds[name]) for name in rounds}
    cpu = {name: statistics.mean(ms for _, ms in rounds[name]) for name in rounds}
    print("    mean: " + ", ".join(f"{name} {rate[name]:.0f} req/s ({cpu[name]:.2f} CPU ms/request)" for name in rounds))
    clients = {name: Client(server.port, seeded.token) for name, server in services.items()}
    found: dict = {"names": names, "rate": rate, "cpu": cpu, "depth": {}, "bulk": {}}
    try:
        for name, client in clients.items():
            first, deep = figures.depth_ratio(client, path, args.depth, args.samples)
            print(f"(b) {name}: median of {args.samples}: first page {first:.2f} ms, page at {args.depth} {deep:.2f} ms")
            found["depth"][name] = deep / first
        sides = {name: (clients[name], services[name]) for name in names}
        bulk, raw = figures.bulk_ratio(sides, seeded.agency_id, args.bulk_runs)
        for name, (api, used) in bulk.items():
            print(f"(c) {name}: median of {args.bulk_runs}: 1,000-driver POST {api:.1f} ms (mean {used:.1f} server CPU ms,"
                  f" {used / 1000:.3f} per driver), raw insert_many {raw:.1f} ms")  # fmt: skip
            found["bulk"][name] = api / raw
    finally:
        for client in clients.values():
            client.close()
    return found


def run(args, workdir: str) -> dict:
    """Seed, start a Redis and every side, measure, always stop them all."""
    url = args.database_url or "sqlite:///" + os.path.join(workdir, "bench.db")
    started = time.perf_counter()
    seeded = seed.seed(url, args.drivers)
    print(f"seeded {seeded.drivers} drivers in {time.perf_counter() - started:.1f} s ({url.split('://')[0]})")
    path = f"/api/v1/risks/{seeded.risk_uuid}/data/drivers"
    redis = servers.RedisServer(workdir).start()
    services = {"service": service("service", args.root, url, redis.url, args, workdir)}
    if args.against:
        services["against"] = service("against", args.against, url, redis.url, args, workdir)
    port = free_port()
    baseline_argv = servers.baseline_argv(port, args.processes, args.baseline_server)
    baseline = servers.Server("baseline", baseline_argv, {"DATABASE_URL": url}, port, workdir)
    floor = None
    if url.startswith("postgres") and servers.has_floor():
        port = free_port()
        floor = servers.Server("floor", servers.floor_argv(port, args.processes), {"DATABASE_URL": url}, port, workdir)
    elif url.startswith("postgres"):
        print("note: no floor side: install the bench extra (asyncpg, uvloop, httptools)")
    everything = [*services.values(), baseline, *([floor] if floor else [])]
    try:
        for server in everything:
            server.start(path + "?per_page=50", {"Authorization": f"Bearer {seeded.token}"})
        for server in services.values():
            check_deployed(server, path + "?per_page=50", seeded.token)
        describe(args, services, redis)
        found = measure(args, seeded, services, baseline, floor, path)
        for server in services.values():
            with open(server.log_path, errors="replace") as log:
                print(f"{server.name}: {sum(1 for _ in log)} lines in its log (one access line per request)")
        return found
    finally:
        for server in everything:
            server.stop()
        redis.stop()


def metrics_cost(args, workdir: str) -> dict:
    """Figure (d): list throughput of the service with metrics on, as `serve` runs it, over the same without metrics."""
    url = args.database_url or "sqlite:///" + os.path.join(workdir, "bench.db")
    seeded = seed.seed(url, args.drivers)
    path = f"/api/v1/risks/{seeded.risk_uuid}/data/drivers"
    redis = servers.RedisServer(workdir).start()
    sides = [
        service("metrics", args.root, url, redis.url, args, workdir),
        service("none", args.root, url, redis.url, args, workdir, RISKAPI_METRICS="0"),
    ]
    try:
        for server in sides:
            server.start(path + "?per_page=50", {"Authorization": f"Bearer {seeded.token}"})
        page = path + "?per_page=50"
        print(f"(d) GET {page}: the service with metrics vs without, {args.rounds} x {args.duration:g} s per side")
        rounds = figures.throughput([figures.Target(server.name, server, page) for server in sides], seeded.token, args)
    finally:
        for server in sides:
            server.stop()
        redis.stop()
    on, off = (statistics.mean(rate for rate, _ in rounds[name]) for name in ("metrics", "none"))
    cpu_on, cpu_off = (statistics.mean(ms for _, ms in rounds[name]) for name in ("metrics", "none"))
    print(f"    mean: with metrics {on:.0f} req/s, without {off:.0f} req/s; CPU per request {cpu_on:.2f} vs {cpu_off:.2f} ms")
    return {"metrics": on / off, "metrics_cpu": cpu_off / cpu_on}


def summary(found: dict) -> None:
    """Print the figures against their aims."""
    rate, cpu = found["rate"], found["cpu"]
    for name in found["names"]:
        print()
        ratio = rate[name] / rate["baseline"]
        report(f"(a) throughput {name}/baseline", ratio, f">= {AIMS['throughput']}", ratio >= AIMS["throughput"])
        print(f"{'    (CPU per request baseline/' + name + ')':<46} {cpu['baseline'] / cpu[name]:6.2f}"
              f"   ({cpu[name]:.2f} vs {cpu['baseline']:.2f} ms; less sensitive to a noisy machine)")  # fmt: skip
        if "floor" in rate:
            ratio = rate[name] / rate["floor"]
            report(f"(a) throughput {name}/floor", ratio, ">= 0.8 (issue 35)", ratio >= 0.8)
            print(f"{'    (server CPU ms per page: ' + name + ', floor)':<46} {cpu[name]:6.2f}   {cpu['floor']:.2f}"
                  f"   (aim for {name}: <= 1.2 ms)")  # fmt: skip
        depth, bulk = found["depth"][name], found["bulk"][name]
        report(f"(b) {name}: deep page / first page", depth, f"<= {AIMS['depth']}", depth <= AIMS["depth"])
        report(f"(c) {name}: bulk create / raw insert_many", bulk, f"<= {AIMS['bulk']}", bulk <= AIMS["bulk"])
    if "against" in rate:
        print()
        print(f"{'service/against: requests/s':<46} {rate['service'] / rate['against']:6.2f}")
        print(f"{'service/against: CPU per request':<46} {cpu['service'] / cpu['against']:6.2f}")
        print(f"{'service/against: bulk create':<46} {found['bulk']['service'] / found['bulk']['against']:6.2f}")


def main(argv=None) -> int:
    """Run the benchmark; exit 1 on errors only (a missed aim is a figure, not an error)."""
    args = options(argv)
    workdir = tempfile.mkdtemp(prefix="riskapi-bench-")
    try:
        if args.metrics_cost:
            found = metrics_cost(args, workdir)
            print()
            report("(d) throughput with/without metrics", found["metrics"], ">= 0.95", found["metrics"] >= 0.95)
            print(f"{'    (CPU per request without/with)':<46} {found['metrics_cpu']:6.2f}")
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
