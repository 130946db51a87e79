"""Request handlers, one module per resource, functions named by operationId."""

import flask

from foundation.config import SETTINGS_KEY, Settings


def settings() -> Settings:
    """Return the settings of the app serving this request."""
    return flask.current_app.config[SETTINGS_KEY]
