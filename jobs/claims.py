"""Claim: the RQ jobs' work. A job claims its deliveries and puts them in their webhooks' lines (jobs.lines).

A claim is a delivery's `locked_until` in the future: no other worker takes the delivery meanwhile, and
the relay's rescue leaves it alone. Only the job of the delivery's current `generation` may claim it
(the relay bumps it at every hand-over to RQ, so a superseded or duplicated job does nothing), and a
delivery that is no longer pending is left alone: running a job twice is harmless. Claims of
deliveries waiting in a line are renewed before they lapse (`tend`); a process that stops lets go of
its waiting claims at once (`hand_back`), or, if it dies, lets them lapse. The writes are
models.delivery_states's.

The worker hands its engine to the jobs (jobs.rq_internals.EngineJob); only `riskapi worker` runs them.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import peewee

import models
from foundation.config import Settings
from jobs.outages import DATABASE_ERRORS, reconnecting
from jobs.rq_internals import engine_job
from models import delivery_states, utcnow
from models.inserts import as_is
from models.prepared import Prepared, padded
from models.webhooks import PENDING, Delivery, Event, Webhook

log = logging.getLogger("riskapi.delivery")

M = TypeVar("M", bound=peewee.Model)


class Lines(Protocol):
    """What a job needs of the engine it is handed (jobs.lines.Engine, which imports this module)."""

    settings: Settings

    def line_up(self, entries: list[tuple]) -> None: ...


class NoEngine(RuntimeError):
    """A delivery job run by a worker with no engine (a plain `rq worker`): only `riskapi worker` runs them."""


@engine_job
def take(delivery_id: int, generation: int, engine: Lines | None = None) -> str:
    """RQ entry point: claim one delivery and put it in its webhook's line."""
    if engine is None:
        raise NoEngine("delivery jobs run in `riskapi worker`, which hands them its engine")
    with models.connection():  # a job takes its connection and gives it back
        claimed = reconnecting(claim, delivery_id, generation, engine.settings, False)
    if isinstance(claimed, str):
        return claimed
    delivery, webhook, _ = claimed
    due = 0.0
    if delivery.next_attempt is not None:  # a retry RQ ran early waits in the line until it is due
        early = (delivery.next_attempt - utcnow()).total_seconds()
        due = time.time() + early if 0 < early <= 2 else 0.0
    engine.line_up([(delivery, webhook, generation, due)])
    return "in flight"


@engine_job
def take_batch(deliveries: list, engine: Lines | None = None) -> str:
    """RQ entry point: claim a batch's (delivery id, generation) pairs and line them up; return a summary.

    The plainly claimable are claimed in two queries (a burst of one receiver's deliveries comes in at
    this rate, and a webhook's new delivery queues behind it in RQ); anything unusual goes one by one.
    """
    if engine is None:
        raise NoEngine("delivery jobs run in `riskapi worker`, which hands them its engine")
    wanted = dict(tuple(pair) for pair in deliveries)
    with models.connection():  # a job takes its connection and gives it back
        claimed, rest = reconnecting(claim_batch, wanted, engine.settings)
    outcomes = [take(delivery_id, wanted[delivery_id], engine) for delivery_id in rest]
    engine.line_up([(delivery, delivery.webhook, delivery.generation, 0.0) for delivery in claimed])
    outcomes += ["in flight"] * len(claimed)
    counts = {outcome: outcomes.count(outcome) for outcome in outcomes}
    return ", ".join(f"{count} {outcome}" for outcome, count in sorted(counts.items()))


def lease_for(settings: Settings) -> datetime.timedelta:
    """Return how long a claim holds: one attempt's deadline, plus the grace rescue allows."""
    return datetime.timedelta(seconds=settings.webhook_timeout + settings.webhook_stale_after)


def _load(delivery_ids: list[int]) -> list[Delivery]:
    """Return deliveries with their webhook and event body loaded (one Webhook for the deliveries of one webhook)."""
    found = _LOAD.rows(padded(delivery_ids))
    webhooks: dict[int, Webhook] = {}
    loaded = []
    for row in found:
        delivery = _made(Delivery, _DELIVERY_READS, row)
        webhook_id = row[_WEBHOOK_AT]
        webhook = webhooks.get(webhook_id)
        if webhook is None:
            webhook = webhooks[webhook_id] = _made(Webhook, _WEBHOOK_READS, row, _WEBHOOK_AT)
        delivery.webhook = webhook
        delivery.stored_event = Event(__no_default__=1, id=row[_EVENT_AT], body=row[-1])
        loaded.append(delivery)
    return loaded


# Every claim reads its deliveries so, a batch of up to 25 at a time: the text written once per shape
# (models.prepared), and each row made into its models here. Peewee wrote the query for each batch and made a
# Webhook and an Event of every row through its general path: 14 % of a worker's samples in the soak (issue 35).
_DELIVERY_FIELDS = tuple(Delivery._meta.sorted_fields)
_WEBHOOK_FIELDS = tuple(Webhook._meta.sorted_fields)
_WEBHOOK_AT = len(_DELIVERY_FIELDS)
_EVENT_AT = next(at for at, field in enumerate(_DELIVERY_FIELDS) if field is Delivery.stored_event)
# Each field as a row is read into it: its name, the types kept as they are, and what converts the others.
Reads = tuple[tuple[str, tuple[type, ...], Callable[[Any], Any]], ...]
_DELIVERY_READS: Reads = tuple((field.name, as_is(field), field.python_value) for field in _DELIVERY_FIELDS)
_WEBHOOK_READS: Reads = tuple((field.name, as_is(field), field.python_value) for field in _WEBHOOK_FIELDS)
_LOAD = Prepared(
    lambda ids: (
        Delivery.select(*_DELIVERY_FIELDS, *_WEBHOOK_FIELDS, Event.body)
        .join_from(Delivery, Webhook)
        .join_from(Delivery, Event)
        .where(Delivery.id.in_(ids))
    )
)


def _made(model: type[M], reads: Reads, row: tuple, start: int = 0) -> M:
    """Return a model instance of the row's values from `start` on, read as its fields read them (as Peewee's cursor does)."""
    values = {}
    for (name, kept, convert), value in zip(reads, row[start : start + len(reads)], strict=True):
        values[name] = value if value is None or type(value) in kept else convert(value)
    return model(__no_default__=1, **values)


def claim(
    delivery_id: int, generation: int, settings: Settings, wait: bool = True
) -> tuple[Delivery, Webhook, datetime.datetime] | str:
    """Claim a delivery for one attempt: return (delivery, webhook, now), or why there is nothing to do.

    wait=False: a retry that RQ runs early is claimed at once (the engine's line holds it until it is due).
    """
    for waited in (not wait, True):
        found = _load([delivery_id])
        if not found:
            return "gone"
        delivery = found[0]
        if delivery.generation != generation:
            return "superseded"
        if delivery.status != PENDING:
            return "done"
        webhook = delivery.webhook
        if webhook.disabled is not None:
            delivery_states.fail_unattempted([(delivery.id, generation)])
            return "webhook disabled"
        # RQ stores scheduled times in whole seconds and may run a retry up to a second early:
        # wait for the due time, then read everything again (the url or secret may have changed).
        early = (delivery.next_attempt - utcnow()).total_seconds() if delivery.next_attempt else 0
        if waited or not 0 < early <= 2:
            break
        time.sleep(early)
    now = utcnow()
    if not delivery_states.claim(delivery_id, generation, now, now + lease_for(settings)):
        return "busy"
    return delivery, webhook, now


def claim_batch(wanted: dict, settings: Settings) -> tuple[list, list[int]]:
    """Claim the plainly claimable of {delivery id: generation} at once; return them (webhook and
    event body loaded), and the ids left to claim one by one (gone, superseded, done, disabled, busy, early)."""
    rows = _load(list(wanted))
    now = utcnow()
    plain = [
        row for row in rows
        if row.generation == wanted[row.id] and row.status == PENDING and row.webhook.disabled is None
        and (row.locked_until is None or row.locked_until < now)
        and (row.next_attempt is None or row.next_attempt <= now)
    ]  # fmt: skip
    if plain:
        ours = delivery_states.claim_many([(row.id, row.generation) for row in plain], now, now + lease_for(settings))
        if ours is not None:  # someone else's claim in between: keep only ours
            plain = [row for row in plain if row.id in ours]
    taken = {row.id for row in plain}
    return plain, [delivery_id for delivery_id in wanted if delivery_id not in taken]


def _pairs(items: list) -> list[tuple[int, int]]:
    return [(item.delivery.id, item.generation) for item in items]


def renew(items: list, settings: Settings) -> list:
    """Extend the claims of waiting items (each with .delivery, .generation, .lease); return those no
    longer this process's to attempt. Each renewed item's .lease (monotonic) is moved on."""
    began = time.monotonic()
    lost = delivery_states.renew(_pairs(items), utcnow() + lease_for(settings))
    for item in items:
        item.lease = began + lease_for(settings).total_seconds()
    return [item for item in items if item.delivery.id in lost]


def tend(waiting: dict, unrecorded: list, renewing: bool, soon: float, settings: Settings) -> tuple[dict, set]:
    """Re-read the webhooks of {webhook id: waiting items}, settle the deliveries of disabled ones, renew the
    claims that lapse before `soon` (monotonic; all of `unrecorded`); return the webhooks read and the items
    no longer this process's to attempt."""
    models.check_out()
    hooks = {hook.id: hook for hook in Webhook.select().where(Webhook.id.in_(list(waiting)))} if waiting else {}
    gone = [item for webhook_id, items in waiting.items() if webhook_id not in hooks for item in items]
    disabled = [item for webhook_id, items in waiting.items() if hooks.get(webhook_id) and hooks[webhook_id].disabled
                for item in items]  # fmt: skip
    if disabled:  # as a claim of a disabled webhook's delivery does
        delivery_states.fail_unattempted(_pairs(disabled))
    lapsing = list(unrecorded)
    if renewing:
        # Only claims that would lapse before the next renewal but one: fewer writes for a long line.
        lapsing += [item for items in waiting.values() for item in items if item.lease < soon]
    if lapsing:
        dropping = set(disabled)
        gone += renew([item for item in lapsing if item not in dropping], settings)
    return hooks, set(gone) | set(disabled)


def hand_back(items: list) -> None:
    """Let go of claims at once, so any relay hands these deliveries to a worker still running."""
    try:
        with models.db.connection_context():
            delivery_states.hand_back(_pairs(items))
    except DATABASE_ERRORS as exc:
        log.warning("could not hand back %d waiting deliveries (%s): their claims will expire", len(items), exc)


__all__ = [
    "NoEngine",
    "claim",
    "claim_batch",
    "hand_back",
    "lease_for",
    "renew",
    "take",
    "take_batch",
    "tend",
]
