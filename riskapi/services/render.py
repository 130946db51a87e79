"""The common object envelope, {object, uuid, data, meta, relations}, laid out by the spec's response schemas."""

import datetime
import functools
import uuid
from typing import Any

import peewee

import spec
from models import timestamp
from models.risk_data import KINDS, InRisk, RiskObject
from models.webhooks import Delivery, Webhook

# The models rendered in the envelope: each names its `object`.
Model = type[InRisk] | type[Webhook] | type[Delivery]


def value(stored: Any) -> Any:
    """Return a stored value as JSON shows it: times in UTC with their offset, dates and UUIDs as strings."""
    if isinstance(stored, datetime.datetime):
        return timestamp(stored)
    if isinstance(stored, datetime.date):
        return stored.isoformat()
    if isinstance(stored, uuid.UUID):
        return str(stored)
    return stored


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


def select(model: type[InRisk]) -> "peewee.ModelSelect[Any]":
    """Select a model's rows as dicts, with referenced objects' UUIDs as `<name>_uuid`."""
    columns: list[Any] = [model]
    query = model.select()
    for name, target in model.REFERENCES.items():
        alias = target.alias()
        columns.append(alias.uuid.alias(f"{name}_uuid"))
        query = query.join_from(model, alias, on=(getattr(model, name) == alias.id), join_type=peewee.JOIN.LEFT_OUTER)
    return query.select(*columns).dicts()


# Stored values JSON shows as they are: most of a row, so they skip value().
_AS_IS = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _columns(model: Model) -> tuple[tuple[str, str | None], ...]:
    """Return (data property, row key of the UUID it shows or None) for each of a model's `data` properties."""
    references = _references(model)
    return tuple((name, f"{name}_uuid" if name in references else None) for name in fields(model))


def data(model: Model, row: dict) -> dict:
    """Return the `data` of a row; a reference shows the UUID of the object it names."""
    out: dict[str, Any] = {}
    for name, shown_uuid in _columns(model):
        if shown_uuid is not None:
            ref = row.get(shown_uuid)
            out[name] = str(ref) if ref is not None else None
        else:
            stored = row.get(name)
            out[name] = stored if type(stored) in _AS_IS else value(stored)
    return out


def envelope(model: Model, row: dict, relations: dict | None = None) -> dict:
    """Return a row in the common envelope; `meta` holds what the model's schema lists there."""
    out: dict[str, Any] = {
        "object": model.OBJECT,
        "uuid": str(row["uuid"]),
        "data": data(model, row),
        "meta": {name: value(row.get(name)) for name in _meta(model)},
    }
    if relations is not None:
        out["relations"] = relations
    return out


def envelopes(model: type[InRisk], rows: list[dict], include: list | None = None) -> list[dict]:
    """Render rows with the relations their schema lists, loading each included one in one query."""
    names = _relations(model)
    embedded = {name: _embedded(model, name, rows) for name in names or () if name in (include or ())}
    items = []
    for row in rows:
        item = envelope(model, row)
        if names is not None:
            item["relations"] = {name: _relation(model, name, row, item["data"], embedded) for name in names}
        items.append(item)
    return items


def _relation(model: type[InRisk], name: str, row: dict, shown: dict, embedded: dict) -> Any:
    """Return one relation of a row: the related object when included, else its UUID (or null)."""
    references = _references(model)
    if name in references:
        return embedded[name].get(row[name], shown[name]) if name in embedded else shown[name]
    return embedded[name].get(row["id"]) if name in embedded else None


def _embedded(model: type[InRisk], name: str, rows: list[dict]) -> dict:
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
    nested = _relations(target)
    found: dict[Any, dict] = {}
    for related in select(target).where(key.in_(wanted)):
        item = envelope(target, related)
        if nested is not None:
            item["relations"] = {n: _relation(target, n, related, item["data"], {}) for n in nested}
        found[related[key.name]] = item
    return found
