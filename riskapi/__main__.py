"""`python -m riskapi`: the `riskapi` command line (where the console script is not on PATH)."""

from riskapi.cli import main

main()
