"""models.inserts: multi-row INSERTs (or PostgreSQL's COPY) store what Peewee's insert_many stores; ids come back in order."""

import datetime
import uuid

import peewee
import pytest

import models
from models import inserts
from models.risk_data import Address, Driver, Vehicle

NOW = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)
COLUMNS = tuple(name for name in Driver._meta.sorted_field_names if name != "id")

# Both ways: on SQLite `copy` changes nothing; on PostgreSQL it streams the rows.
ways = pytest.mark.parametrize("copy", [False, True], ids=["insert", "copy"])


@pytest.fixture(autouse=True)
def copy_any_count(monkeypatch):
    """COPY even a row or two here (inserts.COPY_FROM keeps small writes on the INSERT)."""
    monkeypatch.setattr(inserts, "COPY_FROM", 1)


@pytest.fixture
def statements(monkeypatch) -> list[str]:
    """The statements sent through the database's execute_sql from here on."""
    sent: list[str] = []
    original = models.db.obj.execute_sql

    def counting(sql, params=None, *args, **kwargs):
        sent.append(sql)
        return original(sql, params, *args, **kwargs)

    monkeypatch.setattr(models.db.obj, "execute_sql", counting)
    return sent


def driver(profile, number: int, **values) -> dict:
    """A driver row with every column but the id, nulls where not given."""
    row = dict.fromkeys(COLUMNS)
    row.update(risk=profile.id, number=number, uuid=uuid.uuid4(), created=NOW, updated=NOW, **values)
    return row


def stored(model, ids) -> list[dict]:
    """Return rows as the database gives them back, without id, uuid and number, in the order of ids."""
    rows = {row["id"]: row for row in model.select().where(model.id.in_(ids)).dicts()}
    return [{k: v for k, v in rows[i].items() if k not in {"id", "uuid", "number"}} for i in ids]


@ways
def test_every_kind_of_value_is_stored_as_insert_many_stores_it(profile, copy):
    """Text with COPY's special characters, numbers, booleans, dates as dates or text, times, keys and nulls read back alike."""
    vehicle = Vehicle.create(risk=profile.id, number=1)
    values = [
        {
            "first_name": "Ada",
            "notes": "é\n'q' \"t\"\t\\N \\ \r end",
            "is_employee": True,
            "year_licensed": 1990,
            "percent_use": 0,
        },
        {"date_of_birth": datetime.date(1970, 1, 2), "hire_date": "2001-02-03", "vehicle": vehicle.id, "is_contractor": False},
        {"license_expiration": datetime.datetime(2030, 1, 1, 12, 0), "employee_number": 7, "vehicle": vehicle, "notes": ""},
    ]
    ours = [driver(profile, 10 + n, **v) for n, v in enumerate(values)]
    with models.atomic():
        ids = inserts.insert(Driver, COLUMNS, ours, key="number", copy=copy)
        theirs = [new_id for (new_id,) in Driver.insert_many([driver(profile, 20 + n, **v) for n, v in enumerate(values)])
                  .returning(Driver.id).tuples().execute()]  # fmt: skip
    assert [Driver.get_by_id(new_id).number for new_id in ids] == [10, 11, 12]
    mine = stored(Driver, ids)
    assert mine == stored(Driver, theirs)
    assert mine[0]["notes"] == values[0]["notes"] and mine[2]["notes"] == "" and mine[2]["middle_name"] is None
    assert mine[1]["hire_date"] == datetime.date(2001, 2, 3) and mine[2]["vehicle"] == vehicle.id
    assert [Driver.get_by_id(new_id).uuid for new_id in ids] == [row["uuid"] for row in ours]


@ways
def test_a_float_column_given_an_integer_stores_a_float(profile, copy):
    """A value whose type is not the column's own goes through the field's db_value, as with insert_many."""
    (made,) = inserts.insert(Driver, COLUMNS, [driver(profile, 1)], key="number")
    row = {"risk": profile.id, "driver": made, "uuid": uuid.uuid4(), "created": NOW, "updated": NOW, "address": "1 Main St",
           "city": "Springfield", "state": "IL", "zip": "62701", "lat": 40, "lng": -89.5}  # fmt: skip
    inserts.insert(Address, list(row), [row], copy=copy)
    found = Address.get(Address.driver == made)
    assert found.lat == 40.0 and isinstance(found.lat, float) and found.lng == -89.5 and found.county is None


@ways
def test_more_rows_than_one_statement_takes_are_all_inserted_with_their_ids_in_order(profile, monkeypatch, copy):
    """Rows beyond a statement's bound go in further statements; the ids answer the rows in their order."""
    monkeypatch.setattr(inserts, "MAX_ROWS", 7)
    rows = [driver(profile, n, first_name=f"d{n}") for n in range(30, 0, -1)]
    with models.atomic():
        ids = inserts.insert(Driver, COLUMNS, rows, key="number", copy=copy)
    names = dict(models.tuples(Driver.select(Driver.id, Driver.first_name).where(Driver.risk == profile.id)))
    assert [names[new_id] for new_id in ids] == [f"d{n}" for n in range(30, 0, -1)]


def test_a_uuid_key_maps_the_ids_back(profile):
    """A UUID key works whichever way the database hands it back (hex on SQLite, hyphenated on PostgreSQL)."""
    rows = [driver(profile, n) for n in range(1, 6)]
    ids = inserts.insert(Driver, COLUMNS, rows, key="uuid")
    assert [Driver.get_by_id(new_id).uuid for new_id in ids] == [row["uuid"] for row in rows]


@ways
def test_nothing_is_returned_without_a_key_and_no_rows_write_nothing(profile, copy):
    """Without `key` the answer is empty; an empty list runs no statement."""
    assert inserts.insert(Driver, COLUMNS, [], key="number", copy=copy) == []
    assert inserts.insert(Driver, COLUMNS, [driver(profile, 1)], copy=copy) == []
    assert Driver.select().where(Driver.risk == profile.id).count() == 1


@ways
def test_a_broken_constraint_is_peewees_integrity_error(profile, copy):
    """A taken number fails as peewee.IntegrityError, which the bulk-write path retries."""
    inserts.insert(Driver, COLUMNS, [driver(profile, 1)])
    with pytest.raises(peewee.IntegrityError), models.atomic():
        inserts.insert(Driver, COLUMNS, [driver(profile, 2), driver(profile, 1)], copy=copy)
    assert Driver.select().where(Driver.risk == profile.id).count() == 1


def test_values_without_a_plain_text_form_take_the_insert(profile):
    """An aware time or a NUL byte is left to the INSERT (the driver's own meaning, or error), not to COPY."""
    aware = datetime.datetime(2030, 1, 1, 12, 0, tzinfo=datetime.UTC)
    values = [{"first_name": "x"}, {"license_expiration": aware}]
    ids = inserts.insert(Driver, COLUMNS, [driver(profile, 1 + n, **v) for n, v in enumerate(values)], key="number", copy=True)
    theirs = [new_id for (new_id,) in Driver.insert_many([driver(profile, 3 + n, **v) for n, v in enumerate(values)])
              .returning(Driver.id).tuples().execute()]  # fmt: skip
    assert stored(Driver, ids) == stored(Driver, theirs)

    def outcome(write) -> str:
        try:
            with models.atomic():
                write()
        except Exception as exc:  # noqa: BLE001 (whatever it is, both ways must give the same)
            return type(exc).__name__
        return "stored"

    nul = "a\x00b"
    mine = outcome(lambda: inserts.insert(Driver, COLUMNS, [driver(profile, 5, first_name=nul)], copy=True))
    assert mine == outcome(lambda: Driver.insert_many([driver(profile, 6, first_name=nul)]).execute())


def test_a_few_rows_take_the_insert_even_when_copy_is_asked(profile, monkeypatch, statements):
    """Below COPY_FROM rows one INSERT runs; from it, PostgreSQL draws the ids and streams the rows (no INSERT)."""
    monkeypatch.setattr(inserts, "COPY_FROM", 10)
    inserts.insert(Driver, COLUMNS, [driver(profile, n) for n in range(1, 10)], key="number", copy=True)
    assert [sql.split()[0] for sql in statements] == ["INSERT"]
    statements.clear()
    ids = inserts.insert(Driver, COLUMNS, [driver(profile, n) for n in range(10, 20)], key="number", copy=True)
    assert [sql.split()[0] for sql in statements] == (["INSERT"] if models.is_sqlite() else ["SELECT"])
    assert [Driver.get_by_id(new_id).number for new_id in ids] == list(range(10, 20))


def test_rows_whose_ids_nobody_asks_for_are_copied_without_drawing_them_first(profile, statements):
    """Without a key PostgreSQL's COPY leaves the ids to the column's default: no round trip for them, ids in row order."""
    assert inserts.insert(Driver, COLUMNS, [driver(profile, n) for n in range(1, 13)], copy=True) == []
    assert [sql.split()[0] for sql in statements] == (["INSERT"] if models.is_sqlite() else [])
    rows = Driver.select(Driver.id, Driver.number).where(Driver.risk == profile.id).order_by(Driver.id).tuples()
    assert [number for _, number in rows] == list(range(1, 13))
    # The sequence the default drew from goes on after them: a numbered COPY takes the next ids.
    ids = inserts.insert(Driver, COLUMNS, [driver(profile, 13)], key="number", copy=True)
    assert ids[0] > max(new_id for new_id, _ in rows)


def test_new_uuids_are_distinct_version_4_uuids_in_the_stored_form():
    """32 lowercase hex digits each, version 4 with RFC 4122's variant, none twice."""
    made = inserts.new_uuids(2000)
    assert len(set(made)) == 2000 and inserts.new_uuids(0) == []
    for text in made:
        parsed = uuid.UUID(text)
        assert parsed.hex == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
