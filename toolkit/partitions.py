"""Silent partitions between the hosts of toolkit.cluster, each under a steady write load that fans out to deliveries.

`play` runs one partition: clients on the load host write drivers through both API hosts (a token each, a
risk profile and a webhook of the partition's own, the webhook on channel `risk:<uuid>`), the links are cut
for `CUT` seconds (longer than the lease, so claims lapse), healed, and once every committed driver has
been delivered the figures are counted from the database, the receiver and the answers. Used by
tests/hosts/test_partitions.py, which holds every promise against them.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import threading
import time
from typing import NamedTuple

import httpx
import psycopg

from foundation.signing import verify
from toolkit.cluster import APIS, ATTEMPT_TIMEOUT, WORKERS, Cluster
from toolkit.serving import wait_until

WARM, CUT, RECOVER, SETTLE = 4.0, 20.0, 60.0, 180.0  # seconds
CLIENTS, RATE, PER_WRITE = 4, 4.0, 2  # clients (two an API host), writes a second each, drivers a write
CLIENT_TIMEOUT = 10.0


@dataclasses.dataclass(frozen=True)
class Partition:
    """Links cut (pairs of hosts), hosts isolated or killed, and the hosts cut off (whose recovery is timed)."""

    name: str
    cut_off: tuple[str, ...]
    cuts: tuple[tuple[str, str], ...] = ()
    isolate: tuple[str, ...] = ()
    kill: tuple[str, ...] = ()


PARTITIONS = (
    Partition("worker1 cut from PostgreSQL", ("worker1",), cuts=(("worker1", "postgres"),)),
    Partition("worker1 cut from Redis", ("worker1",), cuts=(("worker1", "redis"),)),
    Partition("worker1 cut from both", ("worker1",), cuts=(("worker1", "postgres"), ("worker1", "redis"))),
    Partition("api1 cut from Redis", ("api1",), cuts=(("api1", "redis"),)),
    Partition("api1 cut from PostgreSQL", ("api1",), cuts=(("api1", "postgres"),)),
    Partition("receiver cut from every worker", ("worker1", "worker2"), cuts=(("receiver", "worker1"), ("receiver", "worker2"))),
    Partition("worker1 host cut off", ("worker1",), isolate=("worker1",)),
    Partition("api1 and worker1 killed", ("api1", "worker1"), kill=("api1", "worker1")),
)


class Answer(NamedTuple):
    """One write as its client saw it."""

    api: str
    sent: float
    done: float
    status: int | str  # the HTTP status, or "error <exception>"
    proper: bool  # a JSON body, and Retry-After on a 503
    made: list[str]


@dataclasses.dataclass
class Row:
    """What one partition showed."""

    name: str
    committed: int
    lost_writes: int  # answered 201, not in the database
    committed_unanswered: int  # in the database, answered otherwise (the client retries with its idempotency key)
    answered: dict  # status -> writes
    improper: int  # a non-2xx answer without the JSON body (or a 503 without Retry-After)
    slowest_during_cut: float  # seconds: the longest answer to a write sent while the links were cut
    expected: int  # deliveries: one a committed driver
    lost: int
    duplicates: int
    in_flight: int  # the bound: deliveries the cut-off workers sent from ATTEMPT_TIMEOUT before the cut to the heal
    bad_signatures: int
    failed_attempts: int  # recorded attempts without a 2xx: how much of the delivery path the cut reached
    recovered_s: float | None  # from the heal to the last cut-off host's first success
    refused_by_killed: int = 0
    handed_back: int = 0  # deliveries whose claims lapsed and that a relay handed back (the workers' logs)


def play(cluster: Cluster, partition: Partition) -> Row:
    """Run one partition under load and count what it did."""
    agency = cluster.cli("agency", "create", "--name", partition.name)["uuid"]
    risk = cluster.cli("risk", "create", "--agency", agency, "--type", "commercial")["uuid"]
    tokens = [cluster.cli("token", "create", "--agency", agency)["token"] for _ in range(CLIENTS)]
    hook = {"type": "custom", "url": cluster.receiver.url, "events": ["driver.created"], "channels": [f"risk:{risk}"]}
    made = cluster.on_load(_post, cluster.base("api2") + "/webhooks", tokens[0], {"data": [{"object": "webhook", "data": hook}]})
    assert made.status_code == 201, made.text
    webhook, secret = made.json()["data"][0]["uuid"], made.json()["data"][0]["meta"]["signing_secret"]

    logged = {name: len(cluster.log(name)) for name in WORKERS}  # what the workers said before this partition
    stop, answers = threading.Event(), []
    clients = [
        cluster.load.submit(_write, cluster.base(APIS[n % 2]), APIS[n % 2], tokens[n], risk, stop, answers)
        for n in range(CLIENTS)
    ]
    try:
        time.sleep(WARM)
        cut_at = time.monotonic()
        _cut(cluster, partition)
        time.sleep(CUT)
        healed_at = time.monotonic()
        cluster.hosts.heal()
        for name in partition.kill:
            cluster.start(name)  # as a service manager starts a lost process again
        wait_until(lambda: _recovered(cluster, partition, answers, healed_at) is not None, timeout=RECOVER, interval=0.2)
        time.sleep(2)
    finally:
        stop.set()  # also when the partition fails: the pool's threads are joined at exit, a client left running hangs it
    for client in clients:
        client.result(timeout=CLIENT_TIMEOUT * 3)
    row = _count(cluster, partition, risk, webhook, secret, answers, cut_at, healed_at)
    said = "".join(cluster.log(name)[logged[name] :] for name in WORKERS)
    row.handed_back = sum(int(n) for n in re.findall(r"handed back (\d+) deliveries", said))
    return row


def _post(url: str, token: str, body: dict) -> httpx.Response:
    return httpx.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _cut(cluster: Cluster, partition: Partition) -> None:
    for a, b in partition.cuts:
        cluster.hosts.cut(a, b)
    for name in partition.isolate:
        cluster.hosts.isolate(name)
    for name in partition.kill:
        cluster.kill(name)


def _write(base: str, api: str, token: str, risk: str, stop: threading.Event, answers: list) -> None:
    """Write PER_WRITE drivers RATE times a second until stopped (runs on the load host)."""
    body = {"data": [{"object": "driver", "data": {}} for _ in range(PER_WRITE)]}
    url, began, n = f"{base}/risks/{risk}/data/drivers", time.monotonic(), 0
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=CLIENT_TIMEOUT) as http:
        while not stop.wait(max(began + n / RATE - time.monotonic(), 0)):
            n = max(n + 1, int((time.monotonic() - began) * RATE) - 1)  # after a slow answer, no burst to catch up
            sent = time.monotonic()
            try:
                response = http.post(url, json=body)
            except httpx.HTTPError as exc:
                answers.append(Answer(api, sent, time.monotonic(), f"error {type(exc).__name__}", False, []))
                continue
            done = time.monotonic()
            proper = response.headers.get("content-type", "").endswith("json")
            if response.status_code == 503:
                proper = proper and "retry-after" in response.headers
            made = [d["uuid"] for d in response.json()["data"]] if response.status_code == 201 else []
            answers.append(Answer(api, sent, done, response.status_code, proper or response.status_code < 300, made))


def _recovered(cluster: Cluster, partition: Partition, answers: list, healed_at: float) -> float | None:
    """Seconds from the heal to the last cut-off host's first success since: a 201 of an API, a delivery of a worker."""
    firsts = []
    for name in partition.cut_off:
        if name in APIS:
            done = [a.done for a in list(answers) if a.api == name and a.status == 201 and a.sent >= healed_at]
        else:
            peer = cluster.hosts.address[name]
            done = [r.at for r in cluster.receiver.requests if r.peer == peer and r.at >= healed_at]
        if not done:
            return None
        firsts.append(min(done) - healed_at)
    return max(firsts)


def _query(url: str, sql: str, *args: object) -> list[tuple]:
    connection = psycopg.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()
    finally:
        connection.close()


FAILED_ATTEMPTS = """SELECT count(*) FROM attempt a JOIN delivery d ON d.id = a.delivery_id JOIN webhook w ON w.id = d.webhook_id
 WHERE w.uuid = %s AND (a.status IS NULL OR a.status >= 300)"""


def _count(cluster, partition, risk, webhook, secret, answers, cut_at, healed_at) -> Row:
    """Wait until every committed driver was delivered (or SETTLE passed), then count."""
    url = cluster.postgres.local_url
    drivers = "SELECT d.uuid FROM driver d JOIN risk r ON r.id = d.risk_id WHERE r.uuid = %s"
    committed = {str(uuid) for (uuid,) in _query(url, drivers, risk)}

    def delivered() -> dict[str, list]:
        got = collections.defaultdict(list)
        for request in cluster.receiver.requests:
            if request.headers.get("service-webhook") == webhook:
                got[json.loads(request.body)["data"]["uuid"]].append(request)
        return got

    wait_until(lambda: committed <= set(delivered()), timeout=SETTLE, interval=0.5)
    time.sleep(2)  # a duplicate still on its way
    got = delivered()
    attempts = collections.Counter(r.headers["service-delivery"] for requests in got.values() for r in requests)
    senders = {cluster.hosts.address[name] for name in partition.cut_off if name.startswith("worker")}
    in_flight = {
        r.headers["service-delivery"]
        for requests in got.values()
        for r in requests
        if r.peer in senders and cut_at - ATTEMPT_TIMEOUT <= r.at <= healed_at
    }
    ok = {uuid for a in answers if a.status == 201 for uuid in a.made}
    during = [a.done - a.sent for a in answers if cut_at <= a.sent <= healed_at]
    killed = [a for a in answers if a.api in partition.kill and str(a.status).startswith("error")]
    return Row(
        name=partition.name,
        committed=len(committed),
        lost_writes=len(ok - committed),
        committed_unanswered=len(committed - ok),
        answered=dict(sorted(collections.Counter(str(a.status) for a in answers if a not in killed).items())),
        improper=sum(not a.proper for a in answers if a not in killed),
        slowest_during_cut=round(max(during, default=0.0), 2),
        expected=len(committed),
        lost=len(committed - set(got)),
        duplicates=sum(n - 1 for n in attempts.values()),
        in_flight=len(in_flight),
        bad_signatures=sum(not verify(secret, r.body, r.headers["service-signature"]) for rs in got.values() for r in rs),
        failed_attempts=_query(url, FAILED_ATTEMPTS, webhook)[0][0],
        recovered_s=_round(_recovered(cluster, partition, answers, healed_at)),
        refused_by_killed=len(killed),
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def table(rows: list[Row]) -> str:
    """Return the rows as a Markdown table."""
    columns = ["partition", "writes committed", "lost", "answered", "slowest answer while cut (s)", "deliveries"]
    columns += ["lost", "duplicated (in-flight bound)", "bad signatures", "failed attempts", "handed back"]
    columns += ["recovered after heal (s)"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        answered = ", ".join(f"{k}: {v}" for k, v in r.answered.items())
        if r.refused_by_killed:
            answered += f", refused by the killed host: {r.refused_by_killed}"
        cells = [r.name, r.committed, r.lost_writes, answered, r.slowest_during_cut, r.expected, r.lost]
        cells += [f"{r.duplicates} ({r.in_flight})", r.bad_signatures, r.failed_attempts, r.handed_back, r.recovered_s]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return "\n".join(lines)
