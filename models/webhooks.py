"""Webhook subscriptions, the events that feed them, and their deliveries with every attempt."""

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import peewee

import spec
from models import BaseModel, PublicModel, utcnow
from models.prepared import Prepared
from models.tenancy import Agency

# The event names are the spec's (EventName); this one the service sends by itself.
PING = "webhook.ping"
# The type of a listen session's row (`riskapi listen`): never one of the spec's WebhookType, so the
# webhook operations never show or take it; its deliveries are forwarded by the CLI, not POSTed by a worker.
LISTEN = "listen"

# A delivery's statuses, in the spec's order (DeliveryStatus, the type of Delivery.data.status). The row stores
# four: FAILING is shown for a PENDING row whose round has made attempts (tries > 0): the last one failed and
# the next is due. Stored that way, the relay, claims and the waiting index know one waiting state, as before.
# SKIPPED: made while its webhook was disabled, never sent (written already relayed); recover sends it.
PENDING, FAILING, SUCCEEDED, FAILED, SKIPPED = spec.raw()["components"]["schemas"]["DeliveryStatus"]["enum"]


def pack_events(names: Iterable[str]) -> str:
    """Store event names as `,a,b,` so "subscribed to x" is one LIKE on the agency's few rows."""
    unique = list(dict.fromkeys(names))
    return "," + ",".join(unique) + ","


def unpack_events(packed: str) -> list[str]:
    """Return the stored event names in their order."""
    return [name for name in packed.split(",") if name]


# What an answer and the delivery log show instead of a custom header's value.
MASK = "***"


def pack_channels(names: Iterable[str] | None) -> str | None:
    """Store channels as `,a,b,` like event names; None (no channels) stays NULL."""
    return None if names is None else pack_events(names)


def unpack_channels(packed: str | None) -> list[str] | None:
    """Return the stored channels in their order; None when there are none."""
    return None if packed is None else unpack_events(packed)


def shares_channel(column: peewee.Field, names: Iterable[str]) -> peewee.ColumnBase:
    """Match rows whose packed channels hold any of these names, exactly (case and all).

    REPLACE, not LIKE: SQLite's LIKE ignores case and `_` is a wildcard in both databases; REPLACE
    compares bytes the same way on SQLite and PostgreSQL. A NULL column matches nothing.
    """
    clauses = [peewee.fn.REPLACE(column, f",{name},", "") != column for name in dict.fromkeys(names)]
    return _any(clauses) if clauses else peewee.SQL("1 = 0")


class Webhook(PublicModel):
    """A subscription of an agency: where to POST which events, signed with its secret."""

    OBJECT = "webhook"

    agency = peewee.ForeignKeyField(Agency, backref="webhooks", on_delete="CASCADE")
    type = peewee.CharField(max_length=16)
    description = peewee.TextField(null=True)
    url = peewee.CharField(max_length=2048)
    events = peewee.TextField()
    secret = peewee.CharField(max_length=255)
    # The secret rotate-secret replaced: it still signs webhook-signature (next to the current one)
    # until previous_secret_expires, fixed at rotation (RISKAPI_WEBHOOK_ROTATION_GRACE after it).
    # Added by migration 0002 (nullable, for the webhooks already there).
    previous_secret = peewee.CharField(max_length=255, null=True)
    previous_secret_expires = peewee.DateTimeField(null=True)
    disabled = peewee.DateTimeField(null=True)
    # Deliveries failed for good in a row; a success resets it, the limit disables the webhook.
    failures = peewee.IntegerField(default=0)
    # A listen session's end, pushed forward while its stream is held (api.listen_stream); null for
    # a subscription. Added by migration 0007.
    listen_expires = peewee.DateTimeField(null=True)
    # The channels it takes (pack_channels), or NULL: every event of its types. Added by migration 0008.
    channels = peewee.TextField(null=True)
    # Headers of its own sent with every delivery, as a JSON object {name: value}, or NULL. The values are
    # secrets: answers and the delivery log show them masked (MASK). Added by migration 0009.
    headers = peewee.TextField(null=True)
    agency_id: int  # Peewee's accessor of the foreign key's value

    @classmethod
    def subscription(cls) -> peewee.Expression:
        """Select subscriptions, not listen sessions: what the webhook operations show, change and count."""
        return cls.type != LISTEN

    def save(self, force_insert: bool = False, only: Any = None) -> Any:
        """Save the row; a new row, or one whose channels changed, files its channels (WebhookChannel)."""
        filing = self.id is None or force_insert or "channels" in {field.name for field in self.dirty_fields}
        saved = super().save(force_insert=force_insert, only=only)
        if filing:
            WebhookChannel.file(self.agency_id, {self.id: self.channels})
        return saved

    @classmethod
    def subscribed(
        cls, agency_id: int, event: str, channels: Iterable[str] = (), exclude: str | None = None
    ) -> list[tuple[int, bool, bool]]:
        """Return the agency's webhooks and live listen sessions subscribed to an event, as (id, is a session, is disabled).

        A disabled webhook is selected too (its delivery is written skipped, for recover); a disabled session is not;
        nor is the webhook `exclude` (a uuid: the one a webhook.disabled tells of).
        Svix's rule: a webhook with channels takes an event only when they share one; one without takes every event.
        The channels are looked up in WebhookChannel's index, so the webhooks an event does not reach are never read;
        the query is written once per shape (models.prepared): every write of risk data runs it.
        """
        names = [WebhookChannel.EVERY, *dict.fromkeys(channels)]
        escaped = event.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
        excluded = [] if exclude is None else [cls.uuid.db_value(exclude)]
        now = cls.listen_expires.db_value(utcnow())
        rows = _SUBSCRIBED.rows(agency_id, names, f"%,{escaped},%", now, excluded)
        return [(webhook_id, bool(session), bool(disabled)) for webhook_id, session, disabled in rows]


class WebhookChannel(BaseModel):
    """One channel of a webhook, a row a name, so that an event finds its webhooks through one index (issue 34).

    A webhook without channels takes every event of its types: it has one row named EVERY (the empty name, which
    the spec's pattern gives no channel), and every event's lookup asks for it. The webhook's `channels` column
    keeps the names in their order for answers; every write that sets it files these rows (`file`).
    """

    EVERY = ""

    # The agency leads the index: an event's lookup is (its agency, the names it carries and EVERY).
    agency = peewee.ForeignKeyField(Agency, on_delete="CASCADE", index=False)
    name = peewee.CharField(max_length=128)
    webhook = peewee.ForeignKeyField(Webhook, on_delete="CASCADE")

    class Meta:
        indexes = ((("agency", "name", "webhook"), True),)

    @classmethod
    def file(cls, agency_id: int, packed: Mapping[int, str | None]) -> None:
        """Replace the rows of these webhooks of one agency from their packed channels ({id: channels column})."""
        if not packed:
            return
        cls.delete().where(cls.webhook.in_(list(packed))).execute()
        rows = [
            {"agency": agency_id, "name": name, "webhook": webhook_id}
            for webhook_id, channels in packed.items()
            for name in dict.fromkeys(unpack_channels(channels) or [cls.EVERY])
        ]
        cls.insert_many(rows).execute()


class Event(BaseModel):
    """One event of an agency, with the exact body every delivery of it sends."""

    OBJECT = "event"

    id = peewee.AutoField()  # what Peewee adds by itself, declared so that a type checker knows it
    uuid = peewee.UUIDField(unique=True)
    agency = peewee.ForeignKeyField(Agency, on_delete="CASCADE")
    name = peewee.CharField(max_length=64)
    body = peewee.TextField()
    created = peewee.DateTimeField(index=True)
    channels = peewee.TextField(null=True)  # pack_channels; NULL: none (added by migration 0008)


class Delivery(BaseModel):
    """One event for one webhook; its uuid is the Service-Delivery header on every attempt."""

    OBJECT = "delivery"

    id = peewee.AutoField()  # what Peewee adds by itself, declared so that a type checker knows it
    uuid = peewee.UUIDField(unique=True)
    # Found through the index on (webhook, created) below, which leads with it (migration 0011).
    webhook = peewee.ForeignKeyField(Webhook, backref="deliveries", on_delete="CASCADE", index=False)
    stored_event = peewee.ForeignKeyField(Event, column_name="event_id", on_delete="CASCADE")  # what is sent
    event = peewee.CharField(max_length=64)  # its name (the spec's `event`), to filter without a join
    status = peewee.CharField(max_length=16, default=PENDING)
    tries = peewee.IntegerField(default=0)  # attempts in the current round (redeliver starts a new one)
    next_attempt = peewee.DateTimeField(null=True)
    # Set when the relay handed the delivery to RQ; null = waiting for the relay.
    relayed = peewee.DateTimeField(null=True)  # its waiting rows are found through `delivery_waiting` (below)
    # Bumped on every hand-over to RQ: only the job of the current generation may act.
    generation = peewee.IntegerField(default=0)
    # An attempt in flight holds the delivery until then; past it, the attempt is presumed dead.
    locked_until = peewee.DateTimeField(null=True)
    # The RQ job of the batch that carries the delivery's attempt; null = a job of its own
    # (jobs.queue.job_id). The relay's rescue needs it to tell whether that job is lost.
    batch = peewee.CharField(max_length=64, null=True)
    created = peewee.DateTimeField()
    updated = peewee.DateTimeField()

    class Meta:
        indexes = (
            (("webhook", "created"), False),
            (("status", "next_attempt"), False),
        )

    @classmethod
    def of_webhook(cls, webhook_id: int, delivery_uuid: str) -> "Delivery | None":
        """Return a webhook's delivery by its uuid; None when it has none (a malformed uuid included)."""
        try:
            uuid.UUID(delivery_uuid)
        except ValueError:
            return None
        return cls.get_or_none((cls.uuid == delivery_uuid) & (cls.webhook == webhook_id))

    @staticmethod
    def shown_status(stored: str, tries: int) -> str:
        """Return the status a delivery shows (DeliveryStatus) for its stored status and the attempts of its round."""
        return FAILING if stored == PENDING and tries > 0 else stored

    @classmethod
    def status_in(cls, shown: Iterable[str]) -> peewee.ColumnBase:
        """Match the deliveries that show any of these statuses."""
        waiting = cls.status == PENDING
        clauses = {PENDING: waiting & (cls.tries == 0), FAILING: waiting & (cls.tries > 0)}
        return _any([clauses.get(name, cls.status == name) for name in dict.fromkeys(shown)])

    @classmethod
    def last_response_in(cls, wanted: Iterable[str]) -> peewee.ColumnBase:
        """Match the deliveries whose last attempt was answered with any of these codes (`500`) or classes (`5xx`)."""
        last, later = Attempt.alias("last_attempt"), Attempt.alias("later_attempt")
        matches = []
        for code in dict.fromkeys(text.lower() for text in wanted):
            if code.endswith("xx"):
                matches.append(last.status.between(int(code[0]) * 100, int(code[0]) * 100 + 99))
            else:
                matches.append(last.status == int(code))
        newer = later.select(later.id).where((later.delivery == last.delivery) & (later.id > last.id))
        found = last.select(last.id).where((last.delivery == cls.id) & _any(matches) & ~peewee.fn.EXISTS(newer))
        return peewee.fn.EXISTS(found)


# The deliveries waiting for the relay (jobs.relay), a few among every delivery kept: its polls read this
# small index instead of the whole index on `relayed`, full of the entries updates leave dead there.
# The status is inlined, as an index's predicate is: PostgreSQL uses the index for a query whose
# predicate implies it, which a value bound as a parameter (psycopg 3's, prepared) never does in a generic plan.
Delivery.add_index(
    Delivery.index(Delivery.id, name="delivery_waiting", where=Delivery.relayed.is_null() & (Delivery.status == PENDING))
)


class Attempt(BaseModel):
    """One HTTP attempt of a delivery."""

    id = peewee.AutoField()  # what Peewee adds by itself, declared so that a type checker knows it
    delivery = peewee.ForeignKeyField(Delivery, backref="attempts", on_delete="CASCADE")
    at = peewee.DateTimeField()
    status = peewee.IntegerField(null=True)
    error = peewee.TextField(null=True)
    duration_ms = peewee.IntegerField()
    # JSON of what went and what came back (added by migration 0006; null in the attempts made before it):
    # the request's headers as sent, and the answer's {headers, body, body_truncated} (null: no complete answer).
    request_headers = peewee.TextField(null=True)
    response = peewee.TextField(null=True)


def _any(clauses: Sequence[peewee.ColumnBase]) -> peewee.ColumnBase:
    result = clauses[0]
    for clause in clauses[1:]:
        result |= clause
    return result


def _subscribed(agency: Any, names: list[Any], pattern: Any, now: Any, exclude: list[Any]) -> "peewee.ModelSelect[Webhook]":
    """Build Webhook.subscribed's query from its slots."""
    channel = WebhookChannel
    reached = channel.select(channel.webhook).where((channel.agency == agency) & channel.name.in_(names))
    session = Webhook.listen_expires.is_null(False)
    live = ~session | ((Webhook.listen_expires > now) & Webhook.disabled.is_null())
    # contains() as Peewee writes it (ILIKE, `\` escaping `_` and `%`), with the pattern a slot
    events = peewee.Expression(Webhook.events, peewee.OP.ILIKE, peewee.NodeList((pattern, peewee.SQL("ESCAPE '\\'"))))
    subscribed = Webhook.id.in_(reached) & events & live
    if exclude:
        subscribed &= Webhook.uuid.not_in(exclude)
    return Webhook.select(Webhook.id, session, Webhook.disabled.is_null(False)).where(subscribed)


_SUBSCRIBED = Prepared(_subscribed)

WEBHOOK_MODELS = [Webhook, WebhookChannel, Event, Delivery, Attempt]
