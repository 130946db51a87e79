"""`python -m riskapi`: the `riskapi` command line."""

import sys

from riskapi.process.cli import main

sys.exit(main())
