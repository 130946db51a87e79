"""`python -m riskapi.process`: the `riskapi` command line (where the console script is not on PATH)."""

from riskapi.process.cli import main

main()
