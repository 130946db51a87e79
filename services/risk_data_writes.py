"""The risk-data writes of the bulk-write path (services.bulk_write): rules and rows, rendering, events."""

import datetime
import uuid
from typing import Any, NoReturn

import models
from foundation.exceptions import ValidationFailed
from foundation.messages import message
from models import utcnow
from models.risk_data import Address, Driver, InRisk, RiskObject
from models.tenancy import Risk
from services import render
from services.bulk_write import Errors
from services.json_values import identifier
from services.risk_data_rules import columns, insert, plan_create, plan_delete, plan_update
from webhooks import outbox


class Create:
    """Create risk data of one kind in a risk profile."""

    def __init__(self, model: type[RiskObject], risk: Risk, include: list[str] | None = None) -> None:
        self.model, self.risk, self.include = model, risk, include

    def plan(self, body: Any, errors: Errors) -> list:
        """Check the items against the database; return their rows."""
        return plan_create(self.model, self.risk, body, errors)

    def apply(self, rows: list) -> list[dict]:
        """Insert the rows; return them rendered, and record their events."""
        created = _created(self.model, insert(self.model, self.risk, rows), self.include)
        emit(self.risk, created, "created")
        return created


class Update:
    """Update risk data of any kind in a risk profile."""

    def __init__(self, risk: Risk) -> None:
        self.risk = risk

    def plan(self, body: Any, errors: Errors) -> list:
        """Check the items against the database; return what changes."""
        return plan_update(self.risk, body, errors)

    def apply(self, plan: list) -> list[dict]:
        """Write the changes; return the updated objects, and record their events."""
        updated = apply_update(self.risk, plan)
        emit(self.risk, updated, "updated")
        return updated


class Delete:
    """Delete risk data of any kind from a risk profile."""

    def __init__(self, risk: Risk) -> None:
        self.risk = risk

    def plan(self, body: Any, errors: Errors) -> list:
        """Check the items against the database; return what goes, in a safe order."""
        return plan_delete(self.risk, body, errors)

    def apply(self, plan: list) -> list[dict]:
        """Delete; return the deleted objects, and record their events."""
        deleted = apply_delete(self.risk, plan)
        emit(self.risk, deleted, "deleted")
        return deleted


def emit(risk: Risk, changed: list[dict], action: str) -> None:
    """Record one event per changed object, in the write's transaction; no payload is built for an event nobody receives."""
    by_event: dict[str, list[dict]] = {}
    for item in changed:
        if item["object"] != "address":
            by_event.setdefault(f"{item['object']}.{action}", []).append(item)
    risk_uuid = str(risk.uuid)
    channels = channels_of(risk)
    for event, items in by_event.items():
        webhooks = outbox.subscribers(risk.agency_id, event, channels)
        if webhooks:
            outbox.write(risk.agency_id, event, [{**item, "risk": risk_uuid} for item in items], webhooks, channels)


def channels_of(risk: Risk) -> list[str]:
    """Return the channels of every event of a risk profile's data: its own, and its type's."""
    return [f"risk:{risk.uuid}", f"profile_type:{risk.type}"]


def _created(model: type[InRisk], stored: list[dict], include: list[str] | None) -> list[dict]:
    """Render freshly inserted rows; references' UUIDs are read back in one query each."""
    for name, target in model.REFERENCES.items():
        ids = {row[name] for row in stored if row[name] is not None}
        uuids = dict(models.tuples(target.select(target.id, target.uuid).where(target.id.in_(list(ids))))) if ids else {}
        for row in stored:
            row[f"{name}_uuid"] = uuids.get(row[name])
    return render.envelopes(model, stored, include)


def apply_update(profile: Risk, plan: list[tuple[int, type[InRisk], int, dict, dict]]) -> list[dict]:
    """Write a checked update; return the bulk response items."""
    now, out = utcnow(), list[dict]()
    # The items' UPDATEs go together (one round trip on PostgreSQL: models.together), in the items' order: an item that
    # writes another row as well (an address's driver, a driver's nested address) sends what came before it first.
    pending: list[tuple[type[InRisk], int, dict[str, Any]]] = []
    for i, model, object_id, values, refs in plan:
        row = columns(model, values)
        for name in model.REFERENCES:
            if name in values:
                row[name] = refs.get((i, name))
        row["updated"] = now
        pending.append((model, object_id, row))
        nested: Any = values.get("address", False) if model is Driver else False  # False: not given
        if model is Address or nested is not False:
            _write_together(pending)
            pending = []
        if model is Address:
            Driver.update(updated=now).where(Driver.id == Address.select(Address.driver).where(Address.id == object_id)).execute()
        if nested is not False:
            _write_nested_address(profile, object_id, nested, now)
    _write_together(pending)
    # Read back in one query a kind, not one an item; a row gone since it was checked and locked fails its item.
    written: dict[type[InRisk], set[int]] = {}
    for _, model, object_id, _, _ in plan:
        written.setdefault(model, set()).add(object_id)
    rows = {(model, row["id"]): row for model, ids in written.items() for row in render.fetch_in(model, model.id, list(ids))}
    for i, model, object_id, values, _ in plan:
        current = rows.get((model, object_id))
        if current is None:
            _vanished(i)
        item: dict[str, Any] = {
            "object": model.OBJECT,
            "uuid": identifier(current["uuid"]),
            "data": render.data(model, current),
            "profile_type": profile.type,
        }
        if model is Driver and "address" in values:
            address = Address.select().where(Address.driver == object_id).dicts().first()
            item["data"]["address"] = render.envelope(Address, address) if address else None
        out.append(item)
    return out


def _write_together(rows: list[tuple[type[InRisk], int, dict[str, Any]]]) -> None:
    with models.together():
        for model, object_id, row in rows:
            model.write(object_id, row)


def _vanished(index: int) -> NoReturn:
    """Fail an item whose row a concurrent request deleted after it was checked (the write rolls back)."""
    path = f"data.{index}.uuid"
    raise ValidationFailed({path: [message("not_found", path)]})


def _write_nested_address(profile: Risk, driver_id: int, nested: dict | None, now: datetime.datetime) -> None:
    if nested is None:
        Address.delete().where(Address.driver == driver_id).execute()
        return
    values = columns(Address, nested["data"])
    updated = Address.update(**values, updated=now).where(Address.driver == driver_id).execute()
    if not updated:
        Address.insert(risk=profile.id, driver=driver_id, uuid=uuid.uuid4(), created=now, updated=now, **values).execute()


def apply_delete(profile: Risk, plan: list[tuple[int, type[InRisk], int, str]]) -> list[dict]:
    """Delete checked objects; return the bulk response items in request order."""
    # One DELETE a kind, children first (the plan's order), all in one round trip on PostgreSQL.
    by_kind: dict[type[InRisk], list[int]] = {}
    for _, model, object_id, _ in plan:
        by_kind.setdefault(model, []).append(object_id)
    with models.together():
        for model, ids in by_kind.items():
            model.delete().where(model.id.in_(ids)).execute()
    return [
        {"object": model.OBJECT, "uuid": str(value).lower(), "profile_type": profile.type}
        for _, model, _, value in sorted(plan, key=lambda step: step[0])
    ]
