"""Building endpoints."""

from handlers import common
from models.risk_data import Building


def list_buildings(user, risk, per_page=50, cursor=None, filter=None, sort=None, include=None):
    """List buildings."""
    return common.list_objects(
        "handlers.buildings.list_buildings", Building, user, risk, per_page, cursor, filter, sort, include
    )


def create_buildings(user, risk, include=None):
    """Create buildings."""
    return common.create_objects(Building, user, risk, include)
