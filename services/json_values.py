"""Stored values as JSON shows them, from a row as the database driver returns it or as Peewee converts it.

A list page reads its rows straight from the driver's cursor (render.fetch): Peewee's per-column
conversion to Python objects, only for the JSON writer to turn them back into text, was a third of
a list request's CPU (bench/README.md, "Profiles"). Each converter here accepts both forms, so one
rendering serves rows read either way: SQLite's and PostgreSQL's text for times, dates and UUIDs,
SQLite's 0/1 for booleans, psycopg's objects, and Peewee's.
"""

import datetime
import uuid
from collections.abc import Callable
from typing import Any

import peewee

from models import timestamp

Convert = Callable[[Any], Any]

_TIME = peewee.DateTimeField()
_DATE = peewee.DateField()


def value(stored: Any) -> Any:
    """Return a stored value as JSON shows it: times in UTC with their offset, dates and UUIDs as strings."""
    if isinstance(stored, datetime.datetime):
        return timestamp(stored)
    if isinstance(stored, datetime.date):
        return stored.isoformat()
    if isinstance(stored, uuid.UUID):
        return str(stored)
    return stored


def moment(stored: Any) -> str | None:
    """Return a stored UTC time as ISO 8601 with +00:00; SQLite's `YYYY-MM-DD HH:MM:SS[.ffffff]` is rewritten as text."""
    if stored is None:
        return None
    if type(stored) is str:
        if len(stored) in (19, 26) and stored[10] == " ":
            # The text Python's sqlite3 adapter stored: isoformat(" "), microseconds only when not 0, as isoformat().
            return f"{stored[:10]}T{stored[11:]}+00:00"
        if 20 < len(stored) < 26 and stored[10] == " " and stored[19] == ".":
            # PostgreSQL's text drops a fraction's trailing zeros: isoformat() shows six digits.
            return f"{stored[:10]}T{stored[11:]:0<15}+00:00"
        stored = _TIME.python_value(stored)  # any other text Peewee reads; what it cannot read is shown as stored
    return value(stored)


def day(stored: Any) -> str | None:
    """Return a stored date as YYYY-MM-DD."""
    if stored is None:
        return None
    if type(stored) is str and len(stored) == 10:
        return stored
    if type(stored) is datetime.date:
        return stored.isoformat()
    return value(_DATE.python_value(stored))


def identifier(stored: Any) -> str | None:
    """Return a stored UUID in its 8-4-4-4-12 lowercase form (SQLite stores 32 hex digits, PostgreSQL's driver gives the form)."""
    if stored is None:
        return None
    if type(stored) is str:
        if len(stored) == 32:
            return f"{stored[:8]}-{stored[8:12]}-{stored[12:16]}-{stored[16:20]}-{stored[20:]}".lower()
        if len(stored) == 36 and stored[8] == "-":
            return stored.lower()
        return str(uuid.UUID(stored))
    return str(stored)


def flag(stored: Any) -> bool | None:
    """Return a stored boolean (SQLite's 0 or 1) as true or false."""
    return None if stored is None else bool(stored)


def plain(stored: Any) -> Any:
    """Return a value JSON shows as stored: text and numbers."""
    return stored


_BY_FIELD: dict[type[peewee.Field], Convert] = {
    peewee.DateTimeField: moment,
    peewee.DateField: day,
    peewee.UUIDField: identifier,
    peewee.BooleanField: flag,
    peewee.CharField: plain,
    peewee.TextField: plain,
    peewee.IntegerField: plain,
    peewee.AutoField: plain,
    peewee.FloatField: plain,
}


def converter(field: peewee.Field | None) -> Convert:
    """Return how a column's stored value is shown; a column of another kind goes through Peewee, then value()."""
    if field is None:
        return value
    for kind in type(field).__mro__:
        if kind in _BY_FIELD:
            return _BY_FIELD[kind]
    return lambda stored: value(field.python_value(stored))
