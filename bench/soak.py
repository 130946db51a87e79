"""Soak: mixed traffic on `riskapi serve` while webhook deliveries flow (`python -m bench.soak -h`).

`--connections` connections (32) for `--seconds` (60) across 2 agencies, each with one risk profile and a
webhook subscribed to driver.created/updated/deleted that points at a local HTTPS receiver (toolkit/receiver.py,
throw-away CA, keep-alive) run in a process of its own. The load (aiohttp, asyncio) mixes filtered lists
following next_page_url, creates of 1-20 drivers, PATCHes and DELETEs of drivers created earlier. Then it
waits (up to --drain seconds) for every expected delivery.

Prints requests/s, status counts, read and write latency, deliveries expected / received / lost / duplicated /
badly signed, and how long the delivery backlog took to drain. Exits 1 on any 5xx, transport error, lost,
duplicated, unexpected or badly signed delivery. Read p99 is an aim (<= 500 ms), not a failure.
"""

import argparse
import asyncio
import collections
import contextlib
import hashlib
import hmac
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from queue import Empty
from typing import NamedTuple
from urllib.parse import urlencode

import aiohttp
import httpx
import orjson
import psutil
from yarl import URL

from bench import seed, servers
from toolkit import ROOT
from toolkit.receiver import Receiver
from toolkit.serving import free_port
from toolkit.workers import delete_queue

EVENTS = ["driver.created", "driver.updated", "driver.deleted"]
POSTGRES, SOAK_DB = "postgresql://postgres@127.0.0.1:5432", "riskapi_soak"
READ_P99_AIM_MS = 500.0
ADDRESS = {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701"}
# One filtered list per read: each exercises a different filter, sort or include.
LISTS = [
    {"filter[license_state]": "TX,CA,NY", "sort": "-last_name,number"},
    {"filter[search]": "lo", "include": "address"},
    {"filter[is_employee]": "true", "sort": "-created"},
    {"filter[percent_use]": ",".join(str(n) for n in range(0, 100, 3)), "sort": "first_name"},
    {"filter[created]": "2020-01-01,", "sort": "-updated"},
]


def options(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of load (default 60)")
    parser.add_argument("--connections", type=int, default=32, help="concurrent connections (default 32)")
    parser.add_argument("--processes", type=int, default=2, help="API processes of `riskapi serve --workers` (default 2)")
    parser.add_argument("--database-url", help=f"add rows to this database (default: reset {SOAK_DB} on {POSTGRES})")
    parser.add_argument("--redis-url", help="a shared Redis (a queue of this run's own); default: serve's embedded one")
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to wait for the backlog (default 120)")
    return parser.parse_args(argv)


def database(args, work: Path) -> str:
    """Return the database to serve: --database-url, our own freshly reset PostgreSQL database, or SQLite."""
    if args.database_url:
        return args.database_url
    import psycopg2

    try:
        conn = psycopg2.connect(f"{POSTGRES}/postgres", connect_timeout=3)
    except psycopg2.OperationalError as exc:
        print(f"note: PostgreSQL did not answer ({str(exc).strip().splitlines()[0]}); using SQLite, figures are not comparable")
        return f"sqlite:///{work}/soak.db"
    conn.autocommit = True  # CREATE/DROP DATABASE refuse to run inside a transaction.
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SOAK_DB} WITH (FORCE)")  # Only ever our own database.
        cur.execute(f"CREATE DATABASE {SOAK_DB}")
    conn.close()
    return f"{POSTGRES}/{SOAK_DB}"


class Tenant:
    """An agency made with the `riskapi` CLI, as an operator would: a token, a risk profile, live drivers."""

    def __init__(self, url: str, name: str):
        agency = cli(url, "agency", "create", "--name", name, "--webhook-limit", "10")["uuid"]
        self.headers = {"Authorization": f"Bearer {cli(url, 'token', 'create', '--agency', agency)['token']}"}
        self.risk = cli(url, "risk", "create", "--agency", agency, "--type", "commercial", "--name", name)["uuid"]
        self.live: list[str] = []  # Drivers no request is touching now (asyncio: no lock needed between awaits).
        self.webhook = self.secret = None


def cli(url: str, *argv: str) -> dict:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "riskapi.process", *argv], env=env, cwd=ROOT, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"riskapi {' '.join(argv)} failed: {run.stderr}")
    return json.loads(run.stdout)


class Stats:
    """What the load saw: statuses, latencies, a few samples of each non-2xx, and the deliveries it caused."""

    def __init__(self, base_url: str):
        self.base_url = base_url  # for the paths of first requests; next_page_url values are absolute
        self.statuses, self.samples = collections.Counter(), collections.defaultdict(list)
        self.reads, self.writes = [], []
        self.expected = collections.Counter()  # (webhook, event, driver uuid) -> deliveries due

    async def send(self, http, tenant, method: str, url: str, body=None):
        """Send one request; return the parsed body of a 2xx, else None (noting the status and a sample)."""
        # encoded=True: the URL goes out byte for byte as given (yarl would otherwise re-quote the query).
        target = URL(self.base_url + url if url.startswith("/") else url, encoded=True)
        started = time.perf_counter()
        try:
            async with http.request(method, target, headers=tenant.headers, json=body) as response:
                content = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:  # TimeoutError: the session's total timeout
            status, content = "error", repr(exc).encode()
        else:
            (self.reads if method == "GET" else self.writes).append(time.perf_counter() - started)
            status = response.status
        self.statuses[status] += 1
        if status != "error" and status < 300:
            return orjson.loads(content)
        if len(self.samples[status]) < 3:
            text = content.decode("utf-8", "replace")
            self.samples[status].append(f"{method} {url} {json.dumps(body)[:300] if body else ''}\n      -> {text[:500]}")
        return None

    def expect(self, tenant, event: str, uuids) -> None:
        for driver in uuids:
            self.expected[(tenant.webhook, event, driver)] += 1


def take(pool: list, rng: random.Random, count: int) -> list:
    """Remove up to count random drivers from pool, so no two requests work on the same driver at once."""
    picked = rng.sample(pool, min(count, len(pool)))
    pool[:] = [u for u in pool if u not in picked]  # picked holds at most 5
    return picked


async def create(http, stats, tenant, rng):
    drivers = []
    for _ in range(rng.randint(1, 20)):
        values = seed.driver_values(rng, rng.randrange(10**8))
        if rng.random() < 0.5:  # Half with a nested address: a second table in the same write.
            values["address"] = {"object": "address", "data": ADDRESS}
        drivers.append({"object": "driver", "data": values})
    page = await stats.send(http, tenant, "POST", f"/risks/{tenant.risk}/data/drivers", {"data": drivers})
    if page:
        uuids = [d["uuid"] for d in page["data"]]
        tenant.live += uuids
        stats.expect(tenant, "driver.created", uuids)


async def read(http, stats, tenant, rng):
    url = f"/risks/{tenant.risk}/data/drivers?" + urlencode({**rng.choice(LISTS), "per_page": rng.choice((10, 25, 50))})
    for _ in range(rng.randint(1, 4)):  # Follow the cursor a few pages, as a client paging through would.
        page = await stats.send(http, tenant, "GET", url)
        if not page or not page["next_page_url"]:
            return
        url = page["next_page_url"]


async def change(http, stats, tenant, rng, method: str):
    """PATCH or DELETE 1-5 drivers created earlier (or create some when there are none yet)."""
    picked = take(tenant.live, rng, rng.randint(1, 5))
    if not picked:
        return await create(http, stats, tenant, rng)
    # A unique note: a PATCH that changes nothing might rightly emit no driver.updated.
    items = [{"object": "driver", "uuid": u, "data": {"notes": f"soak {uuid.uuid4()}", "percent_use": rng.randint(0, 100)}}
             if method == "PATCH" else {"object": "driver", "uuid": u} for u in picked]  # fmt: skip
    if await stats.send(http, tenant, method, f"/risks/{tenant.risk}/data", {"data": items}):
        stats.expect(tenant, "driver.updated" if method == "PATCH" else "driver.deleted", picked)
        if method == "DELETE":
            return
    tenant.live += picked  # Updated, or not deleted after all: usable again.


MIX = {"read": (read, 50), "create": (create, 20), "update": (partial(change, method="PATCH"), 20),
       "delete": (partial(change, method="DELETE"), 10)}  # fmt: skip


async def load(tenants: list, args, stats: Stats) -> None:
    # One keep-alive connection per closed-loop "connection" below; 120 s for a whole request, body included.
    connector, timeout = aiohttp.TCPConnector(limit=args.connections), aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, json_serialize_bytes=orjson.dumps) as http:
        deadline = time.monotonic() + args.seconds

        async def connection(number: int):
            rng = random.Random(number)
            while time.monotonic() < deadline:
                operation = rng.choices([op for op, _ in MIX.values()], weights=[w for _, w in MIX.values()])[0]
                await operation(http, stats, rng.choice(tenants), rng)

        await asyncio.gather(*(connection(n) for n in range(args.connections)))


class Delivery(NamedTuple):
    """What tally needs of one request the receiver got: three headers, the body, and when (time.monotonic())."""

    hook: str | None
    signature: str
    delivery: str | None
    body: bytes
    at: float


def _receive(records, control, stop) -> None:
    """The receiver process: answer 200 to every request, put each on records as a Delivery's fields (a tuple).

    control gets (url, CA path) once serving, and the number of TLS connections accepted once stop is set."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides when to stop.

    def record(request) -> int:
        headers = request.headers
        fields = headers.get("service-webhook"), headers.get("service-signature", ""), headers.get("service-delivery")
        records.put((*fields, request.body, request.at))  # Monotonic clocks are system-wide: the parent compares.
        return 200

    with Receiver(keep_alive=True) as receiver:
        receiver.responses = record
        control.put((receiver.url, receiver.ca_path))
        stop.wait()
        control.put(receiver.connections)


class Receiving:
    """toolkit/receiver.py's Receiver(keep_alive=True) in a process of its own: its TLS handshakes then use neither
    the load's GIL nor its CPU time. `requests` holds the Deliveries drained from its queue so far."""

    def __init__(self):
        context = multiprocessing.get_context("spawn")  # No copy of the parent's threads or loop.
        self._records, self._control, self._stop = context.Queue(), context.Queue(), context.Event()
        self._process = context.Process(target=_receive, args=(self._records, self._control, self._stop),
                                        name="soak-receiver", daemon=True)  # fmt: skip
        self.requests: list[Delivery] = []
        self.connections: int | None = None

    def __enter__(self) -> "Receiving":
        self._process.start()
        try:
            self.url, self.ca_path = self._get(self._control, 60.0)
        except BaseException:
            self.close()
            raise
        self.pid = self._process.pid
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _get(self, source, timeout: float):
        """Return the next item of source; fail if the receiver process dies or nothing comes within timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return source.get(timeout=0.2)
            except Empty:
                if not self._process.is_alive():
                    raise RuntimeError(f"the receiver process exited with {self._process.exitcode}") from None
        raise RuntimeError(f"the receiver process said nothing within {timeout:g} s")

    def wait_for(self, n: int, timeout: float = 0.0) -> bool:
        """Drain what has arrived; wait up to timeout until at least n requests are in. Return whether they are."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                while True:
                    self.requests.append(Delivery(*self._records.get_nowait()))
            except Empty:
                pass
            if len(self.requests) >= n or (left := deadline - time.monotonic()) <= 0:
                return len(self.requests) >= n
            try:
                self.requests.append(Delivery(*self._records.get(timeout=left)))
            except Empty:
                pass

    def cpu_seconds(self) -> float:
        """Return the CPU time (user + system, every thread) the receiver process used so far."""
        times = psutil.Process(self.pid).cpu_times()
        return times.user + times.system

    def close(self) -> None:
        """Stop the receiver, learn how many connections it accepted, and join it (kill it if it will not go)."""
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(RuntimeError):
            if self._process.pid is not None:
                self.connections = self._get(self._control, 10.0)
        # A process that put items on a queue exits only once they are read: keep draining while it stops.
        deadline = time.monotonic() + 10.0
        while self._process.is_alive() and time.monotonic() < deadline:
            self.wait_for(0)
            self._process.join(0.1)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5.0)
        self.wait_for(0)
        for channel in (self._records, self._control):
            channel.close()


def tally(receiver: Receiving, tenants: list, expected: collections.Counter) -> dict:
    """Match what arrived against what is due: by delivery id (duplicates) and by (webhook, event, driver)."""
    secrets = {t.webhook: t.secret.encode() for t in tenants}
    seen, got, bad, duplicated = set(), collections.Counter(), 0, 0
    for request in receiver.requests:
        hook, signature = request.hook, request.signature
        digest = hmac.new(secrets.get(hook, b""), request.body, hashlib.sha256).hexdigest()
        bad += hook not in secrets or not hmac.compare_digest(digest, signature)
        delivery = request.delivery
        if delivery in seen:
            duplicated += 1
            continue
        seen.add(delivery)
        event = json.loads(request.body)
        got[(hook, event["event"], event["data"]["uuid"])] += 1
    return {"received": len(seen), "duplicated": duplicated, "bad": bad, "lost": expected - got, "unexpected": got - expected}


def ms(samples: list, q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else float("nan")


def soak(args, work: Path) -> bool:
    """Start everything, load, wait for the deliveries, report; stop what was started whatever happens."""
    url = database(args, work)
    print(f"database: {url.split('://')[0]} ({url.rsplit('/', 1)[-1]})")
    tenants = [Tenant(url, f"soak {n}") for n in (1, 2)]
    queue, port = f"soak-{uuid.uuid4().hex[:8]}", free_port()
    with Receiving() as receiver:
        env = {"DATABASE_URL": url, "REDIS_URL": args.redis_url or "", "RISKAPI_WEBHOOK_QUEUE": queue,
               "RISKAPI_WEBHOOK_ALLOW_PRIVATE": "1", "RISKAPI_WEBHOOK_CA_BUNDLE": receiver.ca_path,
               "RISKAPI_VALIDATE_RESPONSES": "0"}  # fmt: skip
        argv = [sys.executable, "-m", "riskapi.process", "serve", "--port", str(port), "--workers", str(args.processes)]
        service = servers.Server("service", argv, env, port, str(work))
        try:
            service.start(f"/api/v1/risks/{tenants[0].risk}/data/drivers", tenants[0].headers)
            base = f"http://127.0.0.1:{port}/api/v1"
            for tenant in tenants:
                body = {"data": [{"object": "webhook", "data": {"type": "custom", "url": receiver.url, "events": EVENTS}}]}
                hook = httpx.post(base + "/webhooks", json=body, headers=tenant.headers, timeout=30).raise_for_status().json()
                tenant.webhook, tenant.secret = hook["data"][0]["uuid"], hook["data"][0]["meta"]["signing_secret"]
            print(f"service: riskapi serve --workers {args.processes}, Redis {args.redis_url or 'embedded'} (queue {queue})")
            mix = ", ".join(f"{name} {weight}%" for name, (_, weight) in MIX.items())
            print(f"load: {args.seconds:g} s, {args.connections} connections, 2 agencies, {mix}", flush=True)
            stats, started = Stats(base), time.monotonic()
            cpu = service.cpu_seconds(), time.process_time(), receiver.cpu_seconds()
            asyncio.run(load(tenants, args, stats))
            stopped = time.monotonic()
            # The load and the receiver share the machine with the service: say how much each used.
            cpu = service.cpu_seconds() - cpu[0], time.process_time() - cpu[1], receiver.cpu_seconds() - cpu[2]
            receiver.wait_for(0)  # What the receiver got during the load is drained only now, off the load's CPU.
            while (result := tally(receiver, tenants, stats.expected))["lost"] and time.monotonic() < stopped + args.drain:
                receiver.wait_for(len(receiver.requests) + 1, timeout=0.5)
            drained = max([r.at for r in receiver.requests] + [stopped]) - stopped
            time.sleep(1.0)  # A late duplicate would show up here.
            receiver.wait_for(0)
            result = tally(receiver, tenants, stats.expected)
            # Arrival times come from the receiver's clock: what was queued but not yet read still counts.
            during = sum(r.at <= stopped for r in receiver.requests)
        finally:
            service.stop()
            if args.redis_url:
                delete_queue(args.redis_url, queue)

    elapsed, total = stopped - started, sum(stats.statuses.values())
    print(f"\nrequests: {total} in {elapsed:.1f} s = {total / elapsed:.1f} req/s")
    print(f"CPU during the load: service {cpu[0]:.1f} s, load {cpu[1]:.1f} s, receiver {cpu[2]:.1f} s,"
          f" of {elapsed * os.cpu_count():.0f} s on {os.cpu_count()} cores")  # fmt: skip
    statuses = sorted(stats.statuses.items(), key=lambda item: str(item[0]))
    print("statuses: " + ", ".join(f"{status} x {n}" for status, n in statuses))
    for status, samples in sorted(stats.samples.items(), key=lambda item: str(item[0])):
        print(f"  {status}:\n    " + "\n    ".join(samples))
    read_p99 = ms(stats.reads, 0.99)
    print(f"reads  (GET, {len(stats.reads)}): p50 {ms(stats.reads, 0.5):7.1f} ms, p99 {read_p99:7.1f} ms"
          f"   (aim p99 <= {READ_P99_AIM_MS:.0f} ms: {'met' if read_p99 <= READ_P99_AIM_MS else 'NOT met'})")  # fmt: skip
    writes = f"p50 {ms(stats.writes, 0.5):7.1f} ms, p99 {ms(stats.writes, 0.99):7.1f} ms"
    print(f"writes (POST/PATCH/DELETE, {len(stats.writes)}): {writes}")
    kinds = collections.Counter(event for _, event, _ in stats.expected.elements())
    print(f"deliveries expected: {sum(kinds.values())} (" + ", ".join(f"{e} {kinds[e]}" for e in EVENTS) + ")")
    lost, unexpected = sum(result["lost"].values()), sum(result["unexpected"].values())
    over = f"over {receiver.connections} connections" if receiver.connections is not None else "connections unknown"
    print(f"deliveries received: {result['received']} unique ({during} during the load) {over}, lost {lost}, "
          f"duplicated {result['duplicated']}, badly signed {result['bad']}, unexpected {unexpected}")  # fmt: skip
    for key, n in list((result["lost"] + result["unexpected"]).items())[:5]:
        print(f"  {'lost' if key in result['lost'] else 'unexpected'}: {key[1]} {key[2]} x {n}")
    print(f"backlog drained {drained:.1f} s after the load stopped" + (f" (gave up after {args.drain:g} s)" if lost else ""))
    errors = sum(n for status, n in stats.statuses.items() if status == "error" or status >= 500)
    if errors:
        print(f"service log ({service.log_path}):\n{service.log_tail(40)}")
    # Duplicates too: at least once allows them after a failure, and a healthy run has none.
    return not (errors or lost or unexpected or result["duplicated"] or result["bad"])


def main(argv=None) -> int:
    args = options(argv)
    work = Path(tempfile.mkdtemp(prefix="riskapi-soak-"))
    try:
        ok = soak(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("result: " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
