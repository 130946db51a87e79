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


def throughput(service: Target, baseline: Target, token: str, args) -> dict:
    """Load both sides in turn (A, B, B, A...); return {name: [(requests/s, server CPU ms per request)]}."""
    for target in (service, baseline):
        load.measure(args.load, target.server.port, target.path, token, args.warmup, args.connections)
    results: dict = {service.name: [], baseline.name: []}
    for round_ in range(args.rounds):
        for target in (service, baseline) if round_ % 2 == 0 else (baseline, service):
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


def bulk_ratio(client: Client, agency_id: int, runs: int, size: int = 1000) -> tuple[float, float]:
    """Return the median ms of a bulk create through the service and of a raw insert_many of the same rows."""
    rng = random.Random(7)
    api, raw = [], []
    for run in range(runs + 1):
        values = [seed.driver_values(rng, i) for i in range(size)]
        with models.db.connection_context():
            api_risk, raw_risk = seed.new_risk(agency_id), seed.new_risk(agency_id)
        body = orjson.dumps({"data": [{"object": "driver", "data": v} for v in values]})
        status, answer, seconds = client.send("POST", f"/api/v1/risks/{api_risk.uuid}/data/drivers", body)
        if status != 201 or len(orjson.loads(answer)["data"]) != size:
            raise RuntimeError(f"bulk create answered {status}: {answer[:300]!r}")
        now = models.utcnow()
        rows = [seed.driver_row(raw_risk.id, n + 1, v, now) for n, v in enumerate(values)]
        with models.db.connection_context():
            started = time.perf_counter()
            seed.insert_drivers(rows)
            elapsed = time.perf_counter() - started
        if run:  # The first run warms both sides up and is not counted.
            api.append(seconds)
            raw.append(elapsed)
    return statistics.median(api) * 1000.0, statistics.median(raw) * 1000.0
