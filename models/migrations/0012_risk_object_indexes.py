"""The index of each numbered object's foreign key to its risk profile, dropped: `<table>_risk_id_number` leads with it.

Vehicles, premises, drivers and buildings are found in their profile through the unique index on (risk, number),
whose first column is the profile: the index Peewee gives the foreign key alone repeated it, and every insert and
every update of an object wrote an entry into both (their `updated` is indexed, so no update is HOT; issue 35).
Addresses keep theirs: they have no number. IF EXISTS: a database whose tables an unversioned `create_tables` made
with the models of this release lacks them.
"""

import peewee
from playhouse.migrate import SchemaMigrator

DROPPED = ("vehicle_risk_id", "premise_risk_id", "driver_risk_id", "building_risk_id")


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    for name in DROPPED:
        database.execute_sql(f'DROP INDEX IF EXISTS "{name}"')
