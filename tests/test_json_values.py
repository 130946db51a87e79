"""A list reads its rows from the database driver as they are (render.fetch): the JSON is the same as through Peewee."""

import datetime
import uuid

import peewee
import pytest

import models
from models.risk_data import KINDS, Building, Driver, Premise, Vehicle
from models.tenancy import Risk
from services import render
from services.json_values import day, flag, identifier, moment


def create(client, tenant, kind: str, items: list[dict]) -> list[dict]:
    response = client.post(tenant.url(f"/{kind}"), json={"data": items}, headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"]


@pytest.fixture
def filled(client, tenant):
    """Rows of every kind with every column kind set, unset and at its edges."""
    vehicle = create(client, tenant, "vehicles", [{"object": "vehicle", "data": {"year": 2020, "make": "Ford"}}])[0]
    create(client, tenant, "vehicles", [{"object": "vehicle", "data": {}}])
    drivers = [
        {"first_name": "Ada", "date_of_birth": "1815-12-10", "is_employee": True, "is_contractor": False,
         "percent_use": 0, "vehicle": vehicle["uuid"], "notes": "ﬁrst\u00a0ｌine\n\"quoted\"",
         "address": {"object": "address", "data": {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701",
                                                   "lat": 30.0, "lng": -97.75}}},
        {"first_name": None, "hire_date": "9999-12-31", "license_expiration": "0001-01-01", "is_employee": None},
        {},
    ]  # fmt: skip
    create(client, tenant, "drivers", [{"object": "driver", "data": data} for data in drivers])
    premise = create(client, tenant, "premises", [{"object": "premise", "data": {"address": "HQ"}}])[0]
    create(client, tenant, "buildings", [{"object": "building", "data": {"premise": premise["uuid"]}}])
    with models.db.connection_context():
        risk_id = Risk.get(Risk.uuid == tenant.risk).id
        # A time with no microseconds is stored without them (isoformat's rule), and shown without them.
        Driver.update(created=datetime.datetime(2026, 1, 2, 3, 4, 5)).where(Driver.risk == risk_id).execute()
        # Trailing zeros in the fraction, which PostgreSQL's text leaves out and isoformat shows.
        Driver.update(updated=datetime.datetime(2026, 1, 2, 3, 4, 5, 120000)).where(Driver.risk == risk_id).execute()
    return risk_id


def peewee_rows(model):
    """Select a model's rows through Peewee, typed, each reference's UUID by a LEFT JOIN: what render.fetch must equal."""
    columns = [model]
    query = model.select()
    for name, target in getattr(model, "REFERENCES", {}).items():
        alias = target.alias()
        columns.append(alias.uuid.alias(f"{name}_uuid"))
        query = query.join_from(model, alias, on=(getattr(model, name) == alias.id), join_type=peewee.JOIN.LEFT_OUTER)
    return query.select(*columns).dicts()


@pytest.mark.parametrize("model", [Driver, Vehicle, Premise, Building, KINDS["address"]])
def test_rows_read_from_the_driver_render_as_rows_read_through_peewee(filled, model):
    with models.db.connection_context():
        typed = list(peewee_rows(model).where(model.risk == filled).order_by(model.id))
        raw = render.fetch(model, render.select_all(model).where(model.risk == filled).order_by(model.id))
        assert len(raw) == len(typed) > 0
        assert render.envelopes(model, raw, include=["address", "vehicle", "premise", "buildings"]) == render.envelopes(
            model, typed, include=["address", "vehicle", "premise", "buildings"]
        )
        # Without includes: PostgreSQL's rows keep the UUIDs, dates and booleans as the driver gives them, and show the same.
        assert render.envelopes(model, raw) == render.envelopes(model, typed)
        assert type(raw[0]) is render.Row


def test_a_row_missing_a_column_renders_as_null():
    full = {name: None for name in render.fields(Vehicle)} | {"uuid": str(uuid.uuid4()), "created": None, "updated": None}
    kept = [name for name in full if name != "year"]
    row = render.Row(render.Columns(tuple(kept)), tuple(full[name] for name in kept))
    assert row.get("year") is None and "year" not in row and row["uuid"] == full["uuid"]
    assert render.envelopes(Vehicle, [row]) == render.envelopes(Vehicle, [full])


def test_each_converter_reads_every_form_a_value_comes_in():
    stamp = datetime.datetime(2026, 11, 25, 3, 4, 5, 6)
    assert moment("2026-11-25 03:04:05.000006") == moment(stamp) == "2026-11-25T03:04:05.000006+00:00"
    assert moment("2026-11-25 03:04:05") == moment(stamp.replace(microsecond=0)) == "2026-11-25T03:04:05+00:00"
    assert moment("2026-11-25") == "2026-11-25T00:00:00+00:00"  # another text Peewee reads
    assert moment("2026-11-25 03:04:05.12") == moment(stamp.replace(microsecond=120000)) == "2026-11-25T03:04:05.120000+00:00"
    assert moment("2026-11-25 03:04:05.000001") == "2026-11-25T03:04:05.000001+00:00"
    assert moment("not a time") == "not a time"
    assert moment(None) is None
    assert day("1815-12-10") == day(datetime.date(1815, 12, 10)) == "1815-12-10"
    assert day(datetime.datetime(1815, 12, 10, 1, 2)) == "1815-12-10"
    assert day(None) is None
    ident = uuid.uuid4()
    assert identifier(ident.hex) == identifier(str(ident)) == identifier(str(ident).upper()) == identifier(ident) == str(ident)
    assert identifier(None) is None
    assert flag(1) is True and flag(0) is False and flag(True) is True and flag(None) is None


def test_the_driver_gives_uuids_as_text_and_models_as_uuid_objects(filled):
    # No uuid.UUID is made for a value the answer only writes out again; a model's field still makes one.
    with models.db.connection_context():
        (raw,) = render.fetch(Vehicle, render.select_all(Vehicle).where(Vehicle.risk == filled).order_by(Vehicle.id).limit(1))
        stored = Vehicle.select().where(Vehicle.risk == filled).order_by(Vehicle.id).get()
        (pair,) = models.tuples(Vehicle.select(Vehicle.uuid).where(Vehicle.id == stored.id))
    assert type(raw["uuid"]) is str and identifier(raw["uuid"]) == str(stored.uuid)
    assert type(raw["created"]) is str and moment(raw["created"]) == moment(stored.created)
    assert type(stored.uuid) is uuid.UUID and type(pair[0]) is uuid.UUID


def test_fetch_in_reads_each_wanted_row_once_through_a_text_per_power_of_two(filled):
    with models.db.connection_context():
        for number in range(10, 17):
            Vehicle.create(risk=filled, number=number)
        ids = [row for (row,) in Vehicle.select(Vehicle.id).where(Vehicle.risk == filled).order_by(Vehicle.id).tuples()]
        assert len(ids) == 9
        for n in range(1, 10):
            # Repeats and nulls ask for nothing more; the rest is padded with NULLs to the next power of two.
            rows = render.fetch_in(Vehicle, Vehicle.id, ids[:n] + ids[:1] + [None])
            assert sorted(row["id"] for row in rows) == ids[:n]
        assert render.fetch_in(Vehicle, Vehicle.id, [None]) == []
    sizes = {lengths for _, lengths in render._in(Vehicle, Vehicle.id).texts}  # the process's other tests' too
    assert {(1,), (2,), (4,), (8,), (16,)} <= sizes and all(n & (n - 1) == 0 for (n,) in sizes)
