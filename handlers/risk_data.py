"""Risk data of every kind: each kind's list and bulk create, and the bulk update and delete of any kind."""

import functools

from handlers import common
from models.risk_data import Building, Driver, Premise, Vehicle
from riskapi.services import bulk_write as writes
from riskapi.services import render
from riskapi.services import risk_data_writes as risk_writes
from riskapi.services.messages import message


def _list(model, agency_id, risk, per_page, cursor, filter_, sort, include):
    """Answer one page of a risk profile's rows of one kind (the one list pipeline: handlers.common.list_page)."""
    profile = common.risk_of(agency_id, risk)
    rows = render.select(model).where(model.risk == profile.id)
    shown = functools.partial(render.envelopes, model, include=include)
    return common.list_page(model, rows, profile.id, per_page, cursor, filter_, sort, shown)


def _create(model, agency_id, risk, include):
    """Create rows of one kind in a risk profile, in bulk, atomically (the one bulk-write path)."""
    return common.bulk_write(201, risk_writes.Create(model, common.risk_of(agency_id, risk), include))


def list_drivers(agency_id, risk, per_page, cursor=None, filter_=None, sort=None, include=None):
    """List a risk profile's drivers."""
    return _list(Driver, agency_id, risk, per_page, cursor, filter_, sort, include)


def create_drivers(agency_id, risk, include=None):
    """Create drivers in bulk, atomically."""
    return _create(Driver, agency_id, risk, include)


def list_vehicles(agency_id, risk, per_page, cursor=None, filter_=None, sort=None, include=None):
    """List a risk profile's vehicles."""
    return _list(Vehicle, agency_id, risk, per_page, cursor, filter_, sort, include)


def create_vehicles(agency_id, risk, include=None):
    """Create vehicles in bulk, atomically."""
    return _create(Vehicle, agency_id, risk, include)


def list_premises(agency_id, risk, per_page, cursor=None, filter_=None, sort=None, include=None):
    """List a risk profile's premises."""
    return _list(Premise, agency_id, risk, per_page, cursor, filter_, sort, include)


def create_premises(agency_id, risk, include=None):
    """Create premises in bulk, atomically."""
    return _create(Premise, agency_id, risk, include)


def list_buildings(agency_id, risk, per_page, cursor=None, filter_=None, sort=None, include=None):
    """List a risk profile's buildings."""
    return _list(Building, agency_id, risk, per_page, cursor, filter_, sort, include)


def create_buildings(agency_id, risk, include=None):
    """Create buildings in bulk, atomically."""
    return _create(Building, agency_id, risk, include)


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
