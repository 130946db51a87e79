"""The bare endpoints the service is measured against: a Flask + Peewee baseline and the floor of a Python process.

Both write a driver as the service does, through `envelope`, and a page through `page`, so that their figures are
for the same answer.
"""

import datetime
from collections.abc import Mapping
from typing import Any

from models.risk_data import Driver

UTC = datetime.UTC
HIDDEN = {"id", "risk", "uuid", "created", "updated", "vehicle"}
FIELDS = tuple(f.name for f in Driver._meta.sorted_fields if f.name not in HIDDEN)


def _stamp(value: datetime.datetime) -> str:
    return value.replace(tzinfo=UTC).isoformat()


def envelope(row: Mapping[str, Any]) -> dict:
    """Return a driver row (its fields, uuid, times and vehicle_uuid) in the service's envelope."""
    data = {name: row[name].isoformat() if isinstance(row[name], datetime.date) else row[name] for name in FIELDS}
    vehicle = str(row["vehicle_uuid"]) if row["vehicle_uuid"] is not None else None
    data["vehicle"] = vehicle
    return {
        "object": "driver",
        "uuid": str(row["uuid"]),
        "data": data,
        "meta": {"created": _stamp(row["created"]), "updated": _stamp(row["updated"])},
        "relations": {"address": None, "vehicle": vehicle},
    }


def page(items: list[dict], path: str, per_page: int, cursor: str | None) -> dict:
    """Return a first-to-last walk's page in the service's cursor envelope (no previous page: the walk goes forward)."""
    return {
        "data": items,
        "path": path,
        "per_page": per_page,
        "next_cursor": cursor,
        "next_page_url": f"{path}?per_page={per_page}&cursor={cursor}" if cursor else None,
        "prev_cursor": None,
        "prev_page_url": None,
    }
