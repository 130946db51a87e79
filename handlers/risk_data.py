"""Risk data of every kind: each kind's list and bulk create, and the bulk update and delete of any kind."""

import functools

from handlers import common
from models.risk_data import Building, Driver, Premise, Vehicle
from riskapi.services import bulk_write as writes
from riskapi.services import render
from riskapi.services import risk_data_writes as risk_writes
from riskapi.services.messages import message


def endpoints(model) -> tuple:
    """Return the list and create operations of one kind of risk data (the spec gives each kind its own path)."""

    def list_kind(agency_id, risk, per_page, cursor=None, filter_=None, sort=None, include=None):
        profile = common.risk_of(agency_id, risk)
        rows = render.select(model).where(model.risk == profile.id)
        shown = functools.partial(render.envelopes, model, include=include)
        return common.list_page(model, rows, profile.id, per_page, cursor, filter_, sort, shown)

    def create_kind(agency_id, risk, include=None):
        return common.bulk_write(201, risk_writes.Create(model, common.risk_of(agency_id, risk), include))

    list_kind.__doc__ = f"List {model.OBJECT}s."
    create_kind.__doc__ = f"Create {model.OBJECT}s in bulk, atomically."
    return list_kind, create_kind


def update_risk_data(agency_id, risk):
    """Update risk data."""
    return common.bulk_write(200, risk_writes.Update(common.risk_of(agency_id, risk)))


def delete_risk_data(agency_id, risk):
    """Delete risk data."""
    return common.bulk_write(200, risk_writes.Delete(common.risk_of(agency_id, risk)))


def override_risk_data(agency_id, risk):
    """Refuse a POST that names no method to stand for."""
    common.risk_of(agency_id, risk)
    _, errors = common.body()
    if not errors:
        errors.add("_method", message("required", "_method"))
    writes.fail_if(errors)


# Each kind's list and create, under the names of the spec's operationIds (listDrivers -> list_drivers).
list_drivers, create_drivers = endpoints(Driver)
list_vehicles, create_vehicles = endpoints(Vehicle)
list_premises, create_premises = endpoints(Premise)
list_buildings, create_buildings = endpoints(Building)
