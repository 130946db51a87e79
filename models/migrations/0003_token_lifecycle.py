"""Token lifecycle: a prefix to name a token by (indexed: `token revoke PREFIX` looks it up), expiry,
revocation and last use.

Nullable: tokens issued before have no prefix (`token list` shows null; revoke them by the whole
token) and never expire. An `upgrade()` of a release before the version table may have added them
already: only what is missing is added.
"""

import peewee
from playhouse.migrate import SchemaMigrator

from models.migrations import add_missing_columns


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    add_missing_columns(
        migrator,
        database,
        "token",
        prefix=peewee.CharField(max_length=16, null=True, index=True),
        expires=peewee.DateTimeField(null=True),
        revoked=peewee.DateTimeField(null=True),
        last_used=peewee.DateTimeField(null=True),
    )
