"""A webhook's own headers, sent with every delivery: a JSON object, NULL for none (every webhook already there)."""

import peewee
from playhouse.migrate import SchemaMigrator

from models.migrations import add_missing_columns


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    add_missing_columns(migrator, database, "webhook", headers=peewee.TextField(null=True))
