"""Support of the tests, benches and client checks: a receiver, tenants, servers and workers to run them against.

Tools import from here, never from tests/; the test suite imports from here too. Nothing here changes a setting
on import: whoever starts a server or worker says how it runs.
"""

from pathlib import Path

# The repository: processes started from here (cwd, PYTHONPATH) find every top-level package.
ROOT = Path(__file__).resolve().parent.parent
