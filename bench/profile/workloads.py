"""The loads bench.profile runs under py-spy, each printing the CPU its server or worker spent per operation."""

import os
import random
import subprocess
import time
from pathlib import Path

import orjson

import models
from bench import load, seed, servers
from bench.client import Client
from bench.profile.meter import Meter, own_backend
from models import migrations
from riskapi.serve import stop_process_group
from toolkit.receiver import Receiver
from toolkit.tenants import make_tenant

WORKER_GRACE = 10.0


def list_load(args, server: servers.Server, seeded: seed.Seeded, path: str, record, meter: Meter) -> None:
    """wrk on the first page (16 connections, --per-page drivers) for args.seconds, recorded; print req/s and CPU a request."""
    _wrk_load(args, server, seeded, f"{path}?per_page={args.per_page}", record, meter)


def probe_load(args, server: servers.Server, seeded: seed.Seeded, path: str, record, meter: Meter) -> None:
    """wrk on healthz as list_load does on the page: what the machinery alone costs a request (no token, no query)."""
    _wrk_load(args, server, seeded, "/api/v1/healthz", record, meter)


def _wrk_load(args, server: servers.Server, seeded: seed.Seeded, page: str, record, meter: Meter) -> None:
    load.wrk(server.port, page, seeded.token, 2.0, 16)  # warm-up, not recorded
    recording = record()
    time.sleep(0.5)  # py-spy attaches
    meter.start()
    rate, count = load.wrk(server.port, page, seeded.token, args.seconds, 16)
    print(f"GET {page}: {rate:.0f} req/s, {count} requests (with py-spy attached)")
    meter.report(count, "request", "API")
    recording.stop()


def bulk_load(args, server: servers.Server, seeded: seed.Seeded, path: str, record, meter: Meter) -> None:
    """1,000-driver creates on one connection, each in a new risk profile, recorded; print CPU per driver."""
    client = Client(server.port, seeded.token)
    size, posts, elapsed = args.size, 0, 0.0
    subscribe(seeded.agency_id, args.subscribed)
    try:

        def post(number: int) -> tuple[float, float]:
            values = [seed.driver_values(random.Random(number), i) for i in range(size)]
            body = orjson.dumps({"data": [{"object": "driver", "data": v} for v in values]})
            with models.db.connection_context():
                risk = seed.new_risk(seeded.agency_id)
            status, answer, seconds = client.send("POST", f"/api/v1/risks/{risk.uuid}/data/drivers", body)
            if status != 201:
                raise RuntimeError(f"bulk create answered {status}: {answer[:300]!r}")
            return seconds

        post(0)  # warm-up, not recorded
        recording = record()
        time.sleep(0.5)
        meter.exclude = {own_backend()}
        meter.start()
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            posts += 1
            elapsed += post(posts)
        print(
            f"{posts} POSTs of {size} drivers, {args.subscribed} webhooks subscribed to driver.created: "
            f"{1000 * elapsed / posts:.1f} ms each (with py-spy attached; the risk profile each is made in is not timed)"
        )
        meter.report(posts * size, "driver", "API")
        recording.stop()
    finally:
        client.close()


def subscribe(agency_id: int, webhooks: int) -> None:
    """Subscribe webhooks that nobody sends to (no worker runs) to driver.created: each driver writes its deliveries."""
    from foundation import signing
    from models.webhooks import Webhook, pack_events

    with models.db.connection_context():
        for n in range(webhooks):
            Webhook.create(agency=agency_id, type="custom", url=f"https://hooks.example.com/{n}",
                           secret=signing.generate_secret(), events=pack_events(["driver.created"]))  # fmt: skip


def start_worker(root: Path, env: dict, log: Path) -> subprocess.Popen:
    """Start `riskapi worker` of checkout root in a session of its own (its RQ scheduler goes down with it)."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [servers.python_of(root), "-m", servers.main_module(root), "worker"],
            cwd=root, env={**os.environ, **env, "PYTHONPATH": str(root)}, stdin=subprocess.DEVNULL,
            stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip


def delivery_load(args, work: Path, record) -> None:
    """Record deliveries in the outbox, one `riskapi worker` sends them; record it; print CPU per delivery."""
    from foundation import signing
    from models import delivery_states
    from models.webhooks import PENDING, Delivery, Webhook, pack_events
    from webhooks import outbox

    url = args.database_url or f"sqlite:///{work}/bench.db"
    models.bind(url)
    migrations.upgrade()
    redis = servers.RedisServer(str(work)).start()
    worker = None
    try:
        with Receiver(keep_alive=args.keep_alive) as receiver:
            tenant = make_tenant(webhook_limit=10)
            with models.db.connection_context():
                # Deliveries of other runs in this database must not compete for this worker.
                delivery_states.abandon(Delivery.status == PENDING, models.utcnow())
                Webhook.create(agency=tenant.agency.id, type="custom", url=receiver.url, secret=signing.generate_secret(),
                               events=pack_events(["form.completed"]))  # fmt: skip
            env = {"DATABASE_URL": url, "REDIS_URL": redis.url, "RISKAPI_WEBHOOK_ALLOW_PRIVATE": "1",
                   "RISKAPI_WEBHOOK_CA_BUNDLE": receiver.ca_path, "RISKAPI_WEBHOOK_MAX_RATE": "0"}  # fmt: skip
            worker = start_worker(args.root, env, work / "worker.log")

            def deliver(count: int, tag: str) -> float:
                before = len(receiver.requests)
                payloads = [{"form": f"F-{tag}-{i}", "answers": {"q1": "yes", "q2": i}} for i in range(count)]
                with models.db.connection_context(), models.atomic():
                    outbox.record(tenant.agency.id, "form.completed", payloads)
                if not receiver.wait_for(before + count, timeout=300):
                    raise RuntimeError(f"only {len(receiver.requests) - before} of {count} deliveries arrived:\n"
                                       + (work / "worker.log").read_text(errors="replace")[-2000:])  # fmt: skip
                arrivals = [r.at for r in receiver.requests[before:]]
                return max(arrivals) - min(arrivals)

            deliver(200, "warm")  # warm-up, not recorded
            recording = record(worker.pid)
            time.sleep(0.5)
            meter = Meter(lambda: worker.pid, redis.url, redis.proc.pid, url)
            meter.exclude = {own_backend()}
            meter.start()
            seconds = deliver(args.deliveries, "timed")
            kept = "kept" if args.keep_alive else "closed after each request"
            print(
                f"{args.deliveries} deliveries to one webhook (RISKAPI_WEBHOOK_MAX_RATE=0, connections {kept}): "
                f"{args.deliveries / seconds:.0f}/s (with py-spy attached; recording them in the outbox is not counted)"
            )
            meter.report(args.deliveries, "delivery", "worker")
            recording.stop()
    finally:
        if worker is not None:
            stop_process_group(worker, WORKER_GRACE)
        redis.stop()
        models.db.close()
