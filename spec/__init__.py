"""The OpenAPI document, shipped as package data."""
