"""A PostgreSQL that does not answer: a link gone silent (nothing refused, nothing reset) is a JSON 503, not a hang."""

import os

import httpx
import peewee
import pytest

import models
from models import breaker
from models.breaker import Breaker
from toolkit.serving import wait_until
from toolkit.silent import SilentServer


def test_a_request_needing_a_silent_database_gets_the_json_503(start_api):
    # Before: libpq waited on the connect for good (the request hung until the silent server let go, 30 s here).
    with SilentServer() as silent:
        url = start_api(DATABASE_URL=f"postgresql://127.0.0.1:{silent.port}/riskapi", RISKAPI_RATE_LIMIT="0")
        assert httpx.get(url + "/healthz", timeout=30).status_code == 200  # liveness needs no database
        # Roomy: libpq gives up after connect_timeout (2 s); a busy machine's answer is still an answer.
        answer = httpx.get(url + "/webhooks", headers={"Authorization": "Bearer any"}, timeout=60)
        assert answer.status_code == 503, answer.text
        assert answer.json() == {"message": "The database is unavailable; please retry shortly.", "status": 503}
        assert answer.headers["Retry-After"] == "1"
        assert silent.accepted >= 1  # it was asked, and did not answer


def test_a_database_known_silent_is_not_asked_again_by_every_request(start_api):
    # Before the breaker: each request paid libpq's connect timeout again, one new connection each.
    with SilentServer() as silent:
        url = start_api(DATABASE_URL=f"postgresql://127.0.0.1:{silent.port}/riskapi", RISKAPI_RATE_LIMIT="0")
        headers = {"Authorization": "Bearer any"}
        assert httpx.get(url + "/webhooks", headers=headers, timeout=60).status_code == 503
        answers = [httpx.get(url + "/webhooks", headers=headers, timeout=60) for _ in range(20)]
        assert [a.status_code for a in answers] == [503] * 20
        assert all(a.headers["Retry-After"] == "1" for a in answers)
        # The breaker's thread asks again in the background, one connect (2 s) at a time, every 0.5 s after it:
        # twenty requests would take 50 s to be worth ten of its connections.
        assert silent.accepted < 10, silent.accepted


def test_the_breaker_opens_on_a_slow_failure_only_and_closes_when_its_probe_answers():
    answers = [peewee.OperationalError("silent")] * 3 + [None]
    asked = []

    def probe():
        asked.append(1)
        if answers[len(asked) - 1] is not None:
            raise answers[len(asked) - 1]

    known = Breaker(probe, every=0.01)
    known.failed(0.01)  # a refusal or a reset: fast, nothing remembered
    known.check()
    assert not known.open and asked == []
    known.failed(breaker.SLOW)  # a timeout: remembered
    assert known.open
    with pytest.raises(peewee.OperationalError, match="known away"):
        known.check()
    assert wait_until(lambda: not known.open, timeout=30)
    assert len(asked) == 4  # three silent probes, then the one that answered
    known.check()


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="a PostgreSQL session setting (CI's postgres pass)",
)
def test_the_service_s_sessions_end_a_transaction_whose_client_went_silent(database):
    # A process cut off mid-transaction would hold its row locks until the server's keepalives noticed (hours);
    # its transactions queued on one lock would end one idle timeout after another, not together.
    settings = {
        "idle_in_transaction_session_timeout": "3s",
        "tcp_user_timeout": "500",
        "tcp_keepalives_idle": "1",
        "tcp_keepalives_interval": "1",
        "tcp_keepalives_count": "1",
        "client_connection_check_interval": "250ms",
    }
    with models.db.connection_context():
        shown = {name: models.db.execute_sql(f"SHOW {name}").fetchone()[0] for name in settings}
    assert shown == settings
