"""Premise endpoints."""

from handlers import common
from models.risk_data import Premise


def list_premises(user, risk, per_page=50, cursor=None, filter=None, sort=None):
    """List premises."""
    return common.list_objects(
        "handlers.premises.list_premises", Premise, user, risk, per_page, cursor, filter, sort, None
    )


def create_premises(user, risk):
    """Create premises."""
    return common.create_objects(Premise, user, risk, None)
