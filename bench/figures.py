"""The three figures: throughput against the baseline, deep-page latency, bulk-create cost."""

import random
import statistics
import time
from dataclasses import dataclass
from urllib.parse import quote

import orjson

import models
from bench import load, seed
from bench.client import Client, median_ms
from bench.servers import Server


@dataclass
class Target:
    """A running server and the list URL to load."""

    name: str
    server: Server
    path: str


def throughput(targets: list[Target], token: str, args) -> dict:
    """Load the sides in turn (A, B, C, C, B, A...); return {name: [(requests/s, server CPU ms per request)]}."""
    for target in targets:
        load.measure(args.load, target.server.port, target.path, token, args.warmup, args.connections)
    results: dict = {target.name: [] for target in targets}
    for round_ in range(args.rounds):
        for target in targets if round_ % 2 == 0 else targets[::-1]:
            cpu = target.server.cpu_seconds()
            rate, count = load.measure(args.load, target.server.port, target.path, token, args.duration, args.connections)
            cpu_ms = (target.server.cpu_seconds() - cpu) * 1000.0 / max(count, 1)
            results[target.name].append((rate, cpu_ms))
            print(f"  round {round_ + 1}: {target.name:<8} {rate:8.0f} req/s   {cpu_ms:5.2f} server CPU ms/request", flush=True)
    return results


def deep_cursor(client: Client, list_path: str, depth: int) -> str:
    """Walk the list through the API with per_page=100 and return the cursor after `depth` drivers."""
    cursor, seen = None, 0
    for _ in range(depth // 100 + 1):
        if seen >= depth:
            return cursor
        page = client.json("GET", f"{list_path}?per_page=100" + (f"&cursor={quote(cursor)}" if cursor else ""))
        seen += len(page["data"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    if seen < depth:
        raise RuntimeError(f"the list ended after {seen} drivers, before depth {depth}")
    return cursor


def depth_ratio(client: Client, list_path: str, depth: int, samples: int) -> tuple[float, float]:
    """Return the median ms of the first page and of the page at `depth`, sampled alternately."""
    deep = f"{list_path}?per_page=50&cursor={quote(deep_cursor(client, list_path, depth))}"
    first = f"{list_path}?per_page=50"
    for _ in range(5):
        client.timed(first), client.timed(deep)
    firsts, deeps = [], []
    for _ in range(samples):
        firsts.append(client.timed(first))
        deeps.append(client.timed(deep))
    return median_ms(firsts), median_ms(deeps)


def bulk_ratio(sides: dict[str, tuple[Client, Server]], agency_id: int, runs: int, size: int = 1000) -> tuple[dict, float]:
    """Return {name: (median ms, mean server CPU ms)} of a bulk create through each service, and the median ms of
    a raw insert_many of the same rows.

    The sides take turns within each run; the first run warms them up and is not counted.
    """
    rng = random.Random(7)
    api: dict = {name: [] for name in sides}
    cpu: dict = {name: [] for name in sides}
    raw = []
    for run in range(runs + 1):
        values = [seed.driver_values(rng, i) for i in range(size)]
        body = orjson.dumps({"data": [{"object": "driver", "data": v} for v in values]})
        for name, (client, server) in list(sides.items())[:: 1 if run % 2 else -1]:
            with models.db.connection_context():
                risk = seed.new_risk(agency_id)
            used = server.cpu_seconds()
            status, answer, seconds = client.send("POST", f"/api/v1/risks/{risk.uuid}/data/drivers", body)
            used = server.cpu_seconds() - used
            if status != 201 or len(orjson.loads(answer)["data"]) != size:
                raise RuntimeError(f"bulk create ({name}) answered {status}: {answer[:300]!r}")
            if run:
                api[name].append(seconds)
                cpu[name].append(used)
        with models.db.connection_context():
            raw_risk = seed.new_risk(agency_id)
        now = models.utcnow()
        rows = [seed.driver_row(raw_risk.id, n + 1, v, now) for n, v in enumerate(values)]
        with models.db.connection_context():
            started = time.perf_counter()
            seed.insert_drivers(rows)
            elapsed = time.perf_counter() - started
        if run:
            raw.append(elapsed)
    # CPU as a mean: /proc counts in ticks of 10 ms, a quarter of one create's.
    medians = {name: (statistics.median(api[name]) * 1000.0, statistics.mean(cpu[name]) * 1000.0) for name in sides}
    return medians, statistics.median(raw) * 1000.0
