"""A database outage under delivery load, end to end: `riskapi serve` on a PostgreSQL of its own, crashed and started again.

`run` starts the server (toolkit.postgres), a tenant (the riskapi CLI), `riskapi serve` as a subprocess (its
embedded Redis, its worker) and one webhook to the HTTPS receiver (toolkit.receiver); writes drivers at a
steady rate; takes the database away once (a crash, a clean stop, or a fast restart); lets every delivery
settle; and counts what was lost and what was sent twice. Any checkout can be measured (`root`, `command`):
the code before a change as well as after it. Used by bench/outage.py and tests/test_database_outage.py.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx
import psycopg

from foundation.signing import verify
from toolkit.postgres import OwnPostgres
from toolkit.receiver import Receiver
from toolkit.serving import free_port, stop_serve, wait_until

# One line format for every process (foundation.formats): time, logger, then the rest; or JSON.
LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S+ \S.*|\{.*\})$")


@dataclasses.dataclass
class Plan:
    """What to run: `fault` is crash, stop or restart; `down` seconds (crash, stop) after `after` seconds of load."""

    root: Path
    command: list[str]  # how this checkout runs its CLI: [python, -m, riskapi]
    fault: str = "crash"
    after: float = 10.0
    down: float = 10.0
    seconds: float = 30.0  # of load in all
    rate: float = 30.0  # writes a second
    per_write: int = 7  # drivers per write: one delivery each
    workers: int = 1
    settle: float = 240.0
    env: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Figures:
    """What one run showed."""

    answered: collections.Counter  # status (or "error") -> writes
    lost_writes: int  # answered 2xx, not in the database
    committed_unanswered: int  # in the database, never answered 2xx
    slowest_503_ms: float
    to_2xx_s: float | None  # from the database answering again to the first 2xx
    deliveries: int
    lost: int
    duplicates: int
    bad_signatures: int
    kept: int  # outcomes the worker kept while the database was away (its log; the bound on duplicates)
    handed_back: int  # deliveries the relay's rescue handed back (its log)
    restarts: int  # children that serve started again
    tracebacks: int
    other_formats: list[str]  # log lines not in the one format
    unsettled: int


def cli(plan: Plan, env: dict, *args: str) -> dict:
    """Run one riskapi command of the checkout and return its JSON line."""
    done = subprocess.run([*plan.command, *args], cwd=plan.root, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _query(url: str, sql: str) -> list[tuple]:
    connection = psycopg.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()
    finally:
        connection.close()


class Load(threading.Thread):
    """Writes `per_write` drivers per POST, `rate` POSTs a second, and notes each answer (sent, done, status, uuids)."""

    def __init__(self, base: str, token: str, risk: str, rate: float, per_write: int):
        super().__init__(name="load", daemon=True)
        self.base, self.token, self.risk, self.rate, self.per_write = base, token, risk, rate, per_write
        self.answers: list[tuple[float, float, int | str, list[str]]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        body = {"data": [{"object": "driver", "data": {}} for _ in range(self.per_write)]}
        url, began = f"/risks/{self.risk}/data/drivers", time.monotonic()
        with httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=30) as http:
            for n in range(10**9):
                if self.stop.wait(max(began + n / self.rate - time.monotonic(), 0)):
                    return
                sent = time.monotonic()
                try:
                    response = http.post(url, json=body)
                except httpx.HTTPError as exc:
                    self.answers.append((sent, time.monotonic(), f"error {type(exc).__name__}", []))
                    continue
                made = [d["uuid"] for d in response.json()["data"]] if response.status_code == 201 else []
                self.answers.append((sent, time.monotonic(), response.status_code, made))


def run(plan: Plan, log: Path) -> Figures:
    """Run the plan; serve's log goes to `log`. Everything started here is stopped here."""
    with Receiver(keep_alive=True) as receiver:
        database = OwnPostgres().start()
        serve = None
        try:
            env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")}
            env.update(DATABASE_URL=database.url, PYTHONPATH=str(plan.root), RISKAPI_WEBHOOK_ALLOW_PRIVATE="1")
            env.update(RISKAPI_WEBHOOK_CA_BUNDLE=receiver.ca_path, RISKAPI_RATE_LIMIT="0", RISKAPI_ACCESS_LOG="0", **plan.env)
            agency = cli(plan, env, "agency", "create", "--name", "Outage")["uuid"]
            token = cli(plan, env, "token", "create", "--agency", agency)["token"]
            risk = cli(plan, env, "risk", "create", "--agency", agency, "--type", "commercial")["uuid"]
            port = free_port()
            argv = [*plan.command, "serve", "--port", str(port), "--workers", str(plan.workers)]
            with log.open("wb") as out:
                serve = subprocess.Popen(argv, cwd=plan.root, env=env, stdout=out, stderr=out, start_new_session=True)
            base = f"http://127.0.0.1:{port}/api/v1"
            if not wait_until(lambda: _answers(base), timeout=60):
                raise RuntimeError("serve did not answer:\n" + log.read_text(errors="replace")[-3000:])
            headers = {"Authorization": f"Bearer {token}"}
            hook = {"type": "custom", "url": receiver.url, "events": ["driver.created"]}
            made = httpx.post(
                f"{base}/webhooks", json={"data": [{"object": "webhook", "data": hook}]}, headers=headers, timeout=30
            )
            secret = made.json()["data"][0]["meta"]["signing_secret"]
            up_at, answers = _under_load(plan, database, Load(base, token, risk, plan.rate, plan.per_write))
            return _count(plan, database.url, receiver, secret, log, up_at, answers)
        finally:
            if serve is not None:
                stop_serve(serve)
            database.close()


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def _under_load(plan: Plan, database: OwnPostgres, load: Load) -> tuple[float, list]:
    """Write for plan.seconds with the fault after plan.after; return when the database answered again
    (monotonic), and the writes' answers."""
    load.start()
    started = time.monotonic()
    time.sleep(plan.after)
    if plan.fault == "restart":
        database.restart()
    else:
        if plan.fault == "crash":
            database.crash()
        else:
            database.stop()
        time.sleep(plan.down)
        database.start()
    up_at = time.monotonic()
    time.sleep(max(started + plan.seconds - time.monotonic(), 0))
    # A busy machine fits fewer writes into the planned time, perhaps none answered after the database came
    # back: the load goes on until a quarter of the planned writes and one after its return were answered
    # (a minute at most), so the figures always have something to count.
    planned = plan.rate * plan.seconds
    wait_until(lambda: _loaded(load.answers, up_at, planned / 4), timeout=60, interval=0.2)
    load.stop.set()
    load.join(60)
    return up_at, load.answers


def _loaded(answers: list, up_at: float, least: float) -> bool:
    """Tell whether `least` writes were answered 201, one of them sent after the database came back."""
    written = [sent for sent, _, status, _ in list(answers) if status == 201]
    return len(written) >= least and any(sent >= up_at for sent in written)


def _count(plan: Plan, url: str, receiver: Receiver, secret: str, log: Path, up_at: float, answers: list) -> Figures:
    """Let the deliveries settle, then count."""
    pending = "SELECT count(*) FROM delivery WHERE status = 'pending'"
    wait_until(lambda: _query(url, pending)[0][0] == 0, timeout=plan.settle, interval=1.0)
    time.sleep(2)  # a last attempt's request is in the receiver's list before its outcome is written
    unsettled = _query(url, pending)[0][0]
    expected = {str(uuid) for (uuid,) in _query(url, "SELECT uuid FROM delivery")}
    drivers = {str(uuid) for (uuid,) in _query(url, "SELECT uuid FROM driver")}
    seen: dict[str, int] = collections.Counter(r.headers["service-delivery"] for r in receiver.requests)
    bad = sum(not verify(secret, r.body, r.headers["service-signature"]) for r in receiver.requests)
    ok = {uuid for _, _, status, made in answers if status == 201 for uuid in made}
    after = [(done - up_at) for sent, done, status, _ in answers if status == 201 and sent >= up_at]
    text = log.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return Figures(
        answered=collections.Counter(status for _, _, status, _ in answers),
        lost_writes=len(ok - drivers),
        committed_unanswered=len(drivers - ok),
        slowest_503_ms=round(max([(d - s) * 1000 for s, d, st, _ in answers if st == 503] or [0.0]), 1),
        to_2xx_s=round(min(after), 3) if after else None,
        deliveries=len(expected),
        lost=len(expected - set(seen)),
        duplicates=sum(n - 1 for n in seen.values()),
        bad_signatures=bad,
        kept=sum(int(n) for n in re.findall(r"(\d+) outcomes kept", text)),
        handed_back=sum(int(n) for n in re.findall(r"handed back (\d+) deliveries", text)),
        restarts=len(re.findall(r"exited with code", text)),
        tracebacks=text.count("Traceback"),
        # serve's greeting (stdout, into the same file) is not a log line.
        other_formats=[line for line in lines if not LINE.match(line) and not line.startswith("riskapi:")][:20],
        unsettled=unsettled,
    )
