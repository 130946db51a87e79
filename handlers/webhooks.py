"""Webhook subscriptions: list, bulk create, update and delete, rotate-secret and ping."""

import datetime
import uuid

import flask

import models
from handlers import common
from jobs.signing import generate_secret
from models import utcnow
from models.tenancy import Agency
from models.webhooks import Webhook, pack_events, unpack_events
from riskapi import bulk, outbox, query
from riskapi.app import settings
from riskapi.errors import ApiError
from riskapi.pagination import Paginator, envelope
from riskapi.render import timestamp
from riskapi.webhook_urls import normalise, url_problem

LIST_OPERATION = "handlers.webhooks.list_webhooks"
_spec: list = []


# ---- rendering and lookup -------------------------------------------------------------------------


def render(row: dict) -> dict:
    """Return a webhook row (as a dict) in the common envelope."""
    return {
        "object": "webhook",
        "uuid": str(row["uuid"]),
        "data": {
            "type": row["type"],
            "description": row["description"],
            "url": row["url"],
            "events": unpack_events(row["events"]),
            "disabled": timestamp(row["disabled"]) if row["disabled"] else None,
        },
        "meta": {
            "created": timestamp(row["created"]),
            "updated": timestamp(row["updated"]),
            "signing_secret": row["secret"],
            "previous_secret_valid_until": _previous_valid_until(row),
        },
    }


def _previous_valid_until(row: dict) -> str | None:
    """Return until when the secret replaced by rotate-secret still signs webhook-signature; None once it does not."""
    until = row.get("previous_secret_expires")
    if not row.get("previous_secret") or until is None or until <= utcnow():
        return None
    return timestamp(until)


def webhook_of(agency_id: int, webhook_uuid: str) -> Webhook:
    """Return the agency's webhook; another agency's answers 404 like a missing one."""
    try:
        uuid.UUID(webhook_uuid)
    except ValueError:
        raise ApiError(404, "Webhook not found.") from None
    found = Webhook.get_or_none((Webhook.uuid == webhook_uuid) & (Webhook.agency == agency_id))
    if found is None:
        raise ApiError(404, "Webhook not found.")
    return found


def _rows(ids) -> dict:
    return {row["id"]: row for row in Webhook.select().where(Webhook.id.in_(list(ids))).dicts()}


def _check_url(values: dict, path: str, errors: bulk.Errors) -> str | None:
    """Record why an item's url is refused; return the normalised url to store (the one delivery sends), or None."""
    url = values.get("url")
    if not (isinstance(url, str) and errors.clean(path)):
        return None
    problem = url_problem(url, settings().webhook_allow_private)
    if problem:
        errors.add(path, f"The {path} field {problem}.")
        return None
    return normalise(url)


# ---- plans: every check that needs the database, before anything is written ------------------------


def _items(payload) -> list:
    items = payload.get("data") if isinstance(payload, dict) else None
    return items if isinstance(items, list) else []


def _entries(payload):
    for i, item in enumerate(_items(payload)):
        if isinstance(item, dict) and isinstance(item.get("data", {}), dict):
            yield i, item, item.get("data") or {}


def _plan_create(agency_id: int, payload, errors: bulk.Errors) -> list[dict]:
    entries = list(_entries(payload))
    urls = {i: _check_url(values, f"data.{i}.data.url", errors) for i, _, values in entries}
    if errors:
        return []
    now = utcnow()
    return [
        {
            "uuid": uuid.uuid4(),
            "agency": agency_id,
            "type": values["type"],
            "description": values.get("description"),
            "url": urls[i],
            "events": pack_events(values["events"]),
            "secret": generate_secret(),
            "disabled": None,
            "failures": 0,
            "created": now,
            "updated": now,
        }
        for i, _, values in entries
    ]


def _existing(agency_id: int, payload, errors: bulk.Errors) -> dict:
    """Map item index to the agency's webhook row its uuid names; report unknown and repeated ones."""
    wanted = [(i, item.get("uuid")) for i, item in enumerate(_items(payload)) if isinstance(item, dict)]
    wanted = [(i, value) for i, value in wanted if isinstance(value, str) and errors.clean(f"data.{i}.uuid")]
    uuids = [value.lower() for _, value in wanted]
    rows = {}
    if uuids:
        query_ = Webhook.select().where((Webhook.agency == agency_id) & Webhook.uuid.in_(uuids)).dicts()
        if not models.is_sqlite():  # a concurrent PATCH or DELETE of the same webhooks waits for this one
            query_ = query_.order_by(Webhook.id).for_update()
        rows = {str(row["uuid"]): row for row in query_}
    found, seen = {}, set()
    for i, value in wanted:
        path, key = f"data.{i}.uuid", value.lower()
        if key in seen:
            errors.add(path, f"The {path} field has a duplicate value.")
        elif key not in rows:
            errors.add(path, f"The selected {path} is invalid.")
        else:
            found[i] = rows[key]
        seen.add(key)
    return found


def _plan_update(agency_id: int, payload, errors: bulk.Errors) -> list[tuple]:
    """Return [(index, current row, changes)] of a valid update."""
    found = _existing(agency_id, payload, errors)
    now = utcnow()
    plan = []
    for i, _, values in _entries(payload):
        url = _check_url(values, f"data.{i}.data.url", errors)
        current = found.get(i)
        if current is None:
            continue
        path = f"data.{i}.data.type"
        if "type" in values and values["type"] != current["type"] and errors.clean(path):
            errors.add(path, f"The {path} field cannot be changed; delete the webhook and create another.")
        changes = {}
        if url is not None:
            changes["url"] = url
        if "description" in values:
            changes["description"] = values["description"]
        if "events" in values and isinstance(values["events"], list):
            changes["events"] = pack_events(values["events"])
        if "disabled" in values:
            if values["disabled"] is True and current["disabled"] is None:
                changes["disabled"] = now
            elif values["disabled"] is not True and current["disabled"] is not None:
                changes["disabled"] = None
                changes["failures"] = 0
        plan.append((i, current, changes))
    return plan


def _check_limit(agency_id: int, adding: int) -> None:
    """Refuse (400) a write that would leave more active webhooks than the agency's plan allows."""
    if adding <= 0:
        return
    agency = Agency.select(Agency.webhook_limit).where(Agency.id == agency_id)
    if not models.is_sqlite():
        # Serialise the agency's webhook writes across processes (SQLite's write lock already does).
        agency = agency.for_update()
    limit = agency.scalar()
    active = Webhook.select().where((Webhook.agency == agency_id) & Webhook.disabled.is_null()).count()
    if active + adding > limit:
        raise ApiError(
            400,
            f"The agency's plan allows {limit} active webhooks; it has {active} and this request would add {adding}.",
        )


# ---- operations -----------------------------------------------------------------------------------


def list_webhooks(user, per_page=50, cursor=None, filter=None, sort=None):
    """List the agency's webhooks."""
    if not _spec:
        _spec.append(query.ListSpec(LIST_OPERATION, Webhook))
    spec = _spec[0]
    rows_query = spec.apply(Webhook.select().where(Webhook.agency == user).dicts(), user, filter)
    paginator = Paginator(spec.keys(sort), spec.signature_of(sort), common.cursor_secret())
    rows, next_cursor, prev_cursor = paginator.page(rows_query, per_page, cursor)
    args = list(flask.request.args.items(multi=True))
    page = envelope([render(row) for row in rows], per_page, next_cursor, prev_cursor, flask.request.base_url, args)
    return common.respond(200, page)


def create_webhooks(user):
    """Create webhooks."""

    def apply(rows):
        _check_limit(user, len(rows))
        ids = Webhook.insert_many(rows).returning(Webhook.id).tuples().execute()
        for row, (new_id,) in zip(rows, ids, strict=True):
            row["id"] = new_id
        return [render(row) for row in rows]

    return common.bulk_write(201, lambda payload, errors: _plan_create(user, payload, errors), apply)


def update_webhooks(user):
    """Update webhooks."""

    def apply(plan):
        enabling = sum(1 for _, _, changes in plan if "disabled" in changes and changes["disabled"] is None)
        disabling = sum(1 for _, _, changes in plan if changes.get("disabled") is not None)
        _check_limit(user, enabling - disabling)
        now = utcnow()
        for _, current, changes in plan:
            Webhook.update(**changes, updated=now).where(Webhook.id == current["id"]).execute()
        rows = _rows(current["id"] for _, current, _ in plan)
        return [render(rows[current["id"]]) for _, current, _ in plan]

    return common.bulk_write(200, lambda payload, errors: _plan_update(user, payload, errors), apply)


def delete_webhooks(user):
    """Delete webhooks; their pending deliveries go with them."""

    def apply(found):
        Webhook.delete().where(Webhook.id.in_([row["id"] for row in found.values()])).execute()
        return [{"object": "webhook", "uuid": str(found[i]["uuid"])} for i in sorted(found)]

    return common.bulk_write(200, lambda payload, errors: _existing(user, payload, errors), apply)


def rotate_secret(user, webhook):
    """Give a webhook a new signing secret; the one replaced keeps signing webhook-signature for the grace period.

    The end of the grace is fixed now (RISKAPI_WEBHOOK_ROTATION_GRACE of this process) and stored, so
    every worker honours the same instant and the response can say it. Rotating again during a grace
    ends the older secret at once: only the secret just replaced stays valid.
    """
    with models.atomic():
        found = webhook_of(user, webhook)
        now = utcnow()
        grace = settings().webhook_rotation_grace
        if grace > 0:
            # previous_secret = the row's secret before this UPDATE (SQL reads old values on the right),
            # so concurrent rotations chain instead of both keeping the same previous secret.
            previous = {"previous_secret": Webhook.secret, "previous_secret_expires": now + datetime.timedelta(seconds=grace)}
        else:
            previous = {"previous_secret": None, "previous_secret_expires": None}
        Webhook.update(secret=generate_secret(), updated=now, **previous).where(Webhook.id == found.id).execute()
        row = _rows([found.id])[found.id]
    return common.respond(200, {"data": [render(row)]})


def ping_webhook(user, webhook):
    """Send a webhook.ping event to one webhook."""
    with models.atomic():
        found = webhook_of(user, webhook)
        if found.disabled is not None:
            raise ApiError(409, "The webhook is disabled; re-enable it first.")
        accepted = outbox.ping(found)
    return common.respond(202, accepted)
