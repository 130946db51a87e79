"""Risk data of every kind: each kind's list and bulk create, and the bulk update and delete of any kind."""

from typing import Any

import flask

from foundation.messages import message
from handlers import common
from models.risk_data import Building, Driver, InRisk, Premise, RiskObject, Vehicle
from services import bulk_write, listing, risk_data_writes
from services.list_query import ListRequest


def _list(
    model: type[InRisk],
    agency_id: int,
    risk: str,
    per_page: int,
    cursor: str | None,
    list_request: ListRequest,
    sort: list[str] | None,
    include: list[str] | None,
) -> flask.Response:
    """Answer one page of a risk profile's rows of one kind (the one list pipeline: services.listing)."""
    asked = common.asked(per_page, cursor, sort, list_request)
    return common.respond(200, listing.risk_data(model, agency_id, risk, asked, include))


def _create(
    model: type[RiskObject],
    agency_id: int,
    risk: str,
    include: list[str] | None,
    body: Any,
    body_errors: dict | None,
    dry_run: bool,
) -> flask.Response:
    """Create rows of one kind in a risk profile, in bulk, atomically (the one bulk-write path)."""
    write = risk_data_writes.Create(model, listing.risk_of(agency_id, risk), include)
    return common.bulk_write(201, write, body, body_errors, dry_run)


def list_drivers(
    agency_id: int,
    risk: str,
    per_page: int,
    list_request: ListRequest,
    cursor: str | None = None,
    sort: list[str] | None = None,
    include: list[str] | None = None,
) -> flask.Response:
    """List a risk profile's drivers."""
    return _list(Driver, agency_id, risk, per_page, cursor, list_request, sort, include)


def create_drivers(
    agency_id: int,
    risk: str,
    include: list[str] | None = None,
    body: Any = None,
    body_errors: dict | None = None,
    dry_run: bool = False,
) -> flask.Response:
    """Create drivers in bulk, atomically."""
    return _create(Driver, agency_id, risk, include, body, body_errors, dry_run)


def list_vehicles(
    agency_id: int,
    risk: str,
    per_page: int,
    list_request: ListRequest,
    cursor: str | None = None,
    sort: list[str] | None = None,
    include: list[str] | None = None,
) -> flask.Response:
    """List a risk profile's vehicles."""
    return _list(Vehicle, agency_id, risk, per_page, cursor, list_request, sort, include)


def create_vehicles(
    agency_id: int,
    risk: str,
    include: list[str] | None = None,
    body: Any = None,
    body_errors: dict | None = None,
    dry_run: bool = False,
) -> flask.Response:
    """Create vehicles in bulk, atomically."""
    return _create(Vehicle, agency_id, risk, include, body, body_errors, dry_run)


def list_premises(
    agency_id: int,
    risk: str,
    per_page: int,
    list_request: ListRequest,
    cursor: str | None = None,
    sort: list[str] | None = None,
    include: list[str] | None = None,
) -> flask.Response:
    """List a risk profile's premises."""
    return _list(Premise, agency_id, risk, per_page, cursor, list_request, sort, include)


def create_premises(
    agency_id: int,
    risk: str,
    include: list[str] | None = None,
    body: Any = None,
    body_errors: dict | None = None,
    dry_run: bool = False,
) -> flask.Response:
    """Create premises in bulk, atomically."""
    return _create(Premise, agency_id, risk, include, body, body_errors, dry_run)


def list_buildings(
    agency_id: int,
    risk: str,
    per_page: int,
    list_request: ListRequest,
    cursor: str | None = None,
    sort: list[str] | None = None,
    include: list[str] | None = None,
) -> flask.Response:
    """List a risk profile's buildings."""
    return _list(Building, agency_id, risk, per_page, cursor, list_request, sort, include)


def create_buildings(
    agency_id: int,
    risk: str,
    include: list[str] | None = None,
    body: Any = None,
    body_errors: dict | None = None,
    dry_run: bool = False,
) -> flask.Response:
    """Create buildings in bulk, atomically."""
    return _create(Building, agency_id, risk, include, body, body_errors, dry_run)


def update_risk_data(
    agency_id: int, risk: str, body: Any = None, body_errors: dict | None = None, dry_run: bool = False
) -> flask.Response:
    """Update risk data."""
    return common.bulk_write(200, risk_data_writes.Update(listing.risk_of(agency_id, risk)), body, body_errors, dry_run)


def delete_risk_data(
    agency_id: int, risk: str, body: Any = None, body_errors: dict | None = None, dry_run: bool = False
) -> flask.Response:
    """Delete risk data."""
    return common.bulk_write(200, risk_data_writes.Delete(listing.risk_of(agency_id, risk)), body, body_errors, dry_run)


def override_risk_data(agency_id: int, risk: str, body_errors: dict | None = None) -> None:
    """Refuse a POST that names no method to stand for."""
    listing.risk_of(agency_id, risk)
    errors = bulk_write.Errors(body_errors or {})
    if not errors:
        errors.add("_method", message("required", "_method"))
    bulk_write.fail_if(errors)
