"""A delivery's states and transitions: every write of a delivery's state columns is made here.

The state columns (STATE): status (pending, succeeded, failed, skipped; `failing` is a pending row with tries > 0,
Delivery.shown_status), tries (attempts this round), next_attempt, relayed (handed to RQ), generation
(bumped at every hand-over: only its job may act), locked_until (a claim's lease), batch (the RQ job
carrying it). Callers select (and lock) the rows; these functions write, keeping each transition's guard.

    transition        from (guard)                            to                                     by
    create            -                                       pending, tries 0, generation 0         outbox
                                                              | skipped (its webhook is disabled)
    relay             pending, unrelayed (caller's lock)      relayed, generation + 1, batch         relay
    unrelay           relayed by this pass                    unrelayed (Redis refused the jobs)     relay
    rescue            pending, generation, claim lapsed       unrelayed, unclaimed                   relay
    claim             pending, generation, unclaimed          claimed until a lease                  claims
    claim_many        pending, generations, unclaimed         claimed until a lease                  claims
    renew             pending, generation, claimed            claimed until a later lease            claims
    hand_back         pending, generation                     unrelayed, unclaimed                   claims
    fail_unattempted  pending, generation                     failed (its webhook was disabled)      claims
    settle            generation                              succeeded | pending, next_attempt      outcomes
                                                              | failed; tries + 1 (as decide says)
    succeed_many      generations                             succeeded, tries + 1                   outcomes
    requeue           any selected (redeliver, recover:       pending, a new round: tries 0          handlers
                      failed or skipped)
    listen_claim      a session's, pending, unclaimed         claimed until a lease                  listen
    listen_settle     a session's                             succeeded | failed, tries + 1          listen
    abandon           pending, selected                       failed, unattempted (session ended)    listen, bench
"""

import contextvars
import datetime

import peewee

import models
from models import inserts, utcnow
from models.prepared import Prepared, padded
from models.webhooks import FAILED, PENDING, SKIPPED, SUCCEEDED, Delivery

STATE = ("status", "tries", "next_attempt", "relayed", "generation", "locked_until", "batch")

_CHUNK = 500  # rows per statement: within SQLite's and PostgreSQL's limits on bound parameters
# The columns each new row sets (the others stay NULL), as Peewee's insert_many of these rows wrote them.
_DELIVERY = ("uuid", "webhook", "stored_event", "event", "status", "tries", "next_attempt", "generation", "created", "updated")
_SESSION_DELIVERY = (*_DELIVERY, "relayed")

Pairs = list[tuple[int, int]]  # (delivery id, generation)

# Set when this context's writes left deliveries waiting for a relay (made pending, or sent again): an API request
# wakes a relay only then (api.app), instead of pushing a token to Redis after every write.
_LEFT_WAITING: contextvars.ContextVar[bool] = contextvars.ContextVar("left_waiting", default=False)


def left_waiting() -> bool:
    """Tell whether this context's writes left deliveries waiting for a relay (an API request's context is its own)."""
    return _LEFT_WAITING.get()


def _pairs(pairs: Pairs) -> peewee.Expression:
    # The ids alone too: SQLite answers a list of (id, generation) rows by scanning the whole table.
    ids = Delivery.id.in_([delivery_id for delivery_id, _ in pairs])
    return ids & peewee.Tuple(Delivery.id, Delivery.generation).in_(pairs)


def _unclaimed(now: datetime.datetime) -> peewee.Expression:
    return Delivery.locked_until.is_null() | (Delivery.locked_until < now)


_NULL, _ONE, _EMPTY = peewee.SQL("NULL"), peewee.SQL("1"), peewee.SQL("''")  # written into the text, not bound
# A write to deliveries named by id tests their status on the rows its key finds, in a form no index answers:
# PostgreSQL's statistics, taken when hardly any delivery was pending (a table of delivered ones, a backlog grown
# since the last ANALYZE), make `status = 'pending'` look rarer than the ids, and the planner then walks the
# status index through every pending delivery (and the dead entries of earlier ones) for each claim, renewal or
# hand-back. A claim of 8 beside 4,240 pending: 1.3 ms and 493 buffers that way, 0.1 ms and 65 by the key.
_STATUS = Delivery.status.concat(_EMPTY)
_PENDING = _STATUS == PENDING
# The worker's writes of every delivery (relay, claim, success), each a text written once per size (models.prepared):
# Peewee wrote them anew, value by value, for every batch (8 % of a worker's CPU in the soak). The lists of ids and
# generations come padded to a power of two (`_listed`).
_RELAY = Prepared(
    lambda now, name, ids: Delivery.update(relayed=now, generation=Delivery.generation + _ONE, batch=name).where(
        Delivery.id.in_(ids)
    )
)
_CLAIM = Prepared(
    lambda lease, now, pending, ids, generations: Delivery.update(locked_until=lease, updated=now).where(
        _pairs(list(zip(ids, generations, strict=True))) & (_STATUS == pending) & _unclaimed(now)
    )
)
_SUCCEED = Prepared(
    lambda succeeded, tries, now, ids, generations: Delivery.update(
        status=succeeded, tries=tries, next_attempt=_NULL, locked_until=_NULL, batch=_NULL, updated=now
    ).where(_pairs(list(zip(ids, generations, strict=True))))
)


def _listed(pairs: Pairs) -> tuple[list, list]:
    """Return the ids and generations of pairs, each list padded to a power of two (models.prepared.padded)."""
    return padded([delivery_id for delivery_id, _ in pairs]), padded([generation for _, generation in pairs])


def _moment(moment: datetime.datetime) -> object:
    return Delivery.updated.db_value(moment)


def create(
    rows: list[dict], sessions: set[int], now: datetime.datetime, skipped: set[int] | frozenset[int] = frozenset()
) -> None:
    """Insert new deliveries (rows of uuid, webhook, stored_event, event, created, updated), each made pending,
    or skipped for the webhooks in `skipped` (disabled: kept for recover, never sent).

    A listen session's and a skipped one are written already relayed, with no next attempt: no relay or worker
    takes them."""
    for row in rows:
        row.update(status=SKIPPED if row["webhook"] in skipped else PENDING, tries=0, next_attempt=now, generation=0)
    unsent = sessions | skipped
    theirs = [{**row, "relayed": now, "next_attempt": None} for row in rows if row["webhook"] in unsent]
    if theirs:
        inserts.insert(Delivery, _SESSION_DELIVERY, theirs, copy=True)
    sent = [row for row in rows if row["webhook"] not in unsent] if unsent else rows
    if sent:
        inserts.insert(Delivery, _DELIVERY, sent, copy=True)
        _LEFT_WAITING.set(True)


def relay(ids: list[int], batches: list[tuple[str, list[int]]], now: datetime.datetime) -> None:
    """Hand deliveries (locked by the caller) to RQ: a new generation, and the batch job carrying each, if named."""
    # Each row written once: an update of `relayed` (indexed) is never HOT, and a second one, of the batch, doubled
    # the row versions PostgreSQL writes and vacuums for every delivery.
    left = dict.fromkeys(ids)
    for name, group in [*batches, (None, ids)]:
        mine = [delivery_id for delivery_id in group if delivery_id in left]
        for delivery_id in mine:
            del left[delivery_id]
        if mine:
            _RELAY.changed(_moment(now), name, padded(mine))


def unrelay(ids: list[int], relayed: datetime.datetime) -> None:
    """Take back the deliveries a pass relayed at `relayed` (Redis refused their jobs): the next pass tries again."""
    Delivery.update(relayed=None).where(Delivery.id.in_(ids) & (Delivery.relayed == relayed)).execute()


def rescue(lost: Pairs, now: datetime.datetime) -> None:
    """Hand back pending deliveries whose job is lost, unless claimed since they were found."""
    with models.atomic():
        for delivery_id, generation in lost:
            mine = (Delivery.id == delivery_id) & (Delivery.generation == generation) & _PENDING
            Delivery.update(relayed=None, locked_until=None).where(mine & _unclaimed(now)).execute()


def claim(delivery_id: int, generation: int, now: datetime.datetime, lease: datetime.datetime) -> bool:
    """Claim a pending delivery of this generation until `lease`, if no one holds it; False if someone does."""
    mine = (Delivery.id == delivery_id) & (Delivery.generation == generation) & _PENDING
    return bool(Delivery.update(locked_until=lease, updated=now).where(mine & _unclaimed(now)).execute())


def claim_many(pairs: Pairs, now: datetime.datetime, lease: datetime.datetime) -> set[int] | None:
    """Claim pending deliveries of these generations until `lease`; return the ids claimed, or None for all of them."""
    with models.atomic():
        if _CLAIM.changed(_moment(lease), _moment(now), PENDING, *_listed(pairs)) == len(pairs):
            return None
        # Someone else's claim in between: only those holding this very lease are ours.
        ids = Delivery.id.in_([delivery_id for delivery_id, _ in pairs])
        return {i for (i,) in models.tuples(Delivery.select(Delivery.id).where(ids & (Delivery.locked_until == lease)))}


def renew(pairs: Pairs, lease: datetime.datetime) -> set[int]:
    """Extend the claims on pending deliveries of these generations until `lease`; return the ids no longer claimed."""
    lost: set[int] = set()
    for start in range(0, len(pairs), _CHUNK):
        chunk = pairs[start : start + _CHUNK]
        mine = _pairs(chunk) & _PENDING & Delivery.locked_until.is_null(False)
        if Delivery.update(locked_until=lease).where(mine).execute() < len(chunk):
            still = {row for (row,) in models.tuples(Delivery.select(Delivery.id).where(mine))}
            lost |= {delivery_id for delivery_id, _ in chunk if delivery_id not in still}
    return lost


def hand_back(pairs: Pairs) -> None:
    """Let go of claims on pending deliveries of these generations, and mark them waiting for the relay."""
    for start in range(0, len(pairs), _CHUNK):
        mine = _pairs(pairs[start : start + _CHUNK]) & _PENDING
        Delivery.update(relayed=None, locked_until=None).where(mine).execute()


def fail_unattempted(pairs: Pairs) -> None:
    """Fail pending deliveries of these generations with no attempt (their webhook was disabled), in one transaction."""
    now = utcnow()
    with models.atomic():
        for start in range(0, len(pairs), _CHUNK):
            mine = _pairs(pairs[start : start + _CHUNK]) & _PENDING
            Delivery.update(status=FAILED, next_attempt=None, locked_until=None, updated=now).where(mine).execute()


def settle(
    delivery_id: int,
    generation: int,
    status: str,
    tries: int,
    next_attempt: datetime.datetime | None,
    next_job: str | None,
    now: datetime.datetime,
) -> int:
    """Write a delivery's state after attempt `tries` (jobs.outcomes.decide says which), if still of this generation;
    return the rows changed. A pending one waits for `next_job` (None: its own job, jobs.queue)."""
    fields = {"status": status, "tries": tries, "next_attempt": next_attempt, "locked_until": None}
    update = Delivery.update(**fields, batch=next_job if status == PENDING else None, updated=now)
    return update.where((Delivery.id == delivery_id) & (Delivery.generation == generation)).execute()


def succeed_many(by_tries: dict[int, Pairs], now: datetime.datetime) -> set[int]:
    """Settle as succeeded the deliveries of these generations, by their tries, in one update each; return the ids changed."""
    changed: set[int] = set()
    for tries, pairs in by_tries.items():
        for start in range(0, len(pairs), _CHUNK):
            chunk = pairs[start : start + _CHUNK]
            if _SUCCEED.changed(SUCCEEDED, tries, _moment(now), *_listed(chunk)) == len(chunk):
                changed.update(delivery_id for delivery_id, _ in chunk)
            else:  # some superseded: the generation guard is all that decided, and a generation only grows
                changed.update(row for (row,) in models.tuples(Delivery.select(Delivery.id).where(_pairs(chunk))))
    return changed


def requeue(where: peewee.Expression) -> int:
    """Start a new round of attempts (same uuid, same event) for the deliveries selected; return how many."""
    now = utcnow()
    changes = {"status": PENDING, "tries": 0, "next_attempt": now, "relayed": None, "locked_until": None, "updated": now}
    changed = Delivery.update(**changes).where(where).execute()
    if changed:
        _LEFT_WAITING.set(True)
    return changed


def listen_claim(session_id: int, delivery_id: int, now: datetime.datetime, lease: datetime.datetime) -> bool:
    """Claim a listen session's pending delivery for its stream until `lease`; False if another stream holds it."""
    mine = (Delivery.id == delivery_id) & (Delivery.webhook == session_id) & _PENDING
    return bool(Delivery.update(locked_until=lease).where(mine & _unclaimed(now)).execute())


def listen_settle(delivery_id: int, status: str, now: datetime.datetime) -> None:
    """Settle a listen session's delivery as its forwarded attempt came out (succeeded or failed)."""
    fields = {"status": status, "tries": Delivery.tries + 1, "next_attempt": None, "locked_until": None, "updated": now}
    Delivery.update(**fields).where(Delivery.id == delivery_id).execute()


def abandon(where: peewee.Expression, now: datetime.datetime) -> int:
    """Fail the pending deliveries selected with no attempt (a listen session ended, a bench starts); return how many."""
    unsent = where & (Delivery.status == PENDING)
    return Delivery.update(status=FAILED, locked_until=None, updated=now).where(unsent).execute()
