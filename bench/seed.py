"""Seed a database fast: one agency, a token, a risk profile and many drivers by raw insert_many."""

import datetime
import random
import uuid
from dataclasses import dataclass

import models
from models import migrations
from models.risk_data import Driver, Vehicle
from models.tenancy import Agency, Risk, Token

FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Linus")
LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Torvalds")
STATES = ("CA", "NY", "TX", "FL", "IL", "OH", "PA", "WA", "GA", "NC")
CHUNK = 500
VEHICLES = 100


@dataclass(frozen=True)
class Seeded:
    """What the load needs to know about the seeded data."""

    token: str
    agency_id: int
    risk_uuid: str
    drivers: int


def driver_values(rng: random.Random, i: int) -> dict:
    """Return the values of one driver as a client sends them."""
    return {
        "first_name": rng.choice(FIRST),
        "last_name": rng.choice(LAST),
        "date_of_birth": f"{rng.randint(1950, 2000)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "license_number": f"D{i:08d}",
        "license_state": rng.choice(STATES),
        "is_employee": i % 2 == 0,
        "year_licensed": rng.randint(1970, 2020),
        "percent_use": rng.randint(0, 100),
        "notes": "Seeded by bench/seed.py.",
    }


def driver_row(risk_id: int, number: int, values: dict, now: datetime.datetime, vehicle=None) -> dict:
    """Return the stored columns of one driver."""
    row = {"risk": risk_id, "number": number, "uuid": uuid.uuid4(), "created": now, "updated": now, "vehicle": vehicle}
    row.update(values, date_of_birth=datetime.date.fromisoformat(values["date_of_birth"]))
    return row


def insert_drivers(rows: list[dict]) -> None:
    """Insert driver rows in one transaction, in chunks the database accepts."""
    with models.atomic():
        for start in range(0, len(rows), CHUNK):
            Driver.insert_many(rows[start : start + CHUNK]).execute()


def new_risk(agency_id: int) -> Risk:
    """Create an empty commercial risk profile."""
    return Risk.create(agency=agency_id, type="commercial", name="bench")


def seed(database_url: str, count: int) -> Seeded:
    """Create the schema and the tenant, then insert count drivers (a tenth with a vehicle)."""
    models.bind(database_url)
    migrations.upgrade()
    rng = random.Random(2)
    with models.db.connection_context():
        agency = Agency.create(name="bench", webhook_limit=10)
        token = Token.issue(agency)
        risk = new_risk(agency.id)
        now = models.utcnow()
        vehicles = [
            {"risk": risk.id, "number": n, "uuid": uuid.uuid4(), "created": now, "updated": now, "year": 2020, "make": "Ford"}
            for n in range(1, VEHICLES + 1)
        ]
        Vehicle.insert_many(vehicles).execute()
        vehicle_ids = [v for (v,) in Vehicle.select(Vehicle.id).where(Vehicle.risk == risk.id).tuples()]
        with models.atomic():
            for start in range(0, count, CHUNK):
                rows = [
                    driver_row(risk.id, n + 1, driver_values(rng, n), now, vehicle_ids[n % VEHICLES] if n % 10 == 0 else None)
                    for n in range(start, min(start + CHUNK, count))
                ]
                Driver.insert_many(rows).execute()
        models.db.execute_sql("ANALYZE")  # Planner statistics, as a database in service would have.
    return Seeded(token=token, agency_id=agency.id, risk_uuid=str(risk.uuid), drivers=count)
