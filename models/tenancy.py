"""Agencies, their API tokens and their risk profiles."""

import datetime
import hashlib
import secrets
from typing import Self

import peewee

from models import BaseModel, PublicModel, utcnow
from models.prepared import Prepared


class Agency(PublicModel):
    """An insurance agency: the unit of tenancy."""

    name = peewee.CharField(max_length=255)
    webhook_limit = peewee.IntegerField(default=10)


class Token(BaseModel):
    """An API token of an agency, stored only as its SHA-256 digest (and a short prefix to name it by)."""

    id = peewee.AutoField()  # what Peewee adds by itself, declared so that a type checker knows it
    agency = peewee.ForeignKeyField(Agency, backref="tokens", on_delete="CASCADE")
    digest = peewee.CharField(max_length=64, unique=True)
    created = peewee.DateTimeField(default=utcnow)
    # Added by migration 0003 (nullable: earlier tokens have no prefix and never expire); a change here needs a migration.
    prefix = peewee.CharField(max_length=16, null=True, index=True)
    expires = peewee.DateTimeField(null=True)
    revoked = peewee.DateTimeField(null=True)
    last_used = peewee.DateTimeField(null=True)

    PREFIX_LENGTH = 11  # "rk_" and 8 random characters: enough to tell an agency's tokens apart, useless to guess with

    @staticmethod
    def hash(token: str) -> str:
        """Return the stored digest of a token."""
        return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()

    @classmethod
    def issue(cls, agency: Agency, expires_in: float | None = None) -> str:
        """Create a token for an agency and return it; it is never stored in clear."""
        token = "rk_" + secrets.token_urlsafe(32)
        expires = utcnow() + datetime.timedelta(seconds=expires_in) if expires_in else None
        cls.create(agency=agency, digest=cls.hash(token), prefix=token[: cls.PREFIX_LENGTH], expires=expires)
        return token

    @classmethod
    def valid(cls, token: str) -> tuple[int, int, datetime.datetime | None] | None:
        """Return (id, agency id, expires) of a token that is neither revoked nor expired, or None."""
        return (
            cls.select(cls.id, cls.agency, cls.expires)
            .where((cls.digest == cls.hash(token)) & cls.revoked.is_null() & (cls.expires.is_null() | (cls.expires > utcnow())))
            .tuples()
            .first()
        )

    @classmethod
    def agency_of(cls, token: str) -> int | None:
        """Return the agency id of a valid token, or None."""
        row = cls.valid(token)
        return row[1] if row else None

    @classmethod
    def touch(cls, token_id: int) -> None:
        """Record that a token was used now."""
        cls.update(last_used=utcnow()).where(cls.id == token_id).execute()

    @classmethod
    def matching(cls, token_or_prefix: str) -> "peewee.ModelSelect[Self]":
        """Select the unrevoked tokens a full token or a prefix names."""
        if len(token_or_prefix) > cls.PREFIX_LENGTH:
            where = cls.digest == cls.hash(token_or_prefix)
        else:
            where = cls.prefix == token_or_prefix
        return cls.select().where(where & cls.revoked.is_null())


class Risk(PublicModel):
    """A commercial or personal risk profile of an agency."""

    OBJECT = "risk"

    agency = peewee.ForeignKeyField(Agency, backref="risks", on_delete="CASCADE")
    type = peewee.CharField(max_length=16)
    name = peewee.CharField(max_length=255, null=True)
    agency_id: int  # Peewee's accessor of the foreign key's value

    @classmethod
    def of_agency(cls, agency_id: int, risk_uuid: str) -> "Risk | None":
        """Return the agency's risk profile with this UUID, or None."""
        # Every request on risk data asks it (a new profile misses handlers.common's cache): its text is written once.
        text, values = _OF_AGENCY.bound(cls.uuid.db_value(risk_uuid), agency_id)
        return next(iter(cls.raw(text, *values)), None)


_OF_AGENCY = Prepared(lambda uuid, agency: Risk.select().where((Risk.uuid == uuid) & (Risk.agency == agency)))


class AppKey(BaseModel):
    """Server-side secrets shared by every process through the database."""

    id = peewee.AutoField()  # what Peewee adds by itself, declared so that a type checker knows it
    name = peewee.CharField(max_length=64, unique=True)
    value = peewee.CharField(max_length=255)

    @classmethod
    def get_or_make(cls, name: str) -> str:
        """Return the named secret, creating it once for all processes."""
        row = cls.get_or_none(cls.name == name)
        if row is None:
            try:
                cls.insert(name=name, value=secrets.token_hex(32)).on_conflict_ignore().execute()
            except peewee.IntegrityError:
                pass
            row = cls.get(cls.name == name)
        return row.value
