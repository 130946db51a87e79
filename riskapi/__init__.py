"""riskapi: risk data and webhook delivery for insurance agencies."""

__version__ = "1.0.0"
