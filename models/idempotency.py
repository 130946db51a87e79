"""Idempotency keys: one row per agency and key, held by the request running it, then the answer its write committed.

A row is running while `status` is null: `claim` names the request that holds it until `lease`. The
request's write stores its answer (`complete`) in the write's own transaction, so a row with a status
is exactly a write that committed. Every process and host shares the rows (the database, not memory).
"""

import datetime
import secrets
import zlib

import orjson
import peewee

from models import BaseModel, tuples, utcnow
from models.tenancy import Agency


class IdempotencyKey(BaseModel):
    """The Idempotency-Key of an agency's write: running under a lease, then the answer that write committed."""

    id = peewee.AutoField()  # what Peewee adds by itself, declared so that a type checker knows it
    # The unique (agency, key) index serves the agency's lookups: no index of its own.
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE", index=False)
    key = peewee.CharField(max_length=255)
    fingerprint = peewee.CharField(max_length=64)  # SHA-256 of the method, path, query and canonical body
    claim = peewee.CharField(max_length=32)  # the request holding the key, or that stored its answer
    lease = peewee.DateTimeField(null=True)  # a running request's: past it, a retry may take the key over
    status = peewee.IntegerField(null=True)  # null while running
    headers = peewee.TextField(null=True)  # the answer's own headers (JSON), Content-Type among them
    body = peewee.BlobField(null=True)  # zlib-compressed
    created = peewee.DateTimeField(default=utcnow)
    expires = peewee.DateTimeField(index=True)  # past it the key is unknown again, and the retention job purges it

    class Meta:
        indexes = ((("agency", "key"), True),)

    @classmethod
    def find(cls, agency_id: int, key: str) -> "IdempotencyKey | None":
        """Return the agency's row of a key, expired or not, or None."""
        return cls.get_or_none((cls.agency == agency_id) & (cls.key == key))

    @classmethod
    def claim_new(cls, agency_id: int, key: str, fingerprint: str, lease: float, ttl: float) -> tuple[int, str] | None:
        """Insert a running row for a key the agency has no row of; return (its id, the claim), or None if another won."""
        now, claim = utcnow(), secrets.token_hex(16)
        row = {"fingerprint": fingerprint, "claim": claim, "lease": now + _seconds(lease), "expires": now + _seconds(ttl)}
        inserted = cls.insert(agency=agency_id, key=key, created=now, **row).on_conflict_ignore().returning(cls.id)
        ids = [row_id for (row_id,) in tuples(inserted)]  # none when the key's row was there (DO NOTHING)
        return (ids[0], claim) if ids else None

    def take_over(self, fingerprint: str, lease: float, ttl: float) -> tuple[int, str] | None:
        """Take this row for a new run (expired, or its request died before committing); return (id, claim), or None if lost."""
        now, claim = utcnow(), secrets.token_hex(16)
        cls = type(self)
        changed = (
            cls.update(
                fingerprint=fingerprint,
                claim=claim,
                lease=now + _seconds(lease),
                status=None,
                headers=None,
                body=None,
                created=now,
                expires=now + _seconds(ttl),
            )
            .where((cls.id == self.id) & (cls.claim == self.claim))
            .execute()
        )
        return (self.id, claim) if changed else None

    @classmethod
    def complete(cls, row_id: int, claim: str, status: int, headers: dict[str, str], body: bytes) -> bool:
        """Store the answer of the claim's run (inside its write's transaction); False if the claim was lost to a retry."""
        # Compressed here (zlib's fastest level: JSON shrinks ~8x in ~1 ms per 100 KB): the database then
        # writes, logs and reads a tenth of it; PostgreSQL's own TOAST compression is several times slower.
        stored = {"status": status, "headers": orjson.dumps(headers).decode(), "body": zlib.compress(body, 1), "lease": None}
        return bool(cls.update(**stored).where((cls.id == row_id) & (cls.claim == claim) & cls.status.is_null()).execute())

    @classmethod
    def release(cls, row_id: int, claim: str) -> None:
        """Forget a claim whose run wrote nothing, so the key can be sent again."""
        cls.delete().where((cls.id == row_id) & (cls.claim == claim) & cls.status.is_null()).execute()

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        """Return the stored (status, headers, body)."""
        return self.status or 0, orjson.loads(self.headers or "{}"), zlib.decompress(bytes(self.body or b""))

    @classmethod
    def purge_expired(cls, now: datetime.datetime, batch: int) -> int:
        """Delete up to batch rows expired before now; return how many."""
        ids = [row_id for (row_id,) in tuples(cls.select(cls.id).where(cls.expires < now).limit(batch))]
        return cls.delete().where(cls.id.in_(ids)).execute() if ids else 0


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)
