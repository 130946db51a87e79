"""The cost of Idempotency-Key on a bulk write: 1,000-driver creates with and without a key, side by side.

    python -m bench.idempotency                      # 30 pairs on a fresh SQLite file
    python -m bench.idempotency --database-url postgresql://127.0.0.1:5432/test --runs 30

One API process (uvicorn, the app factory, the environment's settings). Each pair sends the same kind of
body twice, to two new risk profiles, once plainly and once with a new key, in alternating order so that
drift in the machine's load falls on both sides; the first pair warms up and is not counted. Then it
replays each keyed create (the same key again). Prints the medians and the ratio keyed / plain (the
aim: <= 1.05).
"""

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid

import orjson

import models
from bench import seed, servers
from bench.client import Client
from toolkit.serving import free_port

AIM = 1.05


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.idempotency", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed pairs (default 30)")
    parser.add_argument("--size", type=int, default=1000, help="drivers per create (default 1000)")
    parser.add_argument("--database-url", default="", help="add rows to this database instead of a fresh SQLite file")
    return parser.parse_args(argv)


def post(client: Client, path: str, body: bytes, key: str | None) -> tuple[int, bytes, float, bool]:
    """Return (status, body, seconds, whether it was replayed) of one POST, with an Idempotency-Key when given."""
    headers = dict(client.headers, **({"Idempotency-Key": key} if key else {}))
    started = time.perf_counter()
    client.conn.request("POST", path, body=body, headers=headers)
    response = client.conn.getresponse()
    raw = response.read()
    return response.status, raw, time.perf_counter() - started, response.getheader("Idempotent-Replayed") == "true"


def pairs(client: Client, agency_id: int, runs: int, size: int) -> dict[str, list[float]]:
    """Time `runs` pairs of creates (plain, keyed; order alternating), then a replay of each keyed one."""
    rng = random.Random(11)
    timed: dict[str, list[float]] = {"plain": [], "keyed": [], "replay": []}
    keyed: list[tuple[str, bytes, str]] = []
    for run in range(runs + 1):
        values = [seed.driver_values(rng, i) for i in range(size)]
        body = orjson.dumps({"data": [{"object": "driver", "data": v} for v in values]})
        with models.db.connection_context():
            risks = {side: seed.new_risk(agency_id).uuid for side in ("plain", "keyed")}
        key = str(uuid.uuid4())
        order = ("plain", "keyed") if run % 2 else ("keyed", "plain")
        for side in order:
            path = f"/api/v1/risks/{risks[side]}/data/drivers"
            status, raw, seconds, _ = post(client, path, body, key if side == "keyed" else None)
            if status != 201 or len(orjson.loads(raw)["data"]) != size:
                raise RuntimeError(f"{side} create answered {status}: {raw[:300]!r}")
            if run:  # The first pair warms both sides up and is not counted.
                timed[side].append(seconds)
        keyed.append((f"/api/v1/risks/{risks['keyed']}/data/drivers", body, key))
    # Replays apart: reading a stored answer between two creates would weigh on whichever create came next.
    for path, body, key in keyed[1:]:
        status, raw, seconds, replayed = post(client, path, body, key)
        if status != 201 or not replayed:
            raise RuntimeError(f"the replay answered {status} without Idempotent-Replayed: {raw[:300]!r}")
        timed["replay"].append(seconds)
    return timed


def main(argv: list[str] | None = None) -> int:
    """Run the bench; exit 1 only when something breaks (a missed aim is a figure)."""
    args = options(argv)
    workdir = tempfile.mkdtemp(prefix="riskapi-bench-idem-")
    url = args.database_url or f"sqlite:///{workdir}/bench.db"
    port = free_port()
    service = servers.Server("service", servers.service_argv(port, 1), {"DATABASE_URL": url}, port, workdir)
    try:
        seeded = seed.seed(url, 10)
        service.start(f"/api/v1/risks/{seeded.risk_uuid}/data/drivers?per_page=10", {"Authorization": f"Bearer {seeded.token}"})
        client = Client(port, seeded.token)
        try:
            timed = pairs(client, seeded.agency_id, args.runs, args.size)
        finally:
            client.close()
    except Exception as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        service.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {side: statistics.median(samples) * 1000.0 for side, samples in timed.items()}
    ratio = medians["keyed"] / medians["plain"]
    print(f"{url.split('://')[0]}, median of {args.runs} pairs of {args.size}-driver POSTs:")
    print(f"  without a key {medians['plain']:.1f} ms, with a key {medians['keyed']:.1f} ms, replay {medians['replay']:.1f} ms")
    print(f"  keyed / plain {ratio:.3f} (aim <= {AIM}: {'met' if ratio <= AIM else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
