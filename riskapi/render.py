"""The common object envelope: {object, uuid, data, meta, relations}."""

import datetime
import functools

import peewee

from riskapi import spec

UTC = datetime.UTC


def timestamp(value: datetime.datetime) -> str:
    """Format a stored UTC time as ISO 8601 with a +00:00 suffix."""
    return value.replace(tzinfo=UTC).isoformat()


@functools.cache
def fields(model) -> tuple[str, ...]:
    """Return the `data` properties of a model's response schema in the spec."""
    return spec.data_fields(model.__name__)


def select(model):
    """Select a model's rows as dicts, with referenced objects' UUIDs as `<name>_uuid`."""
    columns = [model]
    query = model.select()
    for name, target in model.REFERENCES.items():
        alias = target.alias()
        columns.append(alias.uuid.alias(f"{name}_uuid"))
        query = query.join_from(model, alias, on=(getattr(model, name) == alias.id), join_type=peewee.JOIN.LEFT_OUTER)
    return query.select(*columns).dicts()


def data(model, row: dict) -> dict:
    """Return the `data` of a row."""
    out = {}
    for name in fields(model):
        if name in model.REFERENCES:
            ref = row.get(f"{name}_uuid")
            out[name] = str(ref) if ref is not None else None
            continue
        value = row.get(name)
        out[name] = value.isoformat() if isinstance(value, datetime.date) else value
    return out


def envelope(model, row: dict, relations: dict | None = None) -> dict:
    """Return a row in the common envelope."""
    out = {
        "object": model.OBJECT,
        "uuid": str(row["uuid"]),
        "data": data(model, row),
        "meta": {"created": timestamp(row["created"]), "updated": timestamp(row["updated"])},
    }
    if relations is not None:
        out["relations"] = relations
    return out


def envelopes(model, rows: list[dict], include: list | None = None) -> list[dict]:
    """Render rows with their relations, loading each include in one query."""
    from models.risk_data import Address, Driver, Premise

    include = include or []
    items = []
    if model is Driver:
        addresses = {}
        if "address" in include and rows:
            query = Address.select().where(Address.driver.in_([r["id"] for r in rows])).dicts()
            addresses = {a["driver"]: envelope(Address, a) for a in query}
        for row in rows:
            item = envelope(model, row)
            item["relations"] = {"address": addresses.get(row["id"]), "vehicle": item["data"]["vehicle"]}
            items.append(item)
        return items
    premises = {}
    if "premise" in include and rows:
        query = Premise.select().where(Premise.id.in_([r["premise"] for r in rows])).dicts()
        premises = {p["id"]: envelope(Premise, p, {}) for p in query}
    for row in rows:
        item = envelope(model, row)
        item["relations"] = {
            name: premises.get(row[name], item["data"][name]) if name == "premise" and premises else item["data"][name]
            for name in model.REFERENCES
        }
        items.append(item)
    return items
