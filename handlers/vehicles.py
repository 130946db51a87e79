"""Vehicle endpoints: the risk-data list and bulk create of handlers.risk_data, for vehicles."""

from riskapi.handlers.risk_data import endpoints
from riskapi.models.risk_data import Vehicle

list_vehicles, create_vehicles = endpoints(Vehicle)
