"""Logs and metrics, shared by the API and the workers."""
