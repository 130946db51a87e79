"""The index of the deliveries waiting for the relay (models.webhooks: `delivery_waiting`).

The model is a frozen copy of this release's columns that the index reads, so the index this migration
makes stays what it made whatever the live model becomes. IF NOT EXISTS: a database whose tables an
unversioned `create_tables` made already has it, and is left as it is.
"""

import peewee
from playhouse.migrate import SchemaMigrator

PENDING = "pending"


class Frozen(peewee.Model):
    class Meta:
        legacy_table_names = False  # as models.BaseModel: delivery


class Delivery(Frozen):
    """The delivery table as the index reads it (created by 0001; not created here)."""

    id = peewee.AutoField()
    status = peewee.CharField(max_length=16)
    relayed = peewee.DateTimeField(null=True)


Delivery.add_index(
    Delivery.index(Delivery.id, name="delivery_waiting", where=Delivery.relayed.is_null() & (Delivery.status == PENDING))
)


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    # The table exists (0001): CREATE TABLE IF NOT EXISTS leaves it as it is, then the index is made as Peewee makes it.
    with database.bind_ctx([Delivery]):
        database.create_tables([Delivery], safe=True)
