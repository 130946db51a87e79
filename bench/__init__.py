"""Benchmark of the service against a bare Flask + Peewee endpoint (not a test)."""
