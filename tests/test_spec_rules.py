"""Rules the spec states beyond types: each holds as written, so an outside fuzzer finds none unexplained."""

import re

import spec
from toolkit.tenants import items


def test_every_cursor_the_app_issues_matches_the_documented_pattern(client, tenant):
    pattern = re.compile(spec.resolved()["components"]["parameters"]["Cursor"]["schema"]["pattern"])
    body = items("driver", *[{"first_name": f"P{n}"} for n in range(25)])
    assert client.post(tenant.url("/drivers"), json=body, headers=tenant.headers).status_code == 201
    first = client.get(tenant.url("/drivers"), params={"per_page": 10}, headers=tenant.headers).json()
    second = client.get(tenant.url("/drivers"), params={"per_page": 10, "cursor": first["next_cursor"]}, headers=tenant.headers)
    cursors = [first["next_cursor"], second.json()["next_cursor"], second.json()["prev_cursor"]]
    assert all(isinstance(c, str) and pattern.fullmatch(c) for c in cursors), cursors
    # Malformed (the pattern fails) or forged (the signature fails): the same documented 422.
    # Forged: the payload's first character changed (the signature's last one may carry only padding bits).
    cursor = first["next_cursor"]
    for bad in ["garbage", ("A" if cursor[0] != "A" else "B") + cursor[1:]]:
        answer = client.get(tenant.url("/drivers"), params={"cursor": bad}, headers=tenant.headers)
        assert (answer.status_code, answer.json()["errors"]) == (422, {"cursor": ["The cursor is invalid."]}), bad


def test_a_method_override_that_disagrees_with_the_body_is_the_documented_422(client, tenant):
    body = {"_method": "PATCH", "data": [{"object": "driver", "uuid": "00000000-0000-4000-8000-000000000000", "data": {}}]}
    answer = client.post(tenant.url(), json=body, headers={**tenant.headers, "X-HTTP-Method-Override": "DELETE"})
    assert answer.status_code == 422
    assert answer.json()["errors"]["_method"] == ["The _method field must match the X-HTTP-Method-Override header."]
    described = " ".join(spec.operation("overrideRiskData")[2]["description"].split())
    assert "The _method field must match the X-HTTP-Method-Override header." in described
