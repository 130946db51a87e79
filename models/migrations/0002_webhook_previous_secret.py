"""Webhook secret rotation: the replaced secret keeps signing until previous_secret_expires.

Nullable, so the webhooks already there need no value. An `upgrade()` of a release before the
version table may have added them already: only what is missing is added.
"""

import peewee
from playhouse.migrate import SchemaMigrator

from models.migrations import add_missing_columns


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    add_missing_columns(
        migrator,
        database,
        "webhook",
        previous_secret=peewee.CharField(max_length=255, null=True),
        previous_secret_expires=peewee.DateTimeField(null=True),
    )
