"""Driver endpoints: the risk-data list and bulk create of handlers.risk_data, for drivers."""

from riskapi.handlers.risk_data import endpoints
from riskapi.models.risk_data import Driver

list_drivers, create_drivers = endpoints(Driver)
