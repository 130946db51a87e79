"""Bulk update and delete of risk data of any kind."""

from handlers import common
from riskapi import bulk


def update_risk_data(user, risk):
    """Update risk data."""
    profile = common.risk_of(user, risk)

    def apply(plan):
        updated = bulk.apply_update(profile, plan)
        common.emit(profile, updated, "updated")
        return updated

    return common.bulk_write(200, lambda payload, errors: bulk.plan_update(profile, payload, errors), apply)


def delete_risk_data(user, risk):
    """Delete risk data."""
    profile = common.risk_of(user, risk)

    def apply(plan):
        deleted = bulk.apply_delete(profile, plan)
        common.emit(profile, deleted, "deleted")
        return deleted

    return common.bulk_write(200, lambda payload, errors: bulk.plan_delete(profile, payload, errors), apply)


def override_risk_data(user, risk):
    """Refuse a POST that names no method to stand for."""
    common.risk_of(user, risk)
    _, errors = common.body()
    if not errors:
        errors.add("_method", "The _method field is required.")
    bulk.fail_if(errors)
