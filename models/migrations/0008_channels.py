"""Channels: a webhook's (NULL: every event of its types) and an event's (NULL: none), packed `,a,b,`.

Nullable: the webhooks and events already there have none, which keeps what they received and carried.
"""

import peewee
from playhouse.migrate import SchemaMigrator

from models.migrations import add_missing_columns


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    add_missing_columns(migrator, database, "webhook", channels=peewee.TextField(null=True))
    add_missing_columns(migrator, database, "event", channels=peewee.TextField(null=True))
