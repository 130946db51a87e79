"""The database side of the claims that jobs.inflight holds: taken in batches, renewed while they wait, handed back.

A claim is a delivery's `locked_until` in the future: no other worker takes the delivery meanwhile, and
the relay's rescue leaves it alone. Claims of deliveries waiting in a line are renewed before they lapse;
a process that stops lets go of its waiting claims at once (or, if it dies, lets them lapse).
"""

from __future__ import annotations

import datetime
import logging
import time

import peewee

import models
from jobs.delivery import DATABASE_ERRORS
from models import utcnow
from models.webhooks import PENDING, Delivery, Event, Webhook
from riskapi.config import Settings

log = logging.getLogger("riskapi.delivery")

_CHUNK = 500


def lease_for(settings: Settings) -> datetime.timedelta:
    """Return how long a claim holds: one attempt's deadline, plus the grace rescue allows."""
    return datetime.timedelta(seconds=settings.webhook_timeout + settings.webhook_stale_after)


def claim_batch(wanted: dict, settings: Settings) -> tuple[list, list[int]]:
    """Claim the plainly claimable of {delivery id: generation} at once; return them (webhook and
    event body loaded), and the ids left to claim one by one (gone, superseded, done, disabled, busy, early)."""
    rows = list(
        Delivery.select(Delivery, Webhook, Event.body)
        .join_from(Delivery, Webhook)
        .join_from(Delivery, Event)
        .where(Delivery.id.in_(list(wanted)))
    )
    now = utcnow()
    plain = [
        row for row in rows
        if row.generation == wanted[row.id] and row.status == PENDING and row.webhook.disabled is None
        and (row.locked_until is None or row.locked_until < now)
        and (row.next_attempt is None or row.next_attempt <= now)
    ]  # fmt: skip
    lease = now + lease_for(settings)
    ids = [row.id for row in plain]
    if ids:
        with models.atomic():
            free = Delivery.locked_until.is_null() | (Delivery.locked_until < now)
            got = Delivery.update(locked_until=lease, updated=now).where(
                Delivery.id.in_(ids) & (Delivery.status == PENDING) & free
                & peewee.Tuple(Delivery.id, Delivery.generation).in_([(row.id, row.generation) for row in plain])
            ).execute()  # fmt: skip
            if got < len(ids):  # someone else's claim in between: keep only ours
                mine = Delivery.id.in_(ids) & (Delivery.locked_until == lease)
                ours = {i for (i,) in Delivery.select(Delivery.id).where(mine).tuples()}
                plain = [row for row in plain if row.id in ours]
    taken = {row.id for row in plain}
    return plain, [delivery_id for delivery_id in wanted if delivery_id not in taken]


def _pairs(items: list):
    return peewee.Tuple(Delivery.id, Delivery.generation).in_([(item.delivery.id, item.generation) for item in items])


def renew(items: list, settings: Settings) -> list:
    """Extend the claims of waiting items (each with .delivery, .generation, .lease); return those no
    longer this process's to attempt. Each renewed item's .lease (monotonic) is moved on."""
    lost: list = []
    for start in range(0, len(items), _CHUNK):
        chunk = items[start : start + _CHUNK]
        began = time.monotonic()
        pairs, mine = _pairs(chunk), (Delivery.status == PENDING) & Delivery.locked_until.is_null(False)
        renewed = Delivery.update(locked_until=utcnow() + lease_for(settings)).where(pairs & mine).execute()
        if renewed < len(chunk):
            still = {row for (row,) in Delivery.select(Delivery.id).where(pairs & mine).tuples()}
            lost += [item for item in chunk if item.delivery.id not in still]
        for item in chunk:
            item.lease = began + lease_for(settings).total_seconds()
    return lost


def hand_back(items: list) -> None:
    """Let go of claims at once, so any relay hands these deliveries to a worker still running."""
    try:
        with models.db.connection_context():
            for start in range(0, len(items), _CHUNK):
                chunk = items[start : start + _CHUNK]
                Delivery.update(relayed=None, locked_until=None).where(_pairs(chunk) & (Delivery.status == PENDING)).execute()
    except DATABASE_ERRORS as exc:
        log.warning("could not hand back %d waiting deliveries (%s): their claims will expire", len(items), exc)


__all__ = ["claim_batch", "hand_back", "lease_for", "renew"]
