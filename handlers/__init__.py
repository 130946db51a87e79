"""Request handlers, one module per resource, functions named by operationId."""
