"""Queries written once per shape: a hot path's query built by Peewee once, then run with each call's values.

Kept because Peewee writes a query's text anew on every call: the outbox's subscriber lookup, made by every write
of risk data, cost 335 µs to write against 42 µs to run (2026-11-27); a list page's query, a third of its request.
A `Prepared` builds its query from slots (one per value, a list of slots per list value), writes the text once per
database kind and list lengths, and binds each call's values in the slots' order; psycopg 3 then prepares the text
on each connection that repeats it (models.databases). Each value is bound as the caller converted it: pass what
the field's db_value gives (`Webhook.uuid.db_value(text)`), as Peewee would have bound it.
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

# A condition a build leaves open, given with each call (`bound(..., hole=...)`): a list's filters, whose shapes
# are too many to write once each. At most one per query; it stands where a WHERE term would.
HOLE = peewee.SQL("/*hole*/")
_HOLE = "/*hole*/"

# A written text: (its text, or the text before and after its hole), the slots in order, how many come before the hole.
_Written = tuple[tuple[str, ...], list[tuple[int, int | None]], int]


class Prepared:
    """A statement whose text is written once per shape: `rows(*values)` runs a SELECT, `changed(*values)` an UPDATE."""

    def __init__(self, build: Callable[..., peewee.Query]) -> None:
        self.build = build
        self.texts: dict[Shape, _Written] = {}

    def rows(self, *values: Any) -> list[tuple[Any, ...]]:
        """Run the query with these values (a list or tuple fills a list of slots); return its rows as tuples."""
        return list(self.run(*values).fetchall())

    def run(self, *values: Any) -> Any:
        """Run the statement with these values; return its cursor (read inside models.together, it waits for its answer)."""
        return db.execute_sql(*self.bound(*values))

    def changed(self, *values: Any) -> int:
        """Run the statement (an UPDATE) with these values; return how many rows it changed."""
        return int(db.execute_sql(*self.bound(*values)).rowcount)

    def bound(self, *values: Any, hole: tuple[str, list[Any]] | None = None) -> tuple[str, list[Any]]:
        """Return the query's text for these values' shape, and the values in the order its slots ask for them.

        A query built with HOLE takes its condition's text and values as `hole` (written by `condition`).
        """
        database = db.obj
        shape: Shape = (type(database), tuple(len(v) if isinstance(v, list | tuple) else None for v in values))
        written = self.texts.get(shape)
        if written is None:
            written = self.texts[shape] = self._write(database, shape[1])
        pieces, order, before = written
        params = [values[value] if item is None else values[value][item] for value, item in order]
        if len(pieces) == 1:
            if hole is not None:
                raise ValueError("a condition was given to a prepared query without a hole")
            return pieces[0], params
        if hole is None:
            raise ValueError("a prepared query with a hole needs its condition")
        text, held = hole
        return f"{pieces[0]}({text}){pieces[1]}", params[:before] + list(held) + params[before:]

    def _write(self, database: peewee.Database, lengths: Sequence[int | None]) -> _Written:
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
        if text.count(_HOLE) > 1:
            raise ValueError("a prepared query has at most one hole")
        head, _, tail = text.partition(_HOLE)
        pieces = (_SLOT.sub("", head), _SLOT.sub("", tail)) if _HOLE in text else (_SLOT.sub("", text),)
        return pieces, order, len(_SLOT.findall(head))


def padded(values: list[Any]) -> list[Any]:
    """Return values with NULLs added up to a power of two: IN (...) lists padded so a dozen texts cover any count
    (a NULL matches nothing), not one text a count."""
    return values + [None] * ((1 << (len(values) - 1).bit_length()) - len(values)) if values else values


def condition(model: type[peewee.Model], where: peewee.ColumnBase) -> tuple[str, list[Any]]:
    """Return the text and values of a condition on a model's rows, for the HOLE of a query selecting from that model.

    Written as the WHERE of a query from the model, as Peewee writes it inside the whole query: the model's table
    aliased t1 and any subquery in parentheses with aliases of its own (written alone, neither holds).
    """
    text, params = model.select(peewee.SQL("1")).where(where).sql()
    return text.partition(" WHERE ")[2], params
