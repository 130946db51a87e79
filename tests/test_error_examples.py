"""Every example of every answer: documented, valid, and (for the errors) exactly what the app answers.

tests/test_examples.py replays the success examples in a story; here every response of every
operation must have an example, every named example (not only the first) and every webhook event's
callback example must be valid against its schema, and each example of a shared error answer (400,
401, 404, 413, 415) is provoked over HTTP and compared with the answer, body and status.
"""

import gzip
import uuid

import pytest

import spec
from services.schema_validation import SchemaValidator
from tests.support import make_tenant, make_webhook, webhook_items
from tests.test_examples import OPERATIONS
from toolkit.tenants import items


def media_examples(media: dict) -> dict:
    """Return {name: value} of a media type object's examples (`example` is named "example")."""
    if "example" in media:
        return {"example": media["example"]}
    return {name: example["value"] for name, example in (media.get("examples") or {}).items()}


def every_response():
    """Yield (operationId, status, response) for every documented response."""
    for op_id, (_path, _method, op, _params) in OPERATIONS.items():
        for status, response in op["responses"].items():
            yield op_id, status, response


def test_every_response_with_a_body_has_an_example():
    responses = list(every_response())
    with_body = [(op_id, status, r) for op_id, status, r in responses if r.get("content")]
    missing = [f"{op_id}:{status}" for op_id, status, r in with_body if not all(media_examples(m) for m in r["content"].values())]
    assert missing == []
    assert len(with_body) > 180
    statuses = {status for _op, status, _r in with_body}
    assert {"400", "401", "404", "409", "413", "415", "422", "429", "503"} <= statuses


def all_named_examples():
    for op_id, status, response in every_response():
        for media in (response.get("content") or {}).values():
            for name, value in media_examples(media).items():
                yield f"{op_id}:{status}:{name}", media["schema"], value


NAMED = list(all_named_examples())


@pytest.mark.parametrize("name,schema,value", NAMED, ids=[n for n, _s, _v in NAMED])
def test_every_named_example_is_valid(name, schema, value):
    assert SchemaValidator(schema).errors(value) == {}


def callback():
    """Return the request body media of the webhook callback (what a receiver gets)."""
    created = OPERATIONS["createWebhooks"][2]
    (expression,) = created["callbacks"]["event"].values()
    return expression["post"]["requestBody"]["content"]["application/json"]


def test_each_event_type_has_a_valid_callback_example():
    media = callback()
    examples = media_examples(media)
    event_types = spec.resolved()["components"]["schemas"]["EventName"]["x-event-types"]
    assert sorted(examples) == sorted(spec.schema("EventName")["enum"]) == sorted(event_types)
    for name, body in examples.items():
        assert body["event"] == name
        assert SchemaValidator(media["schema"]).errors(body) == {}, name
        assert SchemaValidator(event_types[name]["payload"]).errors(body["data"]) == {}, name


def example(response: str, name: str) -> dict:
    """Return a named example of a shared response."""
    return spec.resolved()["components"]["responses"][response]["content"]["application/json"]["examples"][name]["value"]


def test_400_examples_are_the_answers(client, tenant):
    bad_json = client.post(tenant.url("/drivers"), content=b"{", headers={**tenant.headers, "Content-Type": "application/json"})
    assert (bad_json.status_code, bad_json.json()) == (400, example("BadRequest", "invalidJson"))
    assert bad_json.json() == example("PlanLimit", "invalidJson")


def test_plan_limit_example_is_the_answer(client):
    tenant = make_tenant(webhook_limit=1)
    make_webhook(client, tenant)
    body = webhook_items({"type": "custom", "url": "https://hooks.example.com/two", "events": ["driver.created"]})
    response = client.post("/webhooks", json=body, headers=tenant.headers)
    assert (response.status_code, response.json()) == (400, example("PlanLimit", "planLimit"))


def test_401_examples_are_the_answers(client, tenant):
    none = client.get(tenant.url("/drivers"))
    assert (none.status_code, none.json()) == (401, example("Unauthorized", "noToken"))
    bad = client.get(tenant.url("/drivers"), headers={"Authorization": "Bearer rk_not_a_token"})
    assert (bad.status_code, bad.json()) == (401, example("Unauthorized", "badToken"))
    malformed = client.get(tenant.url("/drivers"), headers={"Authorization": f"Token {tenant.token}"})
    assert (malformed.status_code, malformed.json()) == (401, example("Unauthorized", "malformedHeader"))


def test_404_examples_are_the_answers(client, tenant):
    risk = client.get(f"/risks/{uuid.uuid4()}/data/drivers", headers=tenant.headers)
    assert (risk.status_code, risk.json()) == (404, example("NotFound", "risk"))
    webhook = client.post(f"/webhooks/{uuid.uuid4()}/ping", headers=tenant.headers)
    assert (webhook.status_code, webhook.json()) == (404, example("NotFound", "webhook"))
    hook = make_webhook(client, tenant)
    delivery = client.post(f"/webhooks/{hook['uuid']}/deliveries/{uuid.uuid4()}/redeliver", headers=tenant.headers)
    assert (delivery.status_code, delivery.json()) == (404, example("NotFound", "delivery"))
    event = client.get(f"/events/{uuid.uuid4()}", headers=tenant.headers)
    assert (event.status_code, event.json()) == (404, example("NotFound", "event"))
    route = client.get("/no-such-route", headers=tenant.headers)
    assert (route.status_code, route.json()) == (404, example("NotFound", "route"))


def test_413_and_415_examples_are_the_answers(client, tenant, settings):
    large = b'{"data": "' + b"x" * settings.max_body_bytes + b'"}'
    too_large = client.post(tenant.url("/drivers"), content=large, headers={**tenant.headers, "Content-Type": "application/json"})
    assert settings.max_body_bytes == 10 * 1024 * 1024  # the example states the default
    assert (too_large.status_code, too_large.json()) == (413, example("TooLarge", "tooLarge"))
    text = client.post(tenant.url("/drivers"), content=b"hello", headers={**tenant.headers, "Content-Type": "text/plain"})
    assert (text.status_code, text.json()) == (415, example("UnsupportedMediaType", "notJson"))
    encoded_body = gzip.compress(b'{"data": [{"object": "driver", "data": {}}]}')
    headers = {**tenant.headers, "Content-Type": "application/json", "Content-Encoding": "gzip"}
    encoded = client.post(tenant.url("/drivers"), content=encoded_body, headers=headers)
    assert (encoded.status_code, encoded.json()) == (415, example("UnsupportedMediaType", "encoded"))


def test_422_examples_that_name_what_is_accepted_are_the_answers(client, tenant):
    """The examples of fixed choices, dates and profile types are the answers, word for word."""
    premise = items("premise", {"state": "ZZ", "zip": "1"})
    answers = {
        "choiceAndFormat": client.post(tenant.url("/premises"), json=premise, headers=tenant.headers),
        "eventAndUrl": client.post(
            "/webhooks",
            json=webhook_items({"type": "custom", "url": "http://hooks.example.com/in", "events": ["driver.create"]}),
            headers=tenant.headers,
        ),
        "eventNotPublished": client.post("/events", json={"event": "driver.created", "data": {}}, headers=tenant.headers),
        "profileTypeMismatch": client.post(
            tenant.url("/drivers"), json=items("driver", {}, profile_type="personal"), headers=tenant.headers
        ),
        "invalidDate": client.post(
            tenant.url("/drivers"), json=items("driver", {"date_of_birth": "1990-13-01"}), headers=tenant.headers
        ),
    }
    for name, answer in answers.items():
        assert (answer.status_code, answer.json()) == (422, example("InvalidWrite", name)), name


def test_422_examples_of_fixed_choice_filters_are_the_answers(client, tenant):
    """A filter of a fixed choice, given a value outside it, lists the choice, as the examples show."""
    hook = make_webhook(client, tenant)
    kind = client.get("/webhooks", params={"filter[type]": "custm"}, headers=tenant.headers)
    assert (kind.status_code, kind.json()) == (422, example("InvalidListQuery", "filterChoice"))
    status = client.get(f"/webhooks/{hook['uuid']}/deliveries", params={"filter[status]": "lost"}, headers=tenant.headers)
    assert (status.status_code, status.json()) == (422, example("InvalidListQuery", "filterStatus"))
    sex = client.get(tenant.url("/drivers"), params={"filter[sex]": "M"}, headers=tenant.headers)
    assert (sex.status_code, sex.json()) == (422, example("InvalidListQuery", "filterEnum"))
    name = client.get("/event-types", params={"filter[name]": "driver.sold"}, headers=tenant.headers)
    _path, _method, op = spec.operation("listEventTypes")
    assert (name.status_code, name.json()) == (422, op["responses"]["422"]["content"]["application/json"]["example"])


def test_422_examples_of_filters_of_a_form_are_the_answers(client, tenant):
    """A filter of another form, given a value that is not of it, names the form, as the examples show."""
    year = client.get(tenant.url("/vehicles"), params={"filter[year]": "2019-2021"}, headers=tenant.headers)
    assert (year.status_code, year.json()) == (422, example("InvalidListQuery", "filterFormat"))
    hook = make_webhook(client, tenant)
    params = {"filter[response_status]": "server"}
    status = client.get(f"/webhooks/{hook['uuid']}/deliveries", params=params, headers=tenant.headers)
    assert (status.status_code, status.json()) == (422, example("InvalidListQuery", "filterResponseStatus"))
