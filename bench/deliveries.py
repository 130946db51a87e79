"""Webhook delivery figures, measured in one run (`python -m bench.deliveries -h`).

(a) Throughput: deliveries per second of ONE `riskapi worker` process (outbox relay + RQ SimpleWorker)
    to a local HTTPS receiver, next to a bare loop of the same HTTP client (jobs.https.transport.post)
    posting the same signed bodies to the same receiver. Both rates are timed at the receiver, from
    the first request's arrival to the last one's. The ratio is the figure (aim >= 0.8).
(b) Latency: from a driver create (POST, one driver) returning to its delivery arriving at the
    receiver, p50 and p99 over sequential creates at random moments (aim p50 <= 25 ms, p99 <= 100 ms).
    The relay polls the outbox every RISKAPI_WEBHOOK_RELAY_INTERVAL (50 ms), half of which is the mean wait.
(c) Isolation: the same latency while --slow (1,000) deliveries to a receiver that answers after 10 s
    are pending, to one webhook and to 50 (bench/isolation.py; aim p99 <= 1 s).

Everything is fresh and private: a temporary SQLite file (or rows added to --database-url), an
embedded Redis on a unix socket (or --redis-url, with a queue of its own), the receiver on a free
loopback port with a throw-away CA. Everything started is stopped at the end.
"""

import argparse
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import httpx

import models
from bench import isolation
from foundation import signing
from foundation.config import Settings
from jobs.https import transport
from jobs.https.connections import Pool
from jobs.runtime.embedded_redis import EmbeddedRedis
from jobs.send import signed_headers
from models import migrations
from toolkit import ROOT
from toolkit.receiver import Receiver, Reply
from toolkit.serving import ServerThread, free_port
from toolkit.tenants import make_tenant
from toolkit.workers import WorkerProcess, delete_queue
from webhooks import outbox

AIMS = {"ratio": 0.8, "p50_ms": 25.0, "p99_ms": 100.0, "isolation_p99_ms": 1000.0}


def options(argv=None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=2000, help="deliveries for the throughput figure (default 2000)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of each side (default 2)")
    parser.add_argument("--creates", type=int, default=200, help="driver creates for the latency figure (default 200)")
    parser.add_argument("--database-url", help="add rows to this database instead of a fresh SQLite file")
    parser.add_argument("--redis-url", help="use this Redis (a private queue) instead of an embedded one")
    parser.add_argument("--threads", type=int, default=Settings.webhook_worker_threads, help="worker threads (default 4)")
    parser.add_argument(
        "--max-rate", type=float, default=0.0,
        help="RISKAPI_WEBHOOK_MAX_RATE of the worker (default 0, no limit: (a) sends everything to one webhook, "
        "so it measures the worker, not the per-webhook rate)",
    )  # fmt: skip
    parser.add_argument("--no-wake", action="store_true", help="RISKAPI_WEBHOOK_RELAY_WAKE=0 on the API: the relay only polls")
    parser.add_argument("--slow", type=int, default=1000, help="slow deliveries pending for the isolation figure (default 1000)")
    parser.add_argument("--slow-creates", type=int, default=100, help="healthy creates per isolation case (default 100)")
    parser.add_argument(
        "--receiver-delay", type=float, default=0.0, help="seconds the receiver waits before answering (a remote one)"
    )
    return parser.parse_args(argv)


def rate(arrivals: list[float]) -> float:
    """Requests per second between the first and the last arrival."""
    return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])


def bare_loop(receiver: Receiver, bodies: list[tuple], secret: str, work: Path) -> float:
    """POST the signed bodies one after another with the worker's HTTP client, in a process of its own
    (as the worker is); return deliveries/s as the receiver saw them."""
    listing = work / "bodies.json"
    listing.write_text(json.dumps([[event, d, w, body.decode()] for event, d, w, body in bodies]))
    start = len(receiver.requests)
    command = [sys.executable, "-m", "bench.deliveries", "--bare-loop", str(listing), receiver.url, receiver.ca_path, secret]
    subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return rate([r.at for r in receiver.requests[start:]])


def run_bare_loop(listing: str, url: str, ca_path: str, secret: str) -> None:
    """The bare loop itself: sign and post every body, sequentially, keeping connections as a worker does."""
    pool = Pool()
    for event, delivery_uuid, webhook_uuid, text in json.loads(Path(listing).read_text()):
        body = text.encode()
        sent = signed_headers(event, delivery_uuid, webhook_uuid, body, [secret])
        result = transport.post(url, body, sent, timeout=5, allow_private=True, ca_bundle=ca_path, pool=pool)
        if not result.ok:
            raise SystemExit(f"bare loop: delivery failed: {result}")


def main(argv=None) -> int:
    """Run both figures and print them."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--bare-loop"]:
        run_bare_loop(*argv[1:5])
        return 0
    args = options(argv)
    work = Path(tempfile.mkdtemp(prefix="riskapi-bench-deliveries-"))
    database_url = args.database_url or f"sqlite:///{work}/bench.db"
    os.environ["DATABASE_URL"] = database_url
    settings = Settings.from_env()
    models.bind(database_url)
    migrations.upgrade()
    embedded = None if args.redis_url else EmbeddedRedis().start()
    redis_url = args.redis_url or embedded.url
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    worker = None
    try:
        with Receiver() as receiver, Receiver() as slow_receiver:
            slow_receiver.responses = lambda request: Reply(200, delay=isolation.SLOW_REPLY)
            bundle = work / "cas.pem"  # the worker trusts both receivers' throw-away CAs
            bundle.write_text(Path(receiver.ca_path).read_text() + Path(slow_receiver.ca_path).read_text())
            if args.receiver_delay:
                receiver.responses = lambda request: Reply(200, delay=args.receiver_delay)
            tenant = make_tenant(webhook_limit=100)
            from models import delivery_states, utcnow
            from models.webhooks import PENDING, Delivery, Webhook, pack_events

            with models.db.connection_context():
                # Deliveries of other runs must not compete for this worker.
                delivery_states.abandon(Delivery.status == PENDING, utcnow())
                hook = Webhook.create(
                    agency=tenant.agency.id, type="custom", url=receiver.url, secret=signing.generate_secret(),
                    events=pack_events(["form.completed"]),
                )  # fmt: skip
            worker = WorkerProcess(
                database_url,
                redis_url,
                queue,
                ca_bundle=str(bundle),
                timeout="5",
                relay_interval="0.05",
                retry_delays="10,100,1000",  # the defaults (the test helper's are short)
                stale_after="30",
                worker_threads=str(args.threads),
                max_rate=str(args.max_rate),
            ).start()

            # (a) rounds in turn (bare, worker, worker, bare, ...): a shared machine is noisy.
            per_round = max(args.deliveries // (2 * args.rounds), 2)
            rates: dict = {"bare": [], "worker": []}
            order = [side for k in range(args.rounds) for side in (("bare", "worker") if k % 2 == 0 else ("worker", "bare"))]
            for number, side in enumerate(order):
                payloads = [{"form": f"F-{number}-{i}", "answers": {"q1": "yes", "q2": i}} for i in range(per_round)]
                before = len(receiver.requests)
                if side == "bare":
                    # The same bodies, signed and posted by the bare loop (no delivery rows for the worker).
                    bodies = [
                        ("form.completed", str(uuid.uuid4()), str(hook.uuid), outbox.body(uuid.uuid4(), "form.completed",
                                                                                         models.utcnow(), data))
                        for data in payloads
                    ]  # fmt: skip
                    rates["bare"].append(bare_loop(receiver, bodies, hook.secret, work))
                else:
                    with models.db.connection_context(), models.atomic():
                        outbox.record(tenant.agency.id, "form.completed", payloads)
                    if not receiver.wait_for(before + per_round, timeout=600):
                        raise SystemExit(f"worker: only {len(receiver.requests) - before} deliveries arrived")
                    rates["worker"].append(rate([r.at for r in receiver.requests[before:]]))
                print(f"  round {number + 1}: {side:6s} {rates[side][-1]:8.1f} deliveries/s", flush=True)
            bare = statistics.mean(rates["bare"])
            worked = statistics.mean(rates["worker"])

            # (b) latency from a driver create returning to its delivery arriving.
            from api.app import create_app

            with models.db.connection_context():
                Webhook.update(events=pack_events(["driver.created"])).where(Webhook.id == hook.id).execute()
            # The API as `riskapi serve` runs it: on the worker's Redis and queue, so its writes wake the relay.
            api_settings = dataclasses.replace(
                settings, redis_url=redis_url, webhook_queue=queue, webhook_relay_wake=not args.no_wake, rate_limit=0
            )
            app = create_app(api_settings)
            with open(work / "access.log", "a") as access_log, ServerThread(app, free_port()) as server:
                # As deployed, the API writes one access line per request: to a file here, so the figures stay readable.
                for handler in logging.getLogger("riskapi.access").handlers:
                    handler.setStream(access_log)
                with httpx.Client(base_url=server.url + "/api/v1", headers=tenant.headers, timeout=30) as http:
                    # The first 5 are a warm-up.
                    latencies = isolation.healthy_latencies(http, tenant, receiver, args.creates + 5, "L", seed=7)[5:]
                    # (c) the same, while slow deliveries are pending: to one webhook, then spread over 50.
                    cases = [
                        isolation.run_case(http, tenant, receiver, slow_receiver, webhooks, args.slow, args.slow_creates)
                        for webhooks in (1, 50)
                        if args.slow >= webhooks
                    ]
    finally:
        if worker is not None:
            worker.stop()
            delete_queue(redis_url, queue)
        if embedded is not None:
            embedded.close()
        models.db.close()
        if not args.database_url:
            for path in work.iterdir():
                path.unlink()
            work.rmdir()

    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    ratio = worked / bare
    if args.receiver_delay:
        print(f"(the receiver answers after {args.receiver_delay * 1000:.0f} ms, as a remote one would)")
    print(f"deliveries/s, bare loop of jobs.https.transport.post:  {bare:8.1f}")
    limit = f", RISKAPI_WEBHOOK_MAX_RATE={args.max_rate:g}" if args.max_rate else ", no per-webhook rate"
    print(f"deliveries/s, one `riskapi worker` process:      {worked:8.1f}   ({args.threads} threads{limit})")
    print(f"ratio worker / bare loop:                        {ratio:8.2f}   (aim >= {AIMS['ratio']})")
    print(f"create → delivery latency p50:                   {p50:8.1f} ms (aim <= {AIMS['p50_ms']:.0f} ms)")
    aim = f"aim <= {AIMS['p99_ms']:.0f} ms; {len(latencies)} creates"
    print(f"create → delivery latency p99:                   {p99:8.1f} ms ({aim})")
    for case in cases:
        print(
            f"healthy latency, {case['pending_at_start']} slow pending to {case['webhooks']:2d} webhook(s): "
            f"p50 {case['p50']:6.1f} ms, p99 {case['p99']:7.1f} ms, max {case['max']:7.1f} ms "
            f"(aim p99 <= {AIMS['isolation_p99_ms']:.0f} ms; {case['creates']} creates over {case['seconds']:.0f} s, "
            f"{case['pending_at_end']} still pending, {case['slow_attempts']} slow attempts so far)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
