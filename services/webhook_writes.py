"""Webhook subscriptions' write rules (create, update, delete, rotate-secret), beside risk data's, on the one bulk-write path."""

import datetime
import uuid
from collections.abc import Iterable
from typing import Any

import models
from foundation.exceptions import ApiError
from foundation.messages import message
from foundation.signing import generate_secret
from models import utcnow
from models.tenancy import Agency
from models.webhooks import Webhook, WebhookChannel, pack_channels, pack_events, unpack_channels, unpack_events
from services.bulk_write import Errors, entries, existing, items
from services.render import envelope
from webhooks import custom_headers, notices
from webhooks.urls import normalise, url_problem

# ---- rendering ------------------------------------------------------------------------------------


def render(row: dict) -> dict:
    """Return a webhook row (as a dict) in the common envelope."""
    shown = {
        **row,
        "events": unpack_events(row["events"]),
        "channels": unpack_channels(row.get("channels")),
        "headers": custom_headers.masked(row.get("headers")),
        "signing_secret": row["secret"],
        "previous_secret_valid_until": _previous_valid_until(row),
    }
    return envelope(Webhook, shown)


def _previous_valid_until(row: dict) -> datetime.datetime | None:
    """Return until when the secret replaced by rotate-secret still signs webhook-signature; None once it does not."""
    until = row.get("previous_secret_expires")
    if not row.get("previous_secret") or until is None or until <= utcnow():
        return None
    return until


def rows(ids: Iterable[int]) -> dict[int, dict]:
    """Return webhook rows (as dicts) by id."""
    return {row["id"]: row for row in models.dicts(Webhook.select().where(Webhook.id.in_(list(ids))))}


def _check_headers(values: dict, path: str, errors: Errors) -> None:
    """Record each header name refused: not an HTTP token, set by the delivery itself, or given twice."""
    given = values.get("headers")
    if not isinstance(given, dict):
        return
    seen: set[str] = set()
    for name in given:
        at = f"{path}.{name}"
        if not errors.clean(at):
            continue
        if not custom_headers.TOKEN.match(name):
            errors.add(at, message("header_name", at))
        elif custom_headers.refused(name):
            errors.add(at, message("header_owned", at))
        elif name.lower() in seen:
            errors.add(at, message("header_repeated", at))
        seen.add(name.lower())


def _check_url(values: dict, path: str, errors: Errors, allow_private: bool) -> str | None:
    """Record why an item's url is refused; return the normalised url to store (the one delivery sends), or None."""
    url = values.get("url")
    if not (isinstance(url, str) and errors.clean(path)):
        return None
    problem = url_problem(url, allow_private)
    if problem:
        errors.add(path, message("url_refused", path, problem=problem))
        return None
    return normalise(url)


# ---- writes: every check that needs the database, then the write (on the path of services.bulk_write) -----


class _Write:
    """A bulk write of an agency's webhooks."""

    def __init__(self, agency_id: int, allow_private: bool = False) -> None:
        self.agency_id = agency_id
        self.allow_private = allow_private  # RISKAPI_WEBHOOK_ALLOW_PRIVATE: receivers on the operator's own network

    def _existing(self, payload: Any, errors: Errors) -> dict[int, dict]:
        """Map item index to the agency's webhook row its uuid names; report unknown and repeated ones."""
        listed = [(i, item) for i, item in enumerate(items(payload)) if isinstance(item, dict)]
        return existing(listed, self._rows_of, errors, "in")

    def _rows_of(self, uuids: list[str]) -> dict:
        # A concurrent PATCH or DELETE of the same webhooks waits for this one.
        mine = Webhook.select().where((Webhook.agency == self.agency_id) & Webhook.uuid.in_(uuids) & Webhook.subscription())
        query = models.locking(mine.order_by(Webhook.id))
        return {str(row["uuid"]): row for row in models.dicts(query)}


class Create(_Write):
    """Create webhooks: each gets its own signing secret; the agency's plan caps the active ones."""

    def plan(self, payload: Any, errors: Errors) -> list[dict]:
        listed = list(entries(items(payload)))
        urls = {i: _check_url(values, f"data.{i}.data.url", errors, self.allow_private) for i, _, values in listed}
        for i, _, values in listed:
            _check_headers(values, f"data.{i}.data.headers", errors)
        if errors:
            return []
        now = utcnow()
        return [
            {
                "uuid": uuid.uuid4(),
                "agency": self.agency_id,
                "type": values["type"],
                "description": values.get("description"),
                "url": urls[i],
                "events": pack_events(values["events"]),
                "channels": pack_channels(values.get("channels")),
                "headers": custom_headers.pack(values.get("headers")),
                "secret": generate_secret(),
                "disabled": None,
                "failures": 0,
                "created": now,
                "updated": now,
            }
            for i, _, values in listed
        ]

    def apply(self, rows: list[dict]) -> list[dict]:
        _check_limit(self.agency_id, len(rows))
        ids = Webhook.insert_many(rows).returning(Webhook.id).tuples().execute()
        for row, (new_id,) in zip(rows, ids, strict=True):
            row["id"] = new_id
        WebhookChannel.file(self.agency_id, {row["id"]: row["channels"] for row in rows})
        return [render(row) for row in rows]


class Update(_Write):
    """Update webhooks: the type stays; re-enabling counts against the agency's plan."""

    def plan(self, payload: Any, errors: Errors) -> list[tuple]:
        """Return [(index, current row, changes)] of a valid update."""
        found = self._existing(payload, errors)
        checked = []
        for i, _, values in entries(items(payload)):
            url = _check_url(values, f"data.{i}.data.url", errors, self.allow_private)
            _check_headers(values, f"data.{i}.data.headers", errors)
            current = found.get(i)
            if current is None:
                continue
            path = f"data.{i}.data.type"
            if "type" in values and values["type"] != current["type"] and errors.clean(path):
                errors.add(path, message("immutable", path))
            checked.append((i, current, values, url))
        if errors:  # the schema's errors among them: values that broke it are never turned into columns
            return []
        now = utcnow()
        return [(i, current, _changes(values, current, url, now)) for i, current, values, url in checked]

    def apply(self, plan: list[tuple]) -> list[dict]:
        enabling = sum(1 for _, _, changes in plan if "disabled" in changes and changes["disabled"] is None)
        disabling = sum(1 for _, _, changes in plan if changes.get("disabled") is not None)
        _check_limit(self.agency_id, enabling - disabling)
        now = utcnow()
        for _, current, changes in plan:
            Webhook.update(**changes, updated=now).where(Webhook.id == current["id"]).execute()
        refiled = {current["id"]: changes["channels"] for _, current, changes in plan if "channels" in changes}
        WebhookChannel.file(self.agency_id, refiled)
        for _, current, changes in plan:  # once every item is written: none of the webhooks disabled here is told
            if changes.get("disabled") is not None:
                notices.webhook_disabled(
                    self.agency_id, current["uuid"], notices.MANUAL, changes["disabled"], current["failures"]
                )
        updated = rows(current["id"] for _, current, _ in plan)
        return [render(updated[current["id"]]) for _, current, _ in plan]


class Delete(_Write):
    """Delete webhooks named by uuid."""

    def plan(self, payload: Any, errors: Errors) -> dict[int, dict]:
        return self._existing(payload, errors)

    def apply(self, found: dict) -> list[dict]:
        Webhook.delete().where(Webhook.id.in_([row["id"] for row in found.values()])).execute()
        return [{"object": "webhook", "uuid": str(found[i]["uuid"])} for i in sorted(found)]


def _changes(values: dict, current: dict, url: str | None, now: datetime.datetime) -> dict:
    """Return the columns an update item changes."""
    changes: dict[str, Any] = {}
    if url is not None:
        changes["url"] = url
    if "description" in values:
        changes["description"] = values["description"]
    if "events" in values and isinstance(values["events"], list):
        changes["events"] = pack_events(values["events"])
    if "channels" in values:  # null clears: the webhook takes every event of its types again
        changes["channels"] = pack_channels(values["channels"])
    if "headers" in values:  # the whole set is replaced; null clears it
        changes["headers"] = custom_headers.pack(values["headers"])
    if "disabled" in values:
        if values["disabled"] is True and current["disabled"] is None:
            changes["disabled"] = now
        elif values["disabled"] is not True and current["disabled"] is not None:
            changes["disabled"] = None
            changes["failures"] = 0
    return changes


def _check_limit(agency_id: int, adding: int) -> None:
    """Refuse (400) a write that would leave more active webhooks than the agency's plan allows."""
    if adding <= 0:
        return
    # Serialise the agency's webhook writes across processes.
    limit = models.locking(Agency.select(Agency.webhook_limit).where(Agency.id == agency_id)).scalar()
    # Listen sessions (`riskapi listen`) are a developer's, for as long as a terminal holds them: not the plan's.
    active = Webhook.select().where((Webhook.agency == agency_id) & Webhook.disabled.is_null() & Webhook.subscription()).count()
    if active + adding > limit:
        raise ApiError(
            400,
            f"The agency's plan allows {limit} active webhooks; it has {active} and this request would add {adding}.",
        )


def rotate_secret(webhook: Webhook, grace: float) -> dict:
    """Give a webhook a new signing secret; the one replaced keeps signing webhook-signature for `grace` seconds.

    Rotating again during a grace ends the older secret at once: only the secret just replaced stays valid.
    Return the webhook's row.
    """
    now = utcnow()
    if grace > 0:
        # previous_secret = the row's secret before this UPDATE (SQL reads old values on the right),
        # so concurrent rotations chain instead of both keeping the same previous secret.
        previous = {"previous_secret": Webhook.secret, "previous_secret_expires": now + datetime.timedelta(seconds=grace)}
    else:
        previous = {"previous_secret": None, "previous_secret_expires": None}
    Webhook.update(secret=generate_secret(), updated=now, **previous).where(Webhook.id == webhook.id).execute()
    return rows([webhook.id])[webhook.id]
