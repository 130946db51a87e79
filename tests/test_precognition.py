"""Dry-runs (Laravel Precognition): validation only, nothing written."""

from tests.conftest import items

PRECOG = {"Precognition": "true"}


def count(client, tenant):
    return len(client.get(tenant.url("/drivers"), headers=tenant.headers).json()["data"])


def test_valid_dry_run_writes_nothing(client, tenant):
    response = client.post(
        tenant.url("/drivers"), json=items("driver", {"first_name": "A"}), headers={**tenant.headers, **PRECOG}
    )
    assert response.status_code == 204
    assert response.headers["Precognition-Success"] == "true"
    assert response.headers["Precognition"] == "true"
    assert "Precognition" in response.headers["Vary"]
    assert response.content == b""
    assert count(client, tenant) == 0


def test_invalid_dry_run_runs_database_rules(client, tenant):
    client.post(tenant.url("/drivers"), json=items("driver", {"number": 1}), headers=tenant.headers)
    response = client.post(
        tenant.url("/drivers"), json=items("driver", {"number": 1}, {"sex": "x"}), headers={**tenant.headers, **PRECOG}
    )
    assert response.status_code == 422
    assert response.headers["Precognition-Success"] == "false"
    assert response.headers["Precognition"] == "true"
    assert response.json()["errors"] == {
        "data.0.data.number": ["The data.0.data.number has already been taken."],
        "data.1.data.sex": ["The selected data.1.data.sex is invalid."],
    }
    assert count(client, tenant) == 1


def test_validate_only_limits_the_fields(client, tenant):
    body = items("driver", {"number": "x", "sex": "bogus"}, {"sex": "nope"})
    only = {**tenant.headers, **PRECOG, "Precognition-Validate-Only": "data.*.data.sex"}
    response = client.post(tenant.url("/drivers"), json=body, headers=only)
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"data.0.data.sex", "data.1.data.sex"}
    passing = {**tenant.headers, **PRECOG, "Precognition-Validate-Only": "data.0.data.first_name"}
    response = client.post(tenant.url("/drivers"), json=body, headers=passing)
    assert response.status_code == 204 and response.headers["Precognition-Success"] == "true"


def test_update_dry_run_changes_nothing(client, tenant):
    driver = client.post(
        tenant.url("/drivers"), json=items("driver", {"first_name": "A"}), headers=tenant.headers
    ).json()["data"][0]
    body = {"data": [{"object": "driver", "uuid": driver["uuid"], "data": {"first_name": "B"}}]}
    response = client.patch(tenant.url(), json=body, headers={**tenant.headers, **PRECOG})
    assert response.status_code == 204
    assert client.get(tenant.url("/drivers"), headers=tenant.headers).json()["data"][0]["data"]["first_name"] == "A"
    missing = {
        "data": [{"object": "driver", "uuid": "00000000-0000-4000-8000-000000000000", "data": {"first_name": "B"}}]
    }
    response = client.patch(tenant.url(), json=missing, headers={**tenant.headers, **PRECOG})
    assert response.status_code == 422 and response.headers["Precognition-Success"] == "false"


def test_every_response_varies_on_precognition(client, tenant):
    for response in (
        client.get(tenant.url("/drivers"), headers=tenant.headers),
        client.post(tenant.url("/drivers"), json={"data": []}, headers=tenant.headers),
    ):
        assert "Precognition" in response.headers["Vary"]
        assert "Precognition" not in response.headers
