"""The schema as of commit 4e3b5fc, the last one made by `models.upgrade()` alone (no version table).

The models are frozen copies of that release's, so this migration makes the same tables, columns and
index names whatever the live models become. On a database that release made it finds everything
there; on one an even older `upgrade()` made it creates the missing tables and, as that function did,
adds the missing nullable columns. Python-side defaults are left out: they are not in the schema.
"""

import peewee
from playhouse.migrate import SchemaMigrator

from models.migrations import add_missing_columns


class Frozen(peewee.Model):
    class Meta:
        legacy_table_names = False  # as models.BaseModel: app_key, and indexes named after it


class Public(Frozen):
    uuid = peewee.UUIDField(unique=True)
    created = peewee.DateTimeField(index=True)
    updated = peewee.DateTimeField(index=True)


class AppKey(Frozen):
    name = peewee.CharField(max_length=64, unique=True)
    value = peewee.CharField(max_length=255)


class Agency(Public):
    name = peewee.CharField(max_length=255)
    webhook_limit = peewee.IntegerField()


class Token(Frozen):
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE")
    digest = peewee.CharField(max_length=64, unique=True)
    created = peewee.DateTimeField()


class Risk(Public):
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE")
    type = peewee.CharField(max_length=16)
    name = peewee.CharField(max_length=255, null=True)


class InRisk(Public):
    risk = peewee.ForeignKeyField(Risk, backref="+", on_delete="CASCADE")


class Numbered(InRisk):
    number = peewee.IntegerField()

    class Meta:
        indexes = ((("risk", "number"), True),)


class Vehicle(Numbered):
    year = peewee.IntegerField(null=True)
    make = peewee.CharField(max_length=255, null=True)
    model = peewee.CharField(max_length=255, null=True)
    vin = peewee.CharField(max_length=17, null=True)


class Premise(Numbered):
    address = peewee.CharField(max_length=255, null=True)
    city = peewee.CharField(max_length=255, null=True)
    state = peewee.CharField(max_length=2, null=True)
    zip = peewee.CharField(max_length=10, null=True)


class Driver(Numbered):
    employee_number = peewee.IntegerField(null=True)
    first_name = peewee.CharField(max_length=255, null=True)
    middle_name = peewee.CharField(max_length=255, null=True)
    last_name = peewee.CharField(max_length=255, null=True)
    date_of_birth = peewee.DateField(null=True)
    hire_date = peewee.DateField(null=True)
    is_employee = peewee.BooleanField(null=True)
    is_contractor = peewee.BooleanField(null=True)
    license_number = peewee.CharField(max_length=255, null=True)
    license_state = peewee.CharField(max_length=2, null=True)
    license_expiration = peewee.DateField(null=True)
    notes = peewee.TextField(null=True)
    image = peewee.TextField(null=True)
    sex = peewee.CharField(max_length=32, null=True)
    marital_status = peewee.CharField(max_length=32, null=True)
    year_licensed = peewee.IntegerField(null=True)
    commercial_driver_since = peewee.DateField(null=True)
    percent_use = peewee.IntegerField(null=True)
    vehicle = peewee.ForeignKeyField(Vehicle, null=True, backref="+", on_delete="SET NULL")


class Address(InRisk):
    driver = peewee.ForeignKeyField(Driver, unique=True, backref="+", on_delete="CASCADE")
    address = peewee.CharField(max_length=255)
    address2 = peewee.CharField(max_length=255, null=True)
    city = peewee.CharField(max_length=255)
    state = peewee.CharField(max_length=2)
    zip = peewee.CharField(max_length=10)
    county = peewee.CharField(max_length=255, null=True)
    lat = peewee.DoubleField(null=True)
    lng = peewee.DoubleField(null=True)


class Building(Numbered):
    premise = peewee.ForeignKeyField(Premise, backref="+", on_delete="RESTRICT")


class Webhook(Public):
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE")
    type = peewee.CharField(max_length=16)
    description = peewee.TextField(null=True)
    url = peewee.CharField(max_length=2048)
    events = peewee.TextField()
    secret = peewee.CharField(max_length=255)
    disabled = peewee.DateTimeField(null=True)
    failures = peewee.IntegerField()


class Event(Frozen):
    uuid = peewee.UUIDField(unique=True)
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE")
    name = peewee.CharField(max_length=64)
    body = peewee.TextField()
    created = peewee.DateTimeField(index=True)


class Delivery(Frozen):
    uuid = peewee.UUIDField(unique=True)
    webhook = peewee.ForeignKeyField(Webhook, backref="+", on_delete="CASCADE")
    source = peewee.ForeignKeyField(Event, column_name="event_id", backref="+", on_delete="CASCADE")
    event = peewee.CharField(max_length=64)
    status = peewee.CharField(max_length=16)
    tries = peewee.IntegerField()
    next_attempt = peewee.DateTimeField(null=True)
    relayed = peewee.DateTimeField(null=True, index=True)
    generation = peewee.IntegerField()
    locked_until = peewee.DateTimeField(null=True)
    batch = peewee.CharField(max_length=64, null=True)
    created = peewee.DateTimeField()
    updated = peewee.DateTimeField()

    class Meta:
        indexes = ((("webhook", "created"), False), (("status", "next_attempt"), False))


class Attempt(Frozen):
    delivery = peewee.ForeignKeyField(Delivery, backref="+", on_delete="CASCADE")
    at = peewee.DateTimeField()
    status = peewee.IntegerField(null=True)
    error = peewee.TextField(null=True)
    duration_ms = peewee.IntegerField()


MODELS = [AppKey, Agency, Token, Risk, Vehicle, Premise, Driver, Address, Building, Webhook, Event, Delivery, Attempt]


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    with database.bind_ctx(MODELS):
        # CREATE TABLE / INDEX IF NOT EXISTS: what a database already has is left as it is.
        database.create_tables(MODELS, safe=True)
        for model in MODELS:
            nullable = {f.column_name: f for f in model._meta.sorted_fields if f.null}
            add_missing_columns(migrator, database, model._meta.table_name, **nullable)
