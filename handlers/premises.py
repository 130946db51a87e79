"""Premise endpoints: the risk-data list and bulk create of handlers.risk_data, for premises."""

from riskapi.handlers.risk_data import endpoints
from riskapi.models.risk_data import Premise

list_premises, create_premises = endpoints(Premise)
