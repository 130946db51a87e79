"""Concurrent requests on the same rows: 200 or 422, never 500, nothing half-written."""

import threading

import httpx

from tests.support import make_webhook
from toolkit.tenants import items

ADDRESS = {"object": "address", "data": {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701"}}


def race(server, calls) -> list:
    """Send the calls at once, one thread each, and return their responses in order."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(index, method, url, headers, body):
        with httpx.Client(base_url=server.url + "/api/v1", timeout=30) as http:
            barrier.wait()
            results[index] = http.request(method, url, json=body, headers=headers)

    threads = [threading.Thread(target=run, args=(i, *call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_patch_racing_delete_of_the_same_drivers(server, client, tenant):
    statuses: dict = {}
    for _ in range(40):
        created = client.post(
            tenant.url("/drivers"),
            json=items("driver", {"first_name": "A", "address": ADDRESS}, {}),
            headers=tenant.headers,
        ).json()["data"]
        patch = {"data": [{"object": "driver", "uuid": d["uuid"], "data": {"first_name": "B"}} for d in created]}
        delete = {"data": [{"object": "driver", "uuid": d["uuid"]} for d in reversed(created)]}
        responses = race(
            server,
            [
                ("PATCH", tenant.url(), tenant.headers, patch),
                ("DELETE", tenant.url(), tenant.headers, delete),
                ("PATCH", tenant.url(), tenant.headers, patch),
            ],
        )
        for response in responses:
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code in {200, 422}, response.text
            if response.status_code == 422:
                assert "could not be found" in str(response.json()["errors"])
        assert responses[1].status_code == 200  # nothing else deletes them
    listed = client.get(tenant.url("/drivers"), headers=tenant.headers).json()["data"]
    assert listed == []
    assert statuses.get(200, 0) >= 40


def test_patch_racing_delete_of_the_same_webhooks(server, client, tenant):
    for _ in range(15):
        hook = make_webhook(client, tenant)
        patch = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"description": "x"}}]}
        delete = {"data": [{"object": "webhook", "uuid": hook["uuid"]}]}
        responses = race(
            server,
            [("PATCH", "/webhooks", tenant.headers, patch), ("DELETE", "/webhooks", tenant.headers, delete)],
        )
        assert [r.status_code in {200, 422} for r in responses] == [True, True], [r.text for r in responses]
        assert responses[1].status_code == 200
