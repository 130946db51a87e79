"""The API's HTTP plumbing: the app factory, middleware, authentication, validation of requests, errors to responses."""

import warnings

# Connexion imports Starlette's test client at import time, which warns about httpx on every start;
# it is no concern of a user's terminal (the tests do not use that client either).
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
