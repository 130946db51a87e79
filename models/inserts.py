"""Many rows inserted at once: multi-row INSERTs written once per shape, or PostgreSQL's COPY (psycopg 3's copy()).

Kept because Peewee's insert_many makes a node of every value and walks them all to write the statement: for a bulk
write of 1,000 rows that was three quarters of the request. The statement here is the same (one multi-row INSERT per
chunk the database takes), its text cached per table, columns and row count, and each value converted by its
field's db_value as Peewee converts it. On PostgreSQL a caller may stream the rows with COPY instead (half the
database's CPU of a 1,000-row INSERT, and no statement to build): the ids, when asked for, come from the sequence first.
"""

import datetime
import functools
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import peewee

from models import db, is_sqlite
from models.databases import driver_errors

# Bound parameters per statement: under SQLite's smallest default limit (32,766), and PostgreSQL's (65,535).
MAX_PARAMS = 30_000
MAX_ROWS = 1_000
# Fewer rows take the INSERT even when COPY is asked for: COPY's extra round trip (for the ids) costs more than it
# saves (PostgreSQL on localhost, best of 76, ms: 1 row 0.64 by COPY vs 0.47 by INSERT, 5 rows 0.81 vs 0.77, 20 rows
# 1.20 vs 1.51, 50 rows 1.75 vs 2.86).
COPY_FROM = 10

# Values of these types are what the field's db_value returns for them, and its python_value: they are bound (and
# read, jobs.claims) as they are.
_AS_IS: dict[type[peewee.Field], tuple[type, ...]] = {
    peewee.AutoField: (int,),
    peewee.CharField: (str,),
    peewee.TextField: (str,),
    peewee.IntegerField: (int,),
    peewee.BooleanField: (bool,),
    peewee.DoubleField: (float,),
    peewee.DateField: (datetime.date,),
    peewee.DateTimeField: (datetime.datetime,),
}

Plan = tuple[tuple[str, frozenset[type], Callable[[Any], Any]], ...]


def insert(
    model: type[peewee.Model],
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    key: str | None = None,
    copy: bool = False,
) -> list[int]:
    """Insert rows (each with a value for every column) in as few statements as the database takes.

    With key (a column whose values differ between the rows), return the new ids in the rows' order:
    they are mapped back by it, as RETURNING promises no order. With copy, PostgreSQL gets the rows by
    COPY when they are COPY_FROM or more and every value has a plain text form (else, and on SQLite, the
    INSERT is the same as without).
    """
    if not rows:
        return []
    plan = _plan(model, tuple(columns))
    if copy and len(rows) >= COPY_FROM and not is_sqlite():
        return _copy(model, plan, rows, numbered=key is not None)
    returning = (key, "id") if key else ()
    per = max(1, min(MAX_ROWS, MAX_PARAMS // len(plan)))
    found: dict[Any, int] = {}
    for start in range(0, len(rows), per):
        chunk = rows[start : start + per]
        params = list(itertools.chain.from_iterable(zip(*_values(plan, chunk), strict=True)))
        cursor = db.execute_sql(_statement(model, tuple(columns), len(chunk), returning, db.param), params)
        if key:
            found.update(cursor.fetchall())
    if not key:
        return []
    # What the database returns is what was bound: the key's db_value (a UUID's hex on SQLite) or, on
    # PostgreSQL, its own text of it (a UUID with hyphens): both compare as the field reads them back.
    read = model._meta.fields[key].python_value
    ids = {read(value): new_id for value, new_id in found.items()}
    convert = model._meta.fields[key].db_value
    return [ids[read(convert(row[key]))] for row in rows]


def new_uuids(count: int) -> list[str]:
    """Return count random (version 4) UUIDs as 32 hex digits, the form a UUIDField stores, from one read of urandom."""
    digits = os.urandom(16 * count).hex()
    out = []
    for start in range(0, 32 * count, 32):
        text = digits[start : start + 32]
        out.append(f"{text[:12]}4{text[13:16]}{_VARIANT[text[16]]}{text[17:]}")
    return out


# RFC 4122's variant: the two top bits of the 17th hex digit are 10.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def _values(plan: Plan, rows: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """Return each column's values, column by column, as its field's db_value makes them."""
    out = []
    for name, as_is, convert in plan:
        values = [row[name] for row in rows]
        # Most columns hold only values bound as they are: one pass over their types, no call per value.
        if not as_is.issuperset(map(type, values)):
            values = [value if type(value) in as_is else convert(value) for value in values]
        out.append(values)
    return out


def _copy(model: type[peewee.Model], plan: Plan, rows: Sequence[Mapping[str, Any]], numbered: bool) -> list[int]:
    """COPY the rows; numbered, take their ids from the table's sequence first and return them in the rows' order.

    Rows whose ids nobody asks for take them from the id column's default, the same sequence: no round trip first.
    """
    fields = model._meta.fields
    table = model._meta.table_name
    columns = [fields[name].column_name for name, _, _ in plan]
    values = _values(plan, rows)
    ids: list[int] = []
    if numbered:
        # One round trip for every id: the sequence the id column's default draws from.
        cursor = db.execute_sql(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", (f'"{table}"', len(rows))
        )
        ids = [new_id for (new_id,) in cursor.fetchall()]
        values, columns = [ids, *values], ["id", *columns]
    names = ", ".join(f'"{name}"' for name in columns)
    with driver_errors(), db.cursor().copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:  # a taken number: retried
        for row in zip(*values, strict=True):
            copy.write_row(row)
    return ids


@functools.cache
def _plan(model: type[peewee.Model], columns: tuple[str, ...]) -> Plan:
    """Return (row key, types bound as they are (None's among them), converter) per column."""
    fields = model._meta.fields
    return tuple((name, frozenset({type(None), *as_is(fields[name])}), fields[name].db_value) for name in columns)


def as_is(field: peewee.Field) -> tuple[type, ...]:
    """Return the types a field's db_value and python_value return unchanged (a foreign key: those of the field it names)."""
    if isinstance(field, peewee.ForeignKeyField):
        return as_is(field.rel_field)
    return _AS_IS.get(type(field), ())


# Bounded: one text per chunk size seen (a 1,000-row statement is some 100 KB).
@functools.lru_cache(maxsize=32)
def _statement(model: type[peewee.Model], columns: tuple[str, ...], count: int, returning: tuple[str, ...], param: str) -> str:
    """Return the text of a multi-row INSERT of count rows (cached: SQLite then reuses its prepared statement)."""
    fields = model._meta.fields
    names = ", ".join(f'"{fields[name].column_name}"' for name in columns)
    row = "(" + ", ".join([param] * len(columns)) + ")"
    sql = f'INSERT INTO "{model._meta.table_name}" ({names}) VALUES ' + ", ".join([row] * count)
    if returning:
        sql += " RETURNING " + ", ".join(f'"{fields[name].column_name}"' for name in returning)
    return sql
