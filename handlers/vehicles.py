"""Vehicle endpoints."""

from handlers import common
from models.risk_data import Vehicle


def list_vehicles(user, risk, per_page=50, cursor=None, filter=None, sort=None):
    """List vehicles."""
    return common.list_objects(
        "handlers.vehicles.list_vehicles", Vehicle, user, risk, per_page, cursor, filter, sort, None
    )


def create_vehicles(user, risk):
    """Create vehicles."""
    return common.create_objects(Vehicle, user, risk, None)
