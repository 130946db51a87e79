"""Building endpoints: the risk-data list and bulk create of handlers.risk_data, for buildings."""

from handlers.risk_data import endpoints
from models.risk_data import Building

list_buildings, create_buildings = endpoints(Building)
