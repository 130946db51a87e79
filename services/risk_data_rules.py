"""Bulk writes of risk data: the rules that need the database, and a create's rows inserted."""

import functools
from collections.abc import Sequence
from typing import Any

import peewee

import models
import spec
from foundation.messages import message
from models import inserts, utcnow
from models.risk_data import KINDS, Address, Building, Driver, InRisk, Premise, RiskObject
from models.tenancy import Risk
from services import bulk_write
from services.bulk_write import Errors, fail_if, transaction  # noqa: F401 (tests name them bulk.*)
from services.schema_validation import compiled, parse_date

# The spec's bound of numbers: PostgreSQL's integer, so that auto-numbering never overflows the column.
MAX_NUMBER = spec.schema("Number")["maximum"]
# Children first, so that restrictive foreign keys never see a dangling row.
DELETE_ORDER = ("building", "address", "driver", "vehicle", "premise")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def columns(model: type[InRisk], values: dict) -> dict:
    """Turn validated body values into column values (dates parsed; references and nesting left out)."""
    kinds = _column_kinds(model)
    out: dict[str, Any] = {}
    for name, value in values.items():
        is_date = kinds.get(name)
        if is_date is not None:
            out[name] = parse_date(value) if is_date and isinstance(value, str) else value
    return out


@functools.cache
def _column_kinds(model: type[InRisk]) -> dict[str, bool]:
    """Map the fields a body may set (not references) to whether each holds a date."""
    return {
        name: isinstance(field, peewee.DateField) for name, field in model._meta.fields.items() if name not in model.REFERENCES
    }


def check_profile_type(profile: Risk, items: list, errors: Errors) -> None:
    """An item's profile_type, when given, must be the risk profile's type (named in the error)."""
    for i, item in enumerate(items):
        value = item.get("profile_type") if isinstance(item, dict) else None
        path = f"data.{i}.profile_type"
        if isinstance(value, str) and value != profile.type:
            # Replaces the schema's list of every type: only this profile's would be accepted.
            errors[path] = [message("profile_type", path, type=profile.type)]


def resolve_references(
    model: type[InRisk], profile: Risk, entries: list[tuple[int, dict]], errors: Errors
) -> dict[tuple[int, str], int | None]:
    """Map (index, name) to the referenced object's id, or None; unknown ones are errors."""
    resolved: dict[tuple[int, str], int | None] = {}
    for name, target in model.REFERENCES.items():
        wanted = [(i, d[name]) for i, d in entries if name in d and errors.clean(f"data.{i}.data.{name}")]
        by_uuid = target.ids_by_uuid(profile.id, [v for _, v in wanted if isinstance(v, str)])
        by_number = target.ids_by_number(profile.id, [v for _, v in wanted if _is_int(v)])
        for i, value in wanted:
            if value is None:
                resolved[(i, name)] = None
                continue
            found = by_uuid.get(str(value).lower()) if isinstance(value, str) else by_number.get(value)
            if found is None:
                errors.add(f"data.{i}.data.{name}", message("in", f"data.{i}.data.{name}"))
            resolved[(i, name)] = found
    return resolved


def check_numbers(
    model: type[RiskObject], profile: Risk, numbered: Sequence[tuple[int, int, int | None]], errors: Errors
) -> None:
    """Numbers stay unique in the risk profile: numbered is [(index, number, own id or None)]."""
    taken = model.ids_by_number(profile.id, [n for _, n, _ in numbered])
    seen: set[int] = set()
    for i, number, own in numbered:
        path = f"data.{i}.data.number"
        if number in seen or taken.get(number, own) != own:
            errors.add(path, message("unique", path))
        seen.add(number)


def plan_create(model: type[RiskObject], profile: Risk, body: Any, errors: Errors) -> list[tuple[dict, dict | None]]:
    """Check a create request against the database; return its rows."""
    listed = bulk_write.items(body)
    check_profile_type(profile, listed, errors)
    entries = [(i, d) for i, _, d in bulk_write.entries(listed)]
    numbered: list[tuple[int, int, int | None]] = [
        (i, d["number"], None) for i, d in entries if _is_int(d.get("number")) and errors.clean(f"data.{i}.data.number")
    ]
    check_numbers(model, profile, numbered, errors)
    refs = resolve_references(model, profile, entries, errors)
    if errors:
        return []
    now, used = utcnow(), {n for _, n, _ in numbered}
    # Auto numbers continue after the highest number, the request's explicit ones included.
    next_number = max([model.next_number(profile.id), *(n + 1 for n in used)])
    # Every column of the table, so that all rows insert in one shape (models.inserts).
    fixed = {**dict.fromkeys(insertable(model)), "risk": profile.id, "created": now, "updated": now}
    nests = "address" not in model._meta.fields
    rows: list[tuple[dict, dict | None]] = []
    # UUIDs as the database stores them: no UUID object to make, nor to turn into text twice (stored, shown).
    for (i, values), new_uuid in zip(entries, inserts.new_uuids(len(entries)), strict=True):
        row = {**fixed, "uuid": new_uuid, **columns(model, values)}
        for name in model.REFERENCES:
            row[name] = refs.get((i, name))
        if row["number"] is None:
            while next_number in used:
                next_number += 1
            if next_number > MAX_NUMBER:
                errors.add(f"data.{i}.data.number", message("no_number_left", f"data.{i}.data.number", max=MAX_NUMBER))
            row["number"] = next_number
            used.add(next_number)
        rows.append((row, values.get("address") if nests else None))
    return [] if errors else rows


def insert(model: type[InRisk], profile: Risk, rows: list[tuple[dict, dict | None]]) -> list[dict]:
    """Insert planned rows (and nested addresses) in multi-row statements; return them as stored, with their ids."""
    stored = [row for row, _ in rows]
    if not stored:
        return stored
    # Numbers are unique in the profile: the key that maps each new id back to its row.
    ids = inserts.insert(model, insertable(model), stored, key="number", copy=True)
    for row, new_id in zip(stored, ids, strict=True):
        row["id"] = new_id
    blank = dict.fromkeys(insertable(Address))
    nested_rows = [(row, nested) for row, nested in rows if nested]
    addresses = [
        {
            **blank,
            **columns(Address, nested["data"]),
            "risk": profile.id,
            "driver": row["id"],
            "uuid": new_uuid,
            "created": row["created"],
            "updated": row["created"],
        }
        for (row, nested), new_uuid in zip(nested_rows, inserts.new_uuids(len(nested_rows)), strict=True)
    ]
    if addresses:
        inserts.insert(Address, insertable(Address), addresses, copy=True)
    return stored


@functools.cache
def insertable(model: type[InRisk]) -> tuple[str, ...]:
    """Return the columns a created row sets: every field but the id."""
    return tuple(name for name in model._meta.sorted_field_names if name != "id")


def plan_update(profile: Risk, body: Any, errors: Errors) -> list[tuple[int, type[InRisk], int, dict, dict]]:
    """Check an update request against the database; return [(index, model, id, values, refs)]."""
    listed = bulk_write.items(body)
    check_profile_type(profile, listed, errors)
    by_kind: dict[str, list[tuple[int, dict, dict]]] = {}
    for i, item, values in bulk_write.entries(listed):
        if isinstance(item.get("object"), str) and item["object"] in KINDS:
            by_kind.setdefault(item["object"], []).append((i, item, values))
    plan: list[tuple[int, type[InRisk], int, dict, dict]] = []
    for kind, entries in by_kind.items():
        model = KINDS[kind]
        ids = _existing(model, profile, [(i, item) for i, item, _ in entries], errors)
        found = [(i, item, values) for i, item, values in entries if i in ids]
        numbered = [
            (i, v["number"], ids[i]) for i, item, v in found if _is_int(v.get("number")) and errors.clean(f"data.{i}.data.number")
        ]
        if numbered and issubclass(model, RiskObject):
            check_numbers(model, profile, numbered, errors)
        refs = resolve_references(model, profile, [(i, v) for i, _, v in found], errors)
        if model is Driver:
            _check_nested_addresses(found, ids, errors)
        plan.extend((i, model, ids[i], values, refs) for i, item, values in found)
    return sorted(plan, key=lambda step: step[0])


def _existing(model: type[InRisk], profile: Risk, listed: list[tuple[int, Any]], errors: Errors) -> dict[int, int]:
    """Map item indexes to ids of the objects that exist (locked until the write ends); report the rest and repeats."""
    return bulk_write.existing(listed, lambda uuids: model.ids_by_uuid(profile.id, uuids, lock=True), errors, "not_found")


def _check_nested_addresses(found: list[tuple[int, dict, dict]], ids: dict[int, int], errors: Errors) -> None:
    """A driver without an address needs a complete one."""
    nested = [(i, item, v["address"]) for i, item, v in found if isinstance(v.get("address"), dict)]
    if not nested:
        return
    driver_ids = [ids[i] for i, _, _ in nested]
    having = {d for (d,) in models.tuples(Address.select(Address.driver).where(Address.driver.in_(driver_ids)))}
    full = compiled(spec.schema("AddressCreateData"))
    for i, _item, address in nested:
        if ids[i] not in having and isinstance(address.get("data"), dict):
            prefix = f"data.{i}.data.address.data"
            for path, messages in full.errors(address["data"], prefix).items():
                for text in messages:
                    errors.add(path, text)


def plan_delete(profile: Risk, body: Any, errors: Errors) -> list[tuple[int, type[InRisk], int, str]]:
    """Check a delete request; return [(index, model, id, uuid)] in a safe order."""
    listed = bulk_write.items(body)
    check_profile_type(profile, listed, errors)
    plan: list[tuple[int, type[InRisk], int, str]] = []
    for kind in DELETE_ORDER:
        model = KINDS[kind]
        of_kind = [(i, item) for i, item in enumerate(listed) if isinstance(item, dict) and item.get("object") == kind]
        ids = _existing(model, profile, of_kind, errors)
        plan.extend((i, model, object_id, listed[i]["uuid"]) for i, object_id in ids.items())
    premises = {object_id: i for i, model, object_id, _ in plan if model is Premise}
    if premises:
        going = {object_id for _, model, object_id, _ in plan if model is Building}
        query = Building.select(Building.premise, Building.id).where(Building.premise.in_(list(premises)))
        for premise_id, building_id in models.tuples(query):
            if building_id not in going:
                path = f"data.{premises[premise_id]}.uuid"
                errors.add(path, message("has_buildings", path))
    return plan
