"""Idempotency keys (models.idempotency): a write's key per agency, its lease while it runs, the answer it committed.

The model is a frozen copy of this release's, so the table, its columns and its index names stay what
this migration made whatever the live model becomes. CREATE TABLE IF NOT EXISTS: a database whose
tables an unversioned `create_tables` made already has it, and is left as it is.
"""

import peewee
from playhouse.migrate import SchemaMigrator


class Frozen(peewee.Model):
    class Meta:
        legacy_table_names = False  # as models.BaseModel: idempotency_key, and indexes named after it


class Agency(Frozen):
    """The agency table as referenced (created by 0001; not created here)."""


class IdempotencyKey(Frozen):
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE", index=False)
    key = peewee.CharField(max_length=255)
    fingerprint = peewee.CharField(max_length=64)
    claim = peewee.CharField(max_length=32)
    lease = peewee.DateTimeField(null=True)
    status = peewee.IntegerField(null=True)
    headers = peewee.TextField(null=True)
    body = peewee.BlobField(null=True)
    created = peewee.DateTimeField()
    expires = peewee.DateTimeField(index=True)

    class Meta:
        indexes = ((("agency", "key"), True),)


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    with database.bind_ctx([Agency, IdempotencyKey]):
        database.create_tables([IdempotencyKey], safe=True)
