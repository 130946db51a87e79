"""`python -m riskapi`: the `riskapi` command line."""

from riskapi.process.cli import main

main()
