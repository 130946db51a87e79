"""Driver endpoints."""

from handlers import common
from models.risk_data import Driver


def list_drivers(user, risk, per_page=50, cursor=None, filter=None, sort=None, include=None):
    """List drivers."""
    return common.list_objects(
        "handlers.drivers.list_drivers", Driver, user, risk, per_page, cursor, filter, sort, include
    )


def create_drivers(user, risk, include=None):
    """Create drivers."""
    return common.create_objects(Driver, user, risk, include)
