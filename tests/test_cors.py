"""CORS (RISKAPI_CORS_ORIGINS): preflights, allowed and refused origins, exposed Precognition headers."""

import dataclasses

import httpx
import pytest

from toolkit.serving import ServerThread, free_port
from toolkit.tenants import items

ORIGIN = "https://app.example.com"
OTHER = "https://elsewhere.example.com"
REQUEST_HEADERS = "authorization, content-type, accept, precognition, precognition-validate-only, x-request-id"


@pytest.fixture(scope="module")
def cors_client(server, settings):
    """A second app, on the same database, with CORS for ORIGIN."""
    from api.app import create_app

    app = create_app(dataclasses.replace(settings, cors_origins=(ORIGIN, "http://localhost:8080")))
    with ServerThread(app, free_port()) as running:
        with httpx.Client(base_url=running.url + "/api/v1", timeout=30) as http:
            yield http


def preflight(http, url, origin=ORIGIN, method="POST", headers=REQUEST_HEADERS):
    return http.options(
        url,
        headers={"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers},
    )


def split(value: str) -> set[str]:
    return {part.strip().lower() for part in value.split(",") if part.strip()}


def vary(response) -> set[str]:
    return {part for value in response.headers.get_list("vary") for part in split(value)}


def test_settings_read_a_comma_separated_list():
    from foundation.config import Settings

    assert Settings.from_env({}).cors_origins == ()
    env = {"RISKAPI_CORS_ORIGINS": " https://a.example.com/, http://localhost:8080 ,"}
    assert Settings.from_env(env).cors_origins == ("https://a.example.com", "http://localhost:8080")


def test_preflight_from_an_allowed_origin(cors_client, tenant):
    # Answered before routing and security: no token, and OPTIONS is routed nowhere in the spec.
    for url, method in [(tenant.url("/drivers"), "POST"), (tenant.url(), "PATCH"), (tenant.url(), "DELETE")]:
        response = preflight(cors_client, url, method=method)
        assert response.status_code == 200, response.text
        assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
        assert split(response.headers["Access-Control-Allow-Methods"]) == {"get", "post", "patch", "delete"}
        allowed = split(response.headers["Access-Control-Allow-Headers"])
        assert {
            "authorization",
            "content-type",
            "accept",
            "precognition",
            "precognition-validate-only",
            "x-http-method-override",
            "x-request-id",
        } <= allowed
        assert "origin" in vary(response)
        assert "Access-Control-Allow-Credentials" not in response.headers
    override = preflight(cors_client, tenant.url(), headers="content-type, x-http-method-override")
    assert override.status_code == 200 and override.headers["Access-Control-Allow-Origin"] == ORIGIN


def test_preflight_refuses_other_origins_methods_and_headers(cors_client, tenant):
    response = preflight(cors_client, tenant.url("/drivers"), origin=OTHER)
    assert response.status_code == 400
    assert "Access-Control-Allow-Origin" not in response.headers
    # The refusal is the API's JSON error, naming what was refused.
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"message": "CORS preflight refused: the origin is not allowed.", "status": 400}
    put = preflight(cors_client, tenant.url("/drivers"), method="PUT")
    assert put.status_code == 400 and "put" not in split(put.headers["Access-Control-Allow-Methods"])
    assert put.json() == {"message": "CORS preflight refused: the method is not allowed.", "status": 400}
    header = preflight(cors_client, tenant.url("/drivers"), headers="x-unknown")
    assert header.status_code == 400
    assert header.json() == {"message": "CORS preflight refused: a request header is not allowed.", "status": 400}
    both = preflight(cors_client, tenant.url("/drivers"), origin=OTHER, method="PUT")
    message = "CORS preflight refused: the origin is not allowed; the method is not allowed."
    assert both.json() == {"message": message, "status": 400}
    assert int(both.headers["Content-Length"]) == len(both.content)


def test_requests_from_an_allowed_origin_carry_the_cors_headers(cors_client, tenant):
    headers = {**tenant.headers, "Origin": ORIGIN}
    listed = cors_client.get(tenant.url("/drivers"), headers=headers)
    assert listed.status_code == 200
    assert listed.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert {"origin", "precognition"} <= vary(listed)
    exposed = split(listed.headers["Access-Control-Expose-Headers"])
    assert {"precognition", "precognition-success", "vary", "retry-after"} <= exposed

    dry = {**headers, "Precognition": "true"}
    passed = cors_client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "A"}), headers=dry)
    assert passed.status_code == 204
    assert passed.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert passed.headers["Precognition"] == "true" and passed.headers["Precognition-Success"] == "true"
    assert "content-type" not in passed.headers and passed.content == b""

    # Errors are answered by the exception handlers, inside the CORS middleware: readable cross-origin.
    failed = cors_client.post(tenant.url("/drivers"), json=items("driver", {"sex": "x"}), headers=dry)
    assert failed.status_code == 422
    assert failed.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert failed.headers["Precognition"] == "true" and failed.headers["Precognition-Success"] == "false"
    assert set(failed.json()["errors"]) == {"data.0.data.sex"}
    unauthenticated = cors_client.get(tenant.url("/drivers"), headers={"Origin": ORIGIN, "Accept": "application/json"})
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["Access-Control-Allow-Origin"] == ORIGIN
    missing = cors_client.get("/nowhere", headers=headers)
    assert missing.status_code == 404 and missing.headers["Access-Control-Allow-Origin"] == ORIGIN
    # An OPTIONS that is not a preflight still reaches the app, which routes no OPTIONS.
    plain = cors_client.options(tenant.url("/drivers"), headers=headers)
    assert plain.status_code == 405 and plain.headers["Access-Control-Allow-Origin"] == ORIGIN


def test_requests_from_another_origin_get_no_allow_origin(cors_client, tenant):
    response = cors_client.get(tenant.url("/drivers"), headers={**tenant.headers, "Origin": OTHER})
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "origin" in vary(response)
    no_origin = cors_client.get(tenant.url("/drivers"), headers=tenant.headers)
    assert "Access-Control-Allow-Origin" not in no_origin.headers


def test_without_the_setting_there_are_no_cors_headers(client, tenant, settings):
    if settings.cors_origins:
        pytest.skip("RISKAPI_CORS_ORIGINS is set for this run")
    response = preflight(client, tenant.url("/drivers"))
    assert response.status_code == 405
    assert not [name for name in response.headers if name.lower().startswith("access-control-")]
    real = client.post(
        tenant.url("/drivers"),
        json=items("driver", {"first_name": "A"}),
        headers={**tenant.headers, "Origin": ORIGIN, "Precognition": "true"},
    )
    assert real.status_code == 204
    assert not [name for name in real.headers if name.lower().startswith("access-control-")]
    assert "origin" not in vary(real)
