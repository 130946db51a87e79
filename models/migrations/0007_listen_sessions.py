"""Listen sessions (`riskapi listen`): a webhook row of type `listen` lives until listen_expires.

Nullable: every webhook already there is a subscription, which never expires. An `upgrade()` of an
unversioned release cannot have added it, but only what is missing is added, as in every migration.
"""

import peewee
from playhouse.migrate import SchemaMigrator

from models.migrations import add_missing_columns


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    add_missing_columns(migrator, database, "webhook", listen_expires=peewee.DateTimeField(null=True))
