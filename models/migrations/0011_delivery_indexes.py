"""Two indexes of the delivery table that no statement reads, dropped: every delivery paid for them on each write.

`delivery_relayed` (0001) was the relay's until `delivery_waiting` (0005) took its polls, and the rescue's statement
reads `delivery_status_next_attempt`. `delivery_webhook_id`, the index Peewee gives a foreign key, repeats the first
column of `delivery_webhook_id_created`, which serves a webhook's list and the cascade of its deletion as well.
A delivery is written about three times (made, handed to a worker, settled) and its status and `relayed` change,
so no update is HOT: each wrote an entry into every index of the table, these two among them (issue 35).
IF EXISTS: a database whose tables an unversioned `create_tables` made with the models of this release lacks them.
"""

import peewee
from playhouse.migrate import SchemaMigrator

DROPPED = ("delivery_relayed", "delivery_webhook_id")


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    for name in DROPPED:
        database.execute_sql(f'DROP INDEX IF EXISTS "{name}"')
