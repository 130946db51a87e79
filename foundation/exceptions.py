"""What a request can fail with, raised anywhere below the API; api.error_handlers maps each to its response."""


class ApiError(Exception):
    """Raised when a request fails with a status and a message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}  # the answer's own headers (Retry-After of a 409 while a key's request runs)


class ValidationFailed(Exception):
    """Raised when parameters or body values are invalid."""

    def __init__(self, errors: dict, selectable: bool = True):
        super().__init__(errors)
        self.errors = errors
        # Precognition-Validate-Only selects among body fields; parameter errors always stand.
        self.selectable = selectable


__all__ = ["ApiError", "ValidationFailed"]
