"""Driver endpoints: the risk-data list and bulk create of handlers.risk_data, for drivers."""

from handlers.risk_data import endpoints
from models.risk_data import Driver

list_drivers, create_drivers = endpoints(Driver)
