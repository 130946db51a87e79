"""The common object envelope, {object, uuid, data, meta, relations}, laid out by the spec's response schemas."""

import contextlib
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import peewee

import models
import spec
from models.prepared import Prepared, padded
from models.risk_data import KINDS, InRisk, RiskObject
from models.tenancy import Risk
from models.webhooks import Delivery, Event, Webhook
from services.json_values import Convert, converter, day, flag, identifier, plain, value

# The models rendered in the envelope: each names its `object`.
Model = type[InRisk] | type[Webhook] | type[Delivery] | type[Event] | type[Risk]


class Columns:
    """The columns of one query's rows: each name's position, and each envelope part's picker of them (_Part.read)."""

    __slots__ = ("pickers", "positions")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.positions = {name: position for position, name in reversed(list(enumerate(names)))}  # a repeat: its first
        self.pickers: dict[Any, Any] = {}


class Row:
    """A row as the database driver gave it (its tuple), read by field (or alias) name like a dict (`row["id"]`).

    PostgreSQL's uuids, dates and booleans in it are already as JSON shows them (_SENT_AS_SHOWN).
    """

    __slots__ = ("columns", "values")

    def __init__(self, columns: Columns, values: tuple) -> None:
        self.columns, self.values = columns, values

    def __getitem__(self, name: str) -> Any:
        return self.values[self.columns.positions[name]]

    def __contains__(self, name: object) -> bool:
        return name in self.columns.positions

    def get(self, name: str, default: Any = None) -> Any:
        """Return a column's value, or default when the row has no such column."""
        position = self.columns.positions.get(name)
        return default if position is None else self.values[position]


def _properties(schema_name: str, part: str) -> tuple[str, ...]:
    return tuple(spec.schema(schema_name)["properties"].get(part, {}).get("properties", {}))


@functools.cache
def fields(model: Model) -> tuple[str, ...]:
    """Return the `data` properties of a model's response schema in the spec."""
    return spec.data_fields(model.__name__)


@functools.cache
def _meta(model: Model) -> tuple[str, ...]:
    return _properties(model.__name__, "meta")


@functools.cache
def _relations(model: Model) -> tuple[str, ...] | None:
    """Return the names in a model's `relations`, or None when its schema has no `relations`."""
    if "relations" not in spec.schema(model.__name__)["properties"]:
        return None
    return _properties(model.__name__, "relations")


def _references(model: Model) -> dict[str, type[RiskObject]]:
    return getattr(model, "REFERENCES", {})


@functools.cache
def _names(schema_name: str) -> tuple[str, ...]:
    return tuple(spec.schema(schema_name)["properties"])


def values(schema_name: str, row: dict) -> dict:
    """Return the properties of a schema found in a row, in the schema's order."""
    return {name: value(row.get(name)) for name in _names(schema_name)}


class _Every(peewee.ColumnBase):
    """Every column of a model's table as `"t1".*`: Peewee writes each one out, a third of compiling a list's query."""

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model

    def __sql__(self, ctx: peewee.Context) -> peewee.Context:
        with ctx.scope_column():
            return ctx.sql(self.model).literal(".*")


class _ReferenceUuid(peewee.ColumnBase):
    """The UUID of the object a row's foreign key names, as a scalar subquery: `(SELECT uuid FROM target WHERE id = t1.fk)`.

    Not a LEFT JOIN: PostgreSQL runs a select-list subquery after ORDER BY and LIMIT, for the page's rows
    alone, where a join is made for every row that matches before the sort; and the query compiles
    without the join's aliases.
    """

    def __init__(self, model: type[InRisk], name: str, target: type[RiskObject]) -> None:
        super().__init__()
        self.model, self.column, self.name = model, model._meta.fields[name].column_name, f"{name}_uuid"
        self.head = peewee.NodeList(
            (peewee.SQL("(SELECT"), peewee.Entity(target.uuid.column_name), peewee.SQL("FROM"),
             peewee.Entity(target._meta.table_name), peewee.SQL("WHERE"), peewee.Entity(target.id.column_name), peewee.SQL("="))
        )  # fmt: skip

    def __sql__(self, ctx: peewee.Context) -> peewee.Context:
        ctx.sql(self.head).literal(" ")
        with ctx.scope_column():
            ctx.sql(self.model)
        return ctx.literal(".").sql(peewee.Entity(self.column)).literal(") AS ").sql(peewee.Entity(self.name))


@functools.cache
def _rows(model: type[InRisk]) -> "peewee.ModelSelect[Any]":
    columns: list[Any] = [_Every(model)]
    columns += [_ReferenceUuid(model, name, target) for name, target in model.REFERENCES.items()]
    return model.select(*columns)


def select_rows(model: type[InRisk]) -> "peewee.ModelSelect[Any]":
    """Select every column of a model's table, for a page that with_references completes."""
    return model.select(_Every(model))


def with_references(model: type[InRisk], page: "peewee.ModelSelect[Any]", order: Callable[[Any], list]) -> peewee.Query:
    """Return a page of select_rows (ordered and limited) with the UUID of each object its rows refer to, as select_all
    names them, joined to the page's rows alone; order(page) is its ORDER BY, on the page's columns.

    Not select_all's subquery a row: PostgreSQL planned it as a scan of the whole referenced table for every row
    of a page while that table is small (a scan of 200 vehicles, 6 µs, 51 times a page: 0.3 of its 0.5 ms).
    Joined after the LIMIT, the join is of the page's rows only, as the subquery was, whatever the sort.
    """
    rows = page.alias("page")
    columns: list[Any] = [peewee.NodeList((peewee.Entity("page"), peewee.SQL(".*")), glue="")]
    query = peewee.Select([rows]).bind(model._meta.database)
    for name, target in model.REFERENCES.items():
        other = target.alias(f"{name}_referred")
        query = query.join(other, peewee.JOIN.LEFT_OUTER, on=(other.id == getattr(rows.c, model._meta.fields[name].column_name)))
        columns.append(other.uuid.alias(f"{name}_uuid"))
    return query.columns(*columns).order_by(*order(rows))


def select_all(model: type[InRisk]) -> "peewee.ModelSelect[Any]":
    """Select a model's rows for fetch(): every column of its table, and referenced objects' UUIDs as `<name>_uuid`."""
    return _rows(model).clone()  # built once: Peewee's query methods return copies, and so does this


def fetch(model: Model, query: peewee.Query) -> list[Row]:
    """Run a query of a model's rows and return them as the driver gives them, each read by field (or alias) name.

    Peewee's conversion of every column to a Python object is skipped, and times and dates stay text:
    the envelope's converters read the driver's values as they are (services.json_values).
    """
    return rows_of(model, models.read_as_text(query))


def fetch_in(model: type[InRisk], key: peewee.Field, values: list) -> list[Row]:
    """Fetch a model's rows whose key is one of values (select_all's columns), by texts written once per size."""
    wanted = [key.db_value(value) for value in dict.fromkeys(values) if value is not None]  # IN's answer without repeats
    if not wanted:
        return []
    return fetch_text(model, *_in(model, key).bound(padded(wanted)))


@functools.cache
def _in(model: type[InRisk], key: peewee.Field) -> Prepared:
    return Prepared(lambda values: select_all(model).where(key.in_(values)))


def fetch_text(model: Model, text: str, values: list) -> list[Row]:
    """Run a written text of a model's rows (models.prepared) and return them as fetch does."""
    return rows_of(model, models.run_as_text(text, values))


def rows_of(model: Model, cursor: Any) -> list[Row]:
    """Return the rows of a cursor run on a model's table (models.read_as_text, models.run_as_text)."""
    columns = _columns(model, tuple(column[0] for column in cursor.description))
    return [Row(columns, values) for values in cursor.fetchall()]


@functools.lru_cache(maxsize=64)
def _columns(model: Model, names: tuple[str, ...]) -> Columns:
    by_column = model._meta.columns
    return Columns(tuple(by_column[name].name if name in by_column else name for name in names))


_UNSEEN = object()  # a layout of columns whose picker is not made yet


class _Part:
    """How one part of the envelope (`data` or `meta`) is read from a row: its keys at once, then the few to convert."""

    def __init__(self, names: tuple[str, ...], keys: tuple[str, ...], converters: tuple[Convert, ...]) -> None:
        self.names, self.keys, self.converters = names, keys, converters
        # itemgetter reads every key in one call (a tuple even for one key, through the trailing pair).
        self.pick = operator.itemgetter(*keys, keys[0]) if keys else None
        # Text and numbers show as stored: only the other columns (times, dates, UUIDs, booleans) take a call.
        self.converted = tuple((i, convert) for i, convert in enumerate(converters) if convert is not plain)

    def read(self, row: Row | dict) -> dict:
        """Return this part of a row, in the schema's order (a fetched row's values by position)."""
        if self.pick is None:
            return {}
        found: list[Any] | None = None
        if type(row) is Row:
            pick = row.columns.pickers.get(self, _UNSEEN)
            if pick is _UNSEEN:  # once per layout of columns
                pick = row.columns.pickers[self] = self._by_position(row.columns.positions)
            if pick is not None:
                if not self.converted:  # every value as the driver gave it: no list to convert in
                    return dict(zip(self.names, pick(row.values), strict=False))
                found = list(pick(row.values))
        else:
            with contextlib.suppress(KeyError):
                found = list(self.pick(row))
        if found is None:  # a row built by hand may leave out what is null
            found = [row.get(key) for key in self.keys] + [None]
        for i, convert in self.converted:
            found[i] = convert(found[i])
        return dict(zip(self.names, found, strict=False))

    def _by_position(self, positions: dict[str, int]) -> Callable[[tuple], tuple] | None:
        """Return what picks this part's values out of a row's tuple, or None when a column is missing."""
        if any(key not in positions for key in self.keys):
            return None
        return operator.itemgetter(*(positions[key] for key in (*self.keys, self.keys[0])))


# What PostgreSQL's driver gives as JSON shows it, read as models reads it (UUIDs and dates as the server's text, in
# lowercase and YYYY-MM-DD; booleans as bool): a fetched row's values of these leave as they come, a call less each.
_SENT_AS_SHOWN = frozenset({identifier, day, flag})


@functools.cache
def _layout(model: Model, as_sent: bool = False) -> tuple[_Part, _Part]:
    """Return how a row's `data` and `meta` are read; a reference shows the UUID of the object it names."""
    references = _references(model)
    known = model._meta.fields

    def shown(convert: Convert) -> Convert:
        return plain if as_sent and convert in _SENT_AS_SHOWN else convert

    names = fields(model)
    data = _Part(
        names,
        tuple(f"{name}_uuid" if name in references else name for name in names),
        tuple(shown(identifier if name in references else converter(known.get(name))) for name in names),
    )
    meta = _Part(_meta(model), _meta(model), tuple(shown(converter(known.get(name))) for name in _meta(model)))
    return data, meta


def _layout_of(model: Model, row: Row | dict) -> tuple[_Part, _Part]:
    return _layout(model, type(row) is Row and not models.is_sqlite())


def data(model: Model, row: Row | dict) -> dict:
    """Return the `data` of a row; a reference shows the UUID of the object it names."""
    return _layout_of(model, row)[0].read(row)


def envelope(model: Model, row: Row | dict, relations: dict | None = None) -> dict:
    """Return a row in the common envelope; `meta` holds what the model's schema lists there."""
    shown, meta = _layout_of(model, row)
    out: dict[str, Any] = {
        "object": model.OBJECT,
        "uuid": identifier(row["uuid"]),
        "data": shown.read(row),
        "meta": meta.read(row),
    }
    if relations is not None:
        out["relations"] = relations
    return out


def _item(model: type[InRisk], row: Row | dict) -> dict:
    """Return a row's envelope with its relations as when none is included."""
    item = envelope(model, row)
    names = _relations(model)
    if names is not None:
        item["relations"] = {name: _relation(model, name, row, item["data"], {}) for name in names}
    return item


def envelopes(model: type[InRisk], rows: Sequence[Row | dict], include: list | None = None) -> list[dict]:
    """Render rows with the relations their schema lists, loading each included one in one query."""
    names = _relations(model)
    embedded = {name: _embedded(model, name, rows) for name in names or () if name in (include or ())}
    items = []
    for row in rows:
        item = _item(model, row)
        for name in embedded:
            item["relations"][name] = _relation(model, name, row, item["data"], embedded)
        items.append(item)
    return items


def _relation(model: type[InRisk], name: str, row: Row | dict, shown: dict, embedded: dict) -> Any:
    """Return one relation of a row: the related object when included, else its UUID (or null)."""
    references = _references(model)
    if name in references:
        return embedded[name].get(row[name], shown[name]) if name in embedded else shown[name]
    return embedded[name].get(row["id"]) if name in embedded else None


def _embedded(model: type[InRisk], name: str, rows: Sequence[Row | dict]) -> dict:
    """Load an included relation of rows: {key in the row: the related object's envelope}."""
    if not rows:
        return {}
    references = _references(model)
    target: type[InRisk]
    key: peewee.Field
    if name in references:
        # The row names the related object (a building its premise).
        target = references[name]
        key, wanted = target.id, [row[name] for row in rows]
    else:
        # The related object names the row (an address its driver).
        target = KINDS[name]
        key = next(f for f in target._meta.refs if f.rel_model is model)
        wanted = [row["id"] for row in rows]
    return {related[key.name]: _item(target, related) for related in fetch_in(target, key, wanted)}
