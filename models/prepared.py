"""Queries written once per shape: a hot path's SELECT built by Peewee once, then run with each call's values.

Peewee walks a query's every node to write its text, on every call: for the outbox's subscriber lookup, made
by every write of risk data, that was 335 µs against the 42 µs SQLite took to run it (a busy machine, on
2026-11-27), and most of what a webhook's fan-out cost. A `Prepared` builds its query from slots (one per
value, a list of slots per list value), writes the text once per database kind and list lengths, and binds
each call's values in the slots' order. As in models.inserts, each value is bound as the caller converted it:
pass what the field's db_value gives (`Webhook.uuid.db_value(text)`), as Peewee would have bound it.
"""

import re
from collections.abc import Callable, Sequence
from typing import Any

import peewee

from models import db

# A slot is written as the database's placeholder and a numbered comment, which tells the order in which the
# slots came out in the text (the query's shape decides it, not the order they were given in).
_SLOT = re.compile(r" /\*slot(\d+)\*/")

Shape = tuple[type, tuple[int | None, ...]]


class Prepared:
    """A SELECT whose text is written once per shape; `rows(*values)` runs it."""

    def __init__(self, build: Callable[..., peewee.Query]) -> None:
        self.build = build
        self.texts: dict[Shape, tuple[str, list[tuple[int, int | None]]]] = {}

    def rows(self, *values: Any) -> list[tuple[Any, ...]]:
        """Run the query with these values (a list or tuple fills a list of slots); return its rows as tuples."""
        return list(db.execute_sql(*self.bound(*values)).fetchall())

    def bound(self, *values: Any) -> tuple[str, list[Any]]:
        """Return the query's text for these values' shape, and the values in the order its slots ask for them."""
        database = db.obj
        shape: Shape = (type(database), tuple(len(v) if isinstance(v, list | tuple) else None for v in values))
        written = self.texts.get(shape)
        if written is None:
            written = self.texts[shape] = self._write(database, shape[1])
        text, order = written
        return text, [values[value] if item is None else values[value][item] for value, item in order]

    def _write(self, database: peewee.Database, lengths: Sequence[int | None]) -> tuple[str, list[tuple[int, int | None]]]:
        numbered: list[tuple[int, int | None]] = []

        def slot(value: int, item: int | None = None) -> peewee.SQL:
            numbered.append((value, item))
            return peewee.SQL(f"{database.param} /*slot{len(numbered) - 1}*/")

        slots = [slot(i) if n is None else [slot(i, k) for k in range(n)] for i, n in enumerate(lengths)]
        text, params = self.build(*slots).sql()
        if params:
            raise ValueError(f"a prepared query binds only its slots; this one binds {params!r} too")
        found = [int(number) for number in _SLOT.findall(text)]
        if set(found) != set(range(len(numbered))):  # a slot written twice (a cursor's value) is bound twice
            raise ValueError("a prepared query must write each of its slots")
        order = [numbered[number] for number in found]
        return _SLOT.sub("", text), order
