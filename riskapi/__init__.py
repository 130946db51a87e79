"""riskapi: risk data and webhook delivery for insurance agencies."""

import warnings

__version__ = "1.0.0"

# Connexion imports Starlette's test client at import time, which warns about httpx on every start;
# it is no concern of a user's terminal (the tests do not use that client either).
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
