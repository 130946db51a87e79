"""Agencies, their API tokens and their risk profiles."""

import hashlib
import secrets

import peewee

from models import BaseModel, PublicModel, utcnow


class Agency(PublicModel):
    """An insurance agency: the unit of tenancy."""

    name = peewee.CharField(max_length=255)
    webhook_limit = peewee.IntegerField(default=10)


class Token(BaseModel):
    """An API token of an agency, stored only as its SHA-256 digest."""

    agency = peewee.ForeignKeyField(Agency, backref="tokens", on_delete="CASCADE")
    digest = peewee.CharField(max_length=64, unique=True)
    created = peewee.DateTimeField(default=utcnow)

    @staticmethod
    def hash(token: str) -> str:
        """Return the stored digest of a token."""
        return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()

    @classmethod
    def issue(cls, agency: Agency) -> str:
        """Create a token for an agency and return it; it is never stored in clear."""
        token = "rk_" + secrets.token_urlsafe(32)
        cls.create(agency=agency, digest=cls.hash(token))
        return token

    @classmethod
    def agency_of(cls, token: str):
        """Return the agency id of a token, or None."""
        row = cls.select(cls.agency).where(cls.digest == cls.hash(token)).tuples().first()
        return row[0] if row else None


class Risk(PublicModel):
    """A commercial or personal risk profile of an agency."""

    agency = peewee.ForeignKeyField(Agency, backref="risks", on_delete="CASCADE")
    type = peewee.CharField(max_length=16)
    name = peewee.CharField(max_length=255, null=True)

    @classmethod
    def of_agency(cls, agency_id: int, risk_uuid: str):
        """Return the agency's risk profile with this UUID, or None."""
        return cls.get_or_none((cls.uuid == risk_uuid) & (cls.agency == agency_id))


class AppKey(BaseModel):
    """Server-side secrets shared by every process through the database."""

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
