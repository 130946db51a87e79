"""Bulk update and delete of risk data of any kind."""

from handlers import common
from riskapi import bulk


def update_risk_data(user, risk):
    """Update risk data."""
    profile = common.risk_of(user, risk)
    payload, errors = common.body()
    if common.precognitive():
        bulk.plan_update(profile, payload, errors)
        bulk.fail_if(errors)
        return common.precognition_passed()

    def work():
        attempt = bulk.Errors(errors)
        plan = bulk.plan_update(profile, payload, attempt)
        bulk.fail_if(attempt)
        updated = bulk.apply_update(profile, plan)
        common.emit(profile, updated, "updated")
        return updated

    return common.respond(200, {"data": bulk.transaction(work)})


def delete_risk_data(user, risk):
    """Delete risk data."""
    profile = common.risk_of(user, risk)
    payload, errors = common.body()

    def work():
        attempt = bulk.Errors(errors)
        plan = bulk.plan_delete(profile, payload, attempt)
        bulk.fail_if(attempt)
        deleted = bulk.apply_delete(profile, plan)
        common.emit(profile, deleted, "deleted")
        return deleted

    return common.respond(200, {"data": bulk.transaction(work)})


def override_risk_data(user, risk):
    """Refuse a POST that names no method to stand for."""
    common.risk_of(user, risk)
    _, errors = common.body()
    if not errors:
        errors.add("_method", "The _method field is required.")
    bulk.fail_if(errors)
