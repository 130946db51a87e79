"""The database crashes under delivery load and comes back: nothing lost, and no delivery sent again
but those whose attempt was in flight when it went (a PostgreSQL of the test's own; `riskapi serve`)."""

import sys

import pytest

from toolkit import ROOT, postgres
from toolkit.outage import Plan, run

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(not postgres.available(), reason=f"needs PostgreSQL's initdb and pg_ctl in {postgres.BIN}"),
]


def test_a_database_crash_under_delivery_load_loses_nothing_and_sends_again_only_what_was_in_flight(tmp_path, record_property):
    # Claims shorter than the outage (2 s attempts + 3 s grace): they lapse while nobody can renew them, so
    # the relays' rescue must wait for the worker to renew its own; two API processes, one log format.
    quick = {"RISKAPI_WEBHOOK_TIMEOUT": "2", "RISKAPI_WEBHOOK_STALE_AFTER": "3", "RISKAPI_WEBHOOK_RELAY_INTERVAL": "0.05"}
    plan = Plan(
        root=ROOT,
        command=[sys.executable, "-m", "riskapi"],
        fault="crash",
        after=5.0,
        down=7.0,
        seconds=20.0,
        rate=20.0,
        per_write=5,
        workers=2,
        settle=120.0,
        env=quick,
    )
    log = tmp_path / "serve.log"
    figures = run(plan, log)
    # The number the bound is made of: outcomes of attempts in flight (or not yet written) when the database went.
    record_property("kept_while_away", figures.kept)
    record_property("duplicates", figures.duplicates)
    print(f"in flight when the database went: {figures.kept}; sent again: {figures.duplicates}; {figures}")
    text = log.read_text(errors="replace")[-4000:]

    assert figures.answered[503] > 0, figures  # the outage was seen
    assert set(figures.answered) <= {201, 503}, figures  # never a 500, never a hang
    assert figures.to_2xx_s is not None, figures
    assert figures.lost_writes == 0 and figures.committed_unanswered == 0, figures
    # 500: a quarter of the planned writes, which the load (toolkit.outage) goes on until it has, however slow.
    assert figures.unsettled == 0 and figures.deliveries >= 500, figures
    assert figures.lost == 0 and figures.bad_signatures == 0, figures
    assert figures.duplicates <= figures.kept, figures
    assert figures.restarts == 0 and figures.tracebacks == 0, text
    assert figures.other_formats == [], figures.other_formats
