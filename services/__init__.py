"""The rules behind the handlers: risk-data and webhook writes, lists (query, pagination, rendering), validation."""
