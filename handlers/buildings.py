"""Building endpoints: the risk-data list and bulk create of handlers.risk_data, for buildings."""

from riskapi.handlers.risk_data import endpoints
from riskapi.models.risk_data import Building

list_buildings, create_buildings = endpoints(Building)
