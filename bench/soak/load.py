"""The soak's tenants and traffic: agencies made with the CLI, and a closed-loop mix of lists and writes (aiohttp)."""

import asyncio
import collections
import concurrent.futures
import json
import os
import random
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
import orjson
from yarl import URL

from bench import seed, servers

EVENTS = ["driver.created", "driver.updated", "driver.deleted"]
ADDRESS = {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701"}
# One filtered list per read: each exercises a different filter, sort or include.
LISTS = [
    {"filter[license_state]": "TX,CA,NY", "sort": "-last_name,number"},
    {"filter[search]": "lo", "include": "address"},
    {"filter[is_employee]": "true", "sort": "-created"},
    {"filter[percent_use]": ",".join(str(n) for n in range(0, 100, 3)), "sort": "first_name"},
    {"filter[created]": "2020-01-01,", "sort": "-updated"},
]


@dataclass(frozen=True)
class Checkout:
    """The code that serves: a checkout's root and its interpreter (the bench's own code always runs from here)."""

    root: Path
    python: str

    def cli(self, url: str, *argv: str) -> dict:
        """Run the checkout's `riskapi` command against url and return its JSON answer."""
        env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(self.root)}
        argv_ = [self.python, "-m", servers.main_module(self.root), *argv]
        run = subprocess.run(argv_, env=env, cwd=self.root, capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"riskapi {' '.join(argv)} failed: {run.stderr}")
        return json.loads(run.stdout)


class Tenant:
    """An agency made with the `riskapi` CLI, as an operator would: a token, a risk profile, live drivers."""

    def __init__(self, checkout: Checkout, url: str, name: str):
        agency = checkout.cli(url, "agency", "create", "--name", name, "--webhook-limit", "10")["uuid"]
        self.headers = {"Authorization": f"Bearer {checkout.cli(url, 'token', 'create', '--agency', agency)['token']}"}
        self.risk = checkout.cli(url, "risk", "create", "--agency", agency, "--type", "commercial", "--name", name)["uuid"]
        self.live: list[str] = []  # Drivers no request is touching now (asyncio: no lock needed between awaits).
        self.webhook = self.secret = None


def make_tenants(checkout: Checkout, url: str, count: int) -> list[Tenant]:
    """Make count tenants, a few CLI runs at once (each run is mostly interpreter start-up)."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda n: Tenant(checkout, url, f"soak {n}"), range(1, count + 1)))


@dataclass
class Stats:
    """What the load saw: statuses, timed requests, a few samples of each non-2xx, and the deliveries it caused."""

    statuses: collections.Counter = field(default_factory=collections.Counter)
    samples: dict = field(default_factory=lambda: collections.defaultdict(list))
    reads: list = field(default_factory=list)  # (monotonic time done, seconds taken)
    writes: list = field(default_factory=list)
    expected: collections.Counter = field(default_factory=collections.Counter)  # (webhook, event, driver) -> due
    produced: list = field(default_factory=list)  # (monotonic time, deliveries a write caused)
    warm_up: int = 0  # deliveries due from the writes made before the load

    def expect(self, tenant: Tenant, event: str, uuids) -> None:
        """Note the deliveries a successful write is due to cause."""
        for driver in uuids:
            self.expected[(tenant.webhook, event, driver)] += 1
        self.produced.append((time.monotonic(), len(uuids)))


@dataclass
class Connection:
    """One closed-loop client: the shared session and Stats, the API it talks to, its own random stream."""

    http: aiohttp.ClientSession
    stats: Stats
    base_url: str  # for the paths of first requests; next_page_url values are absolute
    rng: random.Random

    async def send(self, tenant: Tenant, method: str, url: str, body=None):
        """Send one request; return the parsed body of a 2xx, else None (noting the status and a sample)."""
        stats = self.stats
        # encoded=True: the URL goes out byte for byte as given (yarl would otherwise re-quote the query).
        target = URL(self.base_url + url if url.startswith("/") else url, encoded=True)
        started = time.perf_counter()
        try:
            async with self.http.request(method, target, headers=tenant.headers, json=body) as response:
                content = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:  # TimeoutError: the session's total timeout
            status, content = "error", repr(exc).encode()
        else:
            (stats.reads if method == "GET" else stats.writes).append((time.monotonic(), time.perf_counter() - started))
            status = response.status
        stats.statuses[status] += 1
        if status != "error" and status < 300:
            return orjson.loads(content)
        if len(stats.samples[status]) < 3:
            text = content.decode("utf-8", "replace")
            stats.samples[status].append(f"{method} {url} {json.dumps(body)[:300] if body else ''}\n      -> {text[:500]}")
        return None


def take(pool: list, rng: random.Random, count: int) -> list:
    """Remove up to count random drivers from pool, so no two requests work on the same driver at once."""
    picked = rng.sample(pool, min(count, len(pool)))
    pool[:] = [u for u in pool if u not in picked]  # picked holds at most 5
    return picked


async def create(conn: Connection, tenant: Tenant) -> None:
    """Create 1-20 drivers, half of them with a nested address."""
    rng, drivers = conn.rng, []
    for _ in range(rng.randint(1, 20)):
        values = seed.driver_values(rng, rng.randrange(10**8))
        if rng.random() < 0.5:  # A second table in the same write.
            values["address"] = {"object": "address", "data": ADDRESS}
        drivers.append({"object": "driver", "data": values})
    page = await conn.send(tenant, "POST", f"/risks/{tenant.risk}/data/drivers", {"data": drivers})
    if page:
        uuids = [d["uuid"] for d in page["data"]]
        tenant.live += uuids
        conn.stats.expect(tenant, "driver.created", uuids)


async def read(conn: Connection, tenant: Tenant) -> None:
    """List drivers with one of LISTS' filters, following the cursor a few pages as a client paging through would."""
    rng = conn.rng
    url = f"/risks/{tenant.risk}/data/drivers?" + urlencode({**rng.choice(LISTS), "per_page": rng.choice((10, 25, 50))})
    for _ in range(rng.randint(1, 4)):
        page = await conn.send(tenant, "GET", url)
        if not page or not page["next_page_url"]:
            return
        url = page["next_page_url"]


async def change(conn: Connection, tenant: Tenant, method: str) -> None:
    """PATCH or DELETE 1-5 drivers created earlier (or create some when there are none yet)."""
    picked = take(tenant.live, conn.rng, conn.rng.randint(1, 5))
    if not picked:
        return await create(conn, tenant)
    # A unique note: a PATCH that changes nothing might rightly emit no driver.updated.
    items = [{"object": "driver", "uuid": u, "data": {"notes": f"soak {uuid.uuid4()}", "percent_use": conn.rng.randint(0, 100)}}
             if method == "PATCH" else {"object": "driver", "uuid": u} for u in picked]  # fmt: skip
    if await conn.send(tenant, method, f"/risks/{tenant.risk}/data", {"data": items}):
        conn.stats.expect(tenant, "driver.updated" if method == "PATCH" else "driver.deleted", picked)
        if method == "DELETE":
            return
    tenant.live += picked  # Updated, or not deleted after all: usable again.


MIX = {"read": (read, 50), "create": (create, 20), "update": (partial(change, method="PATCH"), 20),
       "delete": (partial(change, method="DELETE"), 10)}  # fmt: skip


def describe_mix() -> str:
    """Return the mix as `read 50%, create 20%, ...`."""
    return ", ".join(f"{name} {weight}%" for name, (_, weight) in MIX.items())


async def warm_up(tenants: list[Tenant], base: str, stats: Stats) -> None:
    """Create drivers for every tenant before the load, into stats.expected only (not the load's figures)."""
    warm = Stats()
    async with aiohttp.ClientSession(json_serialize_bytes=orjson.dumps) as http:
        conn = Connection(http, warm, base, random.Random(-1))
        for tenant in tenants:
            await create(conn, tenant)
    if set(warm.statuses) != {201}:
        raise RuntimeError(f"the warm-up's creates answered {dict(warm.statuses)}: {dict(warm.samples)}")
    stats.expected.update(warm.expected)
    stats.warm_up = warm.expected.total()


async def load(tenants: list[Tenant], bases: list[str], seconds: float, connections: int, stats: Stats) -> None:
    """Run `connections` closed loops for `seconds`, connection n on API bases[n % len(bases)]."""
    # One keep-alive connection per closed loop; 120 s for a whole request, body included.
    connector, timeout = aiohttp.TCPConnector(limit=connections), aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, json_serialize_bytes=orjson.dumps) as http:
        deadline = time.monotonic() + seconds
        operations, weights = [op for op, _ in MIX.values()], [w for _, w in MIX.values()]

        async def loop(number: int) -> None:
            conn = Connection(http, stats, bases[number % len(bases)], random.Random(number))
            while time.monotonic() < deadline:
                operation = conn.rng.choices(operations, weights=weights)[0]
                await operation(conn, conn.rng.choice(tenants))

        await asyncio.gather(*(loop(n) for n in range(connections)))
