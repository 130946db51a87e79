"""The floor every other package stands on: settings, errors, log formats, metrics, signing. It imports nothing of the product."""

__version__ = "1.0.0"  # the service's, in its User-Agent and its package (setup.cfg); riskapi.__version__ says it too
