"""Risk data: drivers and their addresses, vehicles, premises and buildings."""

import functools
from collections.abc import Iterable
from typing import Any

import peewee

from models import PublicModel, locking, locks_rows, together, tuples
from models.prepared import Prepared
from models.tenancy import Risk


class InRisk(PublicModel):
    """An object that belongs to one risk profile."""

    OBJECT = ""
    # Foreign keys shown to clients as the related object's UUID: {field: model}.
    REFERENCES: dict[str, type["RiskObject"]] = {}

    risk = peewee.ForeignKeyField(Risk, on_delete="CASCADE")

    @classmethod
    def ids_by_uuid(cls, risk_id: int, uuids: Iterable[Any], lock: bool = False) -> dict[str, int]:
        """Map the given UUIDs that exist in the risk profile to their ids; lock their rows when asked.

        Locked rows (models.locking) cannot be deleted or changed by a concurrent request before this
        transaction ends, so what was checked is what is written.
        """
        wanted = {str(u) for u in uuids}
        if not wanted:
            return {}
        query = cls.select(cls.uuid, cls.id).where((cls.risk == risk_id) & (cls.uuid.in_(list(wanted))))
        if lock:
            query = locking(query.order_by(cls.id))
        return {str(u): i for u, i in tuples(query)}

    @classmethod
    def write(cls, object_id: int, row: dict[str, Any]) -> None:
        """Set these columns of one row (the UPDATE's text written once per set of columns)."""
        fields, names = cls._meta.fields, tuple(sorted(row))
        _updating(cls, names).run(*(fields[name].db_value(row[name]) for name in names), object_id)


# A body sets any of a kind's columns: the sets most used keep their texts.
@functools.lru_cache(maxsize=256)
def _updating(model: type[InRisk], names: tuple[str, ...]) -> Prepared:
    fields = [model._meta.fields[name] for name in names]
    return Prepared(lambda *slots: model.update(dict(zip(fields, slots, strict=False))).where(model.id == slots[-1]))


class RiskObject(InRisk):
    """An object of a risk profile with a number unique within it."""

    number = peewee.IntegerField()

    @classmethod
    def ids_by_number(cls, risk_id: int, numbers: Iterable[int]) -> dict[int, int]:
        """Map the given numbers that exist in the risk profile to their ids."""
        wanted = set(numbers)
        if not wanted:
            return {}
        query = cls.select(cls.number, cls.id).where((cls.risk == risk_id) & (cls.number.in_(list(wanted))))
        return dict(tuples(query))

    @classmethod
    def next_number(cls, risk_id: int) -> int:
        """Return the highest number in the risk profile plus one, holding the profile's numbering until commit.

        On PostgreSQL concurrent creates in one profile would all read the same maximum, and all but
        one fail on the unique number: the risk profile's row, locked first, makes them take turns.
        (SQLite's write transactions already do; a dry-run takes no turn: models.locking.)
        """
        highest_number = _highest_number(cls)
        if not locks_rows():  # elsewhere the lock would hold nothing: no statement is sent for it
            ((highest,),) = highest_number.rows(risk_id)
        else:
            # One round trip (models.together): the highest number is read after the lock is granted, with a snapshot
            # of its own, so it counts what the lock's last holder committed.
            with together():
                _LOCK_PROFILE.run(risk_id)
                reading = highest_number.run(risk_id)
            ((highest,),) = reading.fetchall()
        return (highest or 0) + 1


# Both statements of every create's numbering, written once (models.prepared): Peewee wrote them for each request.
_LOCK_PROFILE = Prepared(lambda risk: Risk.select(Risk.id).where(Risk.id == risk).for_update())


@functools.cache
def _highest_number(model: type[RiskObject]) -> Prepared:
    return Prepared(lambda risk: model.select(peewee.fn.MAX(model.number)).where(model.risk == risk))


class Vehicle(RiskObject):
    """A vehicle of a risk profile."""

    OBJECT = "vehicle"

    year = peewee.IntegerField(null=True)
    make = peewee.CharField(max_length=255, null=True)
    model = peewee.CharField(max_length=255, null=True)
    vin = peewee.CharField(max_length=17, null=True)

    class Meta:
        indexes = ((("risk", "number"), True),)


class Premise(RiskObject):
    """A premise (location) of a risk profile."""

    OBJECT = "premise"

    address = peewee.CharField(max_length=255, null=True)
    city = peewee.CharField(max_length=255, null=True)
    state = peewee.CharField(max_length=2, null=True)
    zip = peewee.CharField(max_length=10, null=True)

    class Meta:
        indexes = ((("risk", "number"), True),)


class Driver(RiskObject):
    """A driver of a risk profile."""

    OBJECT = "driver"
    REFERENCES = {"vehicle": Vehicle}

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
    vehicle = peewee.ForeignKeyField(Vehicle, null=True, on_delete="SET NULL")

    class Meta:
        indexes = ((("risk", "number"), True),)


class Address(InRisk):
    """The address of a driver (at most one)."""

    OBJECT = "address"

    driver = peewee.ForeignKeyField(Driver, unique=True, backref="addresses", on_delete="CASCADE")
    address = peewee.CharField(max_length=255)
    address2 = peewee.CharField(max_length=255, null=True)
    city = peewee.CharField(max_length=255)
    state = peewee.CharField(max_length=2)
    zip = peewee.CharField(max_length=10)
    county = peewee.CharField(max_length=255, null=True)
    lat = peewee.DoubleField(null=True)
    lng = peewee.DoubleField(null=True)


class Building(RiskObject):
    """A building on a premise of a risk profile."""

    OBJECT = "building"
    REFERENCES = {"premise": Premise}

    premise = peewee.ForeignKeyField(Premise, backref="buildings", on_delete="RESTRICT")

    class Meta:
        indexes = ((("risk", "number"), True),)


KINDS: dict[str, type[InRisk]] = {model.OBJECT: model for model in (Driver, Address, Vehicle, Premise, Building)}


# The unique index on (risk, number) leads with the profile, so the foreign key's own index on it alone repeated it,
# and every insert and every update of an object (its `updated` is indexed: no update is HOT) wrote into both.
# Set before any table is made, so that `create_tables` makes what the migrations make (migration 0012).
for _numbered in (Vehicle, Premise, Driver, Building):
    _numbered.risk.index = False
