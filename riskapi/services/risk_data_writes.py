"""The risk-data writes of the bulk-write path (riskapi.services.bulk_write): rules and rows, rendering, events."""

from typing import Any

import models
from models.risk_data import InRisk, RiskObject
from models.tenancy import Risk
from riskapi.services import render
from riskapi.services.bulk_write import Errors
from riskapi.services.risk_data_rules import apply_delete, apply_update, insert, plan_create, plan_delete, plan_update
from riskapi.webhooks import outbox


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
