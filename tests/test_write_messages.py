"""An update's or a delete's statements go together: one round trip on PostgreSQL, in the items' order (models.together)."""

import contextlib

import pytest

import models
from toolkit.tenants import items


@pytest.fixture
def together(monkeypatch):
    """The statements' texts each block of models.together sent (a block that sent none is not listed)."""
    calls: list[list[str]] = []
    original, database = models.together, models.db.obj
    sending = database.execute_sql

    @contextlib.contextmanager
    def recording():
        texts: list[str] = []

        def execute_sql(sql, params=None):
            texts.append(sql)
            return sending(sql, params)

        monkeypatch.setattr(database, "execute_sql", execute_sql)
        try:
            with original():
                yield
        finally:
            monkeypatch.setattr(database, "execute_sql", sending)
            if texts:
                calls.append(texts)

    monkeypatch.setattr(models, "together", recording)  # services.risk_data_writes calls it through models
    return calls


def drivers(client, tenant, count: int) -> list[dict]:
    body = items("driver", *({"first_name": f"D{n}"} for n in range(count)))
    response = client.post(tenant.url("/drivers"), json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def test_an_update_of_many_items_sends_their_updates_together_with_one_text(client, tenant, together):
    made = drivers(client, tenant, 12)
    body = {
        "data": [
            # The same columns in any order: one text (a body's keys come in any order).
            {
                "object": "driver",
                "uuid": d["uuid"],
                "data": {"notes": f"n{k}", "percent_use": k * 5} if k % 2 else {"percent_use": k * 5, "notes": f"n{k}"},
            }
            for k, d in enumerate(made)
        ]
    }
    together.clear()
    response = client.patch(tenant.url(), json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    ((sent,),) = [set(texts) for texts in together if len(texts) == 12]  # one call of 12 statements, one text
    assert sent.startswith('UPDATE "driver" SET') and len(together) == 1
    listed = client.get(tenant.url("/drivers"), params={"sort": "number"}, headers=tenant.headers).json()["data"]
    assert [(d["data"]["notes"], d["data"]["percent_use"]) for d in listed] == [(f"n{k}", k * 5) for k in range(12)]


@pytest.mark.parametrize("address_last", [True, False])
def test_an_item_that_writes_another_row_keeps_the_items_order(client, tenant, address_last):
    """A driver's nested address and that address's own item in one update: the later item wins, as item by item."""
    address = {"object": "address", "data": {"address": "1 Main", "city": "Austin", "state": "TX", "zip": "78701"}}
    created = client.post(
        tenant.url("/drivers"),
        params={"include": "address"},
        json=items("driver", {"first_name": "Ann", "address": address}),
        headers=tenant.headers,
    ).json()["data"][0]
    by_driver = {"object": "driver", "uuid": created["uuid"], "data": {"last_name": "Lee", "address": {"data": {"city": "Waco"}}}}
    own = {"object": "address", "uuid": created["relations"]["address"]["uuid"], "data": {"city": "Dallas"}}
    body = {"data": [by_driver, own] if address_last else [own, by_driver]}
    response = client.patch(tenant.url(), json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    now = client.get(tenant.url("/drivers"), params={"include": "address"}, headers=tenant.headers).json()["data"][0]
    assert now["data"]["last_name"] == "Lee"
    assert now["relations"]["address"]["data"]["city"] == ("Dallas" if address_last else "Waco")


def test_a_delete_sends_one_statement_a_kind_children_first(client, tenant, together):
    vehicles = client.post(
        tenant.url("/vehicles"), json=items("vehicle", {"make": "Ford"}, {"make": "Kia"}), headers=tenant.headers
    ).json()["data"]
    made = drivers(client, tenant, 3)
    body = {
        "data": [{"object": "vehicle", "uuid": v["uuid"]} for v in vehicles]
        + [{"object": "driver", "uuid": d["uuid"]} for d in made]
    }
    together.clear()
    response = client.request("DELETE", tenant.url(), json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    assert [item["uuid"] for item in response.json()["data"]] == [item["uuid"] for item in body["data"]]
    assert [[" ".join(sql.split()[:3]) for sql in texts] for texts in together] == [
        ['DELETE FROM "driver"', 'DELETE FROM "vehicle"']
    ]
    assert client.get(tenant.url("/drivers"), headers=tenant.headers).json()["data"] == []
    assert client.get(tenant.url("/vehicles"), headers=tenant.headers).json()["data"] == []
