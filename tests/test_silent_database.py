"""A PostgreSQL that does not answer: a link gone silent (nothing refused, nothing reset) is a JSON 503, not a hang."""

import httpx

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
