"""An attempt's exchange: the request's headers as sent and the receiver's answer (headers, kept body), as JSON.

Nullable, so the attempts already logged need no value (they show `request_headers` and `response` null).
"""

import peewee
from playhouse.migrate import SchemaMigrator

from models.migrations import add_missing_columns


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    add_missing_columns(
        migrator,
        database,
        "attempt",
        request_headers=peewee.TextField(null=True),
        response=peewee.TextField(null=True),
    )
