"""Versioned migrations, run as `riskapi db upgrade` / `db status` processes on databases of their own.

The old database is built from the statements commit 4e3b5fc's `riskapi db upgrade` ran
(tests/schema_4e3b5fc/), then filled through a plain driver connection, so nothing here depends on
the migrations under test to make it. On PostgreSQL (DATABASE_URL) each test creates and drops
scratch databases; the shared test database is never touched.
"""

import contextlib
import datetime
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import urllib.parse
import uuid
from pathlib import Path

import httpx
import pytest

from foundation.signing import generate_secret
from riskapi.serve import stop_process_group
from toolkit.serving import answers, free_port, wait_until

SCHEMA = Path(__file__).parent / "schema_4e3b5fc"
TABLES = ["app_key", "agency", "token", "risk", "vehicle", "premise", "driver", "address", "building"]
TABLES += ["webhook", "event", "delivery", "attempt"]
MIGRATIONS = ["0001_initial", "0002_webhook_previous_secret", "0003_token_lifecycle", "0004_idempotency_keys"]
MIGRATIONS += [
    "0005_waiting_deliveries",
    "0006_attempt_exchange",
    "0007_listen_sessions",
    "0008_channels",
    "0009_webhook_headers",
    "0010_webhook_channels",
    "0011_delivery_indexes",
    "0012_risk_object_indexes",
]


class Raw:
    """A plain DB-API connection (sqlite3 or psycopg), autocommitting, independent of the models."""

    def __init__(self, url: str):
        self.sqlite = url.startswith("sqlite")
        if self.sqlite:
            self.conn = sqlite3.connect(url.split(":///", 1)[1], isolation_level=None)
            self.conn.execute("PRAGMA foreign_keys = ON")
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)

    def run(self, sql: str, *params):
        cursor = self.conn.cursor()
        cursor.execute(sql.replace("?", "?" if self.sqlite else "%s"), params)
        return cursor

    def script(self, sql: str) -> None:
        self.conn.executescript(sql) if self.sqlite else self.conn.cursor().execute(sql)

    def insert(self, table: str, **values) -> int:
        columns = ", ".join(f'"{c}"' for c in values)
        sql = f'INSERT INTO "{table}" ({columns}) VALUES ({", ".join("?" for _ in values)})'
        if self.sqlite:
            return self.run(sql, *values.values()).lastrowid
        return self.run(sql + " RETURNING id", *values.values()).fetchone()[0]

    def counts(self) -> dict:
        return {table: self.run(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0] for table in TABLES}

    def schema(self) -> list:
        """Tables, columns, indexes and constraints, in an order that does not depend on history."""
        if self.sqlite:
            tables = [r[0] for r in self.run("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")]
            rows = [("table", t) for t in tables]
            for t in tables:
                rows += [("column", t, *r[1:]) for r in self.run(f"PRAGMA table_info('{t}')")]
                rows += [("index", t, *r[1:3], r[4]) for r in self.run(f"PRAGMA index_list('{t}')")]  # name, unique, partial
                rows += [("fk", t, *r[2:]) for r in self.run(f"PRAGMA foreign_key_list('{t}')")]
            return sorted(rows, key=repr)
        rows = list(
            self.run(
                "SELECT table_name, column_name, data_type, character_maximum_length, is_nullable, column_default"
                " FROM information_schema.columns WHERE table_schema = 'public'"
            )
        )
        rows += list(self.run("SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"))
        rows += list(
            self.run(
                "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE connamespace = 'public'::regnamespace"
            )
        )
        return sorted(rows, key=repr)

    def close(self):
        self.conn.close()


@pytest.fixture
def scratch(tmp_path):
    """Make empty databases of this test's own: SQLite files, or PostgreSQL databases dropped afterwards."""
    base = os.environ["DATABASE_URL"]
    made = []

    def make() -> str:
        if base.startswith("sqlite"):
            return f"sqlite:///{tmp_path}/{uuid.uuid4().hex}.db"
        name = "riskapi_mig_" + uuid.uuid4().hex[:12]
        admin = Raw(base)
        admin.run(f'CREATE DATABASE "{name}"')
        admin.close()
        made.append(name)
        return urllib.parse.urlunsplit(urllib.parse.urlsplit(base)._replace(path="/" + name))

    yield make
    if made:
        admin = Raw(base)
        for name in made:
            admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def riskapi(url: str, *args, check=True) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run([sys.executable, "-m", "riskapi", *args], env=env, capture_output=True, text=True, check=check)


def lines(process) -> list:
    return [json.loads(line) for line in process.stdout.splitlines()]


def old_database(url: str) -> dict:
    """Build commit 4e3b5fc's schema and fill every table; return a token and the UUIDs to look for."""
    raw = Raw(url)
    raw.script((SCHEMA / ("sqlite.sql" if raw.sqlite else "postgresql.sql")).read_text())
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
    stamps = {"created": now, "updated": now}
    token = "rk_" + uuid.uuid4().hex + uuid.uuid4().hex
    raw.insert("app_key", name="cursor", value="k" * 64)
    found = {"token": token, "drivers": [], "webhooks": []}
    for n in range(2):
        agency = raw.insert("agency", uuid=uuid.uuid4().hex, name=f"Old {n}", webhook_limit=10, **stamps)
        digest = hashlib.sha256((token if n == 0 else f"other{n}").encode()).hexdigest()
        raw.insert("token", agency_id=agency, digest=digest, created=now)
        risk_uuid = uuid.uuid4()
        risk = raw.insert("risk", uuid=risk_uuid.hex, agency_id=agency, type="commercial", name="Fleet", **stamps)
        found.setdefault("risk", str(risk_uuid))
        vehicle = raw.insert("vehicle", uuid=uuid.uuid4().hex, risk_id=risk, number=1, year=2020, make="Ford", **stamps)
        for number in (1, 2):
            driver_uuid = uuid.uuid4()
            driver = raw.insert(
                "driver",
                uuid=driver_uuid.hex,
                risk_id=risk,
                number=number,
                first_name=f"D{number}",
                is_employee=True,
                vehicle_id=vehicle if number == 1 else None,
                **stamps,
            )
            raw.insert(
                "address",
                uuid=uuid.uuid4().hex,
                risk_id=risk,
                driver_id=driver,
                address="1 Main St",
                city="Austin",
                state="TX",
                zip="78701",
                **stamps,
            )
            if n == 0:
                found["drivers"].append(str(driver_uuid))
        premise = raw.insert("premise", uuid=uuid.uuid4().hex, risk_id=risk, number=1, city="Austin", **stamps)
        raw.insert("building", uuid=uuid.uuid4().hex, risk_id=risk, number=1, premise_id=premise, **stamps)
        webhook_uuid = uuid.uuid4()
        webhook = raw.insert(
            "webhook",
            uuid=webhook_uuid.hex,
            agency_id=agency,
            type="custom",
            url="https://hooks.example.com/in",
            events=",driver.created,",
            secret=generate_secret(),
            failures=0,
            **stamps,
        )
        if n == 0:
            found["webhooks"].append(str(webhook_uuid))
        event_uuid = uuid.uuid4()
        body = json.dumps({"id": str(event_uuid), "event": "driver.created", "data": {"object": "driver"}})
        event = raw.insert("event", uuid=event_uuid.hex, agency_id=agency, name="driver.created", body=body, created=now)
        delivery = raw.insert(
            "delivery",
            uuid=uuid.uuid4().hex,
            webhook_id=webhook,
            event_id=event,
            event="driver.created",
            status="succeeded",
            tries=1,
            generation=1,
            **stamps,
        )
        raw.insert("attempt", delivery_id=delivery, at=now, status=200, duration_ms=12)
    raw.close()
    return found


def test_a_database_of_4e3b5fc_upgrades_keeps_every_row_and_the_app_works_on_it(scratch):
    url = scratch()
    found = old_database(url)
    raw = Raw(url)
    before = raw.counts()
    assert all(before.values()), before

    status = lines(riskapi(url, "db", "status"))
    assert [(s["migration"], s["status"], s["applied"]) for s in status] == [(m, "pending", None) for m in MIGRATIONS]
    assert raw.counts() == before and "schema_migration" not in str(raw.schema())  # status changes nothing

    assert lines(riskapi(url, "db", "upgrade")) == [{"database": "upgraded", "applied": MIGRATIONS}]
    assert raw.counts() == before
    status = lines(riskapi(url, "db", "status"))
    assert [(s["migration"], s["status"]) for s in status] == [(m, "applied") for m in MIGRATIONS]
    assert all(s["applied"].endswith("+00:00") for s in status)
    assert lines(riskapi(url, "db", "upgrade")) == [{"database": "upgraded", "applied": []}]
    raw.close()

    agency = _agency_of(url, found["token"])
    assert lines(riskapi(url, "token", "list", "--agency", agency))[0]["prefix"] is None  # an old token has none
    with _serving(url) as base:
        headers = {"Authorization": f"Bearer {found['token']}"}
        drivers = httpx.get(f"{base}/risks/{found['risk']}/data/drivers?include=address", headers=headers, timeout=30)
        assert drivers.status_code == 200, drivers.text
        assert sorted(d["uuid"] for d in drivers.json()["data"]) == sorted(found["drivers"])
        assert all(d["relations"]["address"]["data"]["city"] == "Austin" for d in drivers.json()["data"])
        keyed = {**headers, "Idempotency-Key": "after-upgrade"}  # migration 0004's table holds the key and the answer
        new_driver = {"data": [{"object": "driver", "data": {"first_name": "New"}}]}
        created = httpx.post(f"{base}/risks/{found['risk']}/data/drivers", headers=keyed, timeout=30, json=new_driver)
        assert created.status_code == 201 and created.json()["data"][0]["data"]["number"] == 3, created.text
        retried = httpx.post(f"{base}/risks/{found['risk']}/data/drivers", headers=keyed, timeout=30, json=new_driver)
        assert retried.headers.get("Idempotent-Replayed") == "true" and retried.content == created.content
        webhooks = httpx.get(f"{base}/webhooks", headers=headers, timeout=30)
        assert webhooks.status_code == 200 and [w["uuid"] for w in webhooks.json()["data"]] == found["webhooks"], webhooks.text
        deliveries = httpx.get(f"{base}/webhooks/{found['webhooks'][0]}/deliveries", headers=headers, timeout=30)
        # The delivery written before the upgrade, and one of the driver created after it: migration 0010 filed the old
        # webhook, which has no channels, as taking every event of its types.
        assert deliveries.status_code == 200 and len(deliveries.json()["data"]) == 2, deliveries.text


def test_fresh_old_and_model_schemas_are_one_schema(scratch):
    fresh, old, declared = scratch(), scratch(), scratch()
    riskapi(fresh, "db", "upgrade")
    old_database(old)
    riskapi(old, "db", "upgrade")
    # What the models declare today: a model changed without a migration shows here.
    code = "import sys, models; from models import migrations; models.bind(sys.argv[1])"
    code += "; models.db.create_tables(migrations.all_models())"
    subprocess.run([sys.executable, "-c", code, declared], check=True)
    schemas = []
    for url in (fresh, old, declared):
        raw = Raw(url)
        schemas.append(raw.schema())
        raw.close()
    assert schemas[0] == schemas[1] == schemas[2]


FAILING = """
import sys, types
from models import migrations
from riskapi import cli

def up(migrator, database):
    import peewee
    migrator.add_column("token", "doomed", peewee.IntegerField(null=True)).run()
    database.execute_sql('CREATE TABLE doomed (id INTEGER)')
    database.execute_sql("UPDATE agency SET name = 'gone'")
    raise RuntimeError("deliberately")

failing = types.ModuleType("0004_fails")
failing.up = up
known = migrations.discover
migrations.discover = lambda: known() + [("0004_fails", failing)]
cli.main(["db", "upgrade"])
"""


def test_a_failing_migration_leaves_the_schema_and_the_rows_as_they_were(scratch):
    url = scratch()
    old_database(url)
    riskapi(url, "db", "upgrade")
    raw = Raw(url)
    schema, counts = raw.schema(), raw.counts()
    names = sorted(r[0] for r in raw.run("SELECT name FROM agency"))

    env = {**os.environ, "DATABASE_URL": url}
    failed = subprocess.run([sys.executable, "-c", FAILING], env=env, capture_output=True, text=True)
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines() == ["riskapi: migration 0004_fails failed, nothing of it was applied: deliberately"]
    assert raw.schema() == schema and raw.counts() == counts
    assert sorted(r[0] for r in raw.run("SELECT name FROM agency")) == names
    assert [s["status"] for s in lines(riskapi(url, "db", "status"))] == ["applied"] * len(MIGRATIONS)
    raw.close()


def _agency_of(url: str, token: str) -> str:
    raw = Raw(url)
    digest = hashlib.sha256(token.encode()).hexdigest()
    query = "SELECT agency.uuid FROM agency JOIN token ON token.agency_id = agency.id WHERE digest = ?"
    value = raw.run(query, digest).fetchone()[0]
    raw.close()
    return str(uuid.UUID(str(value)))


@contextlib.contextmanager
def _serving(url: str):
    """`riskapi serve --no-worker` on the database; yields its base URL."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["DATABASE_URL"] = url
    port = free_port()
    command = [sys.executable, "-m", "riskapi", "serve", "--no-worker", "--port", str(port)]
    serve = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        assert wait_until(lambda: answers(base), timeout=30)
        yield base
    finally:
        stop_process_group(serve, 30)
