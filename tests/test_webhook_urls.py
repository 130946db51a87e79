"""Webhook urls: subscribing checks and stores the normalised form that delivery sends."""

from __future__ import annotations

import http.client

import pytest

from jobs.https.transport import post, prepare
from tests.support import make_webhook, webhook_items
from webhooks.urls import normalise, url_problem

HOOK = {"type": "custom", "events": ["driver.created"]}
URL = "data.0.data.url"


def create(client, tenant, url):
    return client.post("/webhooks", json=webhook_items({**HOOK, "url": url}), headers=tenant.headers)


def refused(response) -> list[str]:
    """Return the messages on the url of a 422 that names nothing else."""
    assert response.status_code == 422, response.text
    errors = response.json()["message"]
    assert list(errors) == [URL]
    return errors[URL]


@pytest.mark.parametrize(
    "url",
    [
        "https://１２７.０.０.１/in",  # fullwidth digits
        "https://127。0。0。1/in",  # ideographic full stops
        "https://127．0．0．1/in",  # fullwidth full stops
        "https://127｡0｡0｡1/in",  # halfwidth ideographic full stops
        "https://０ｘ７ｆ.1/in",
        "https://１２７.1./in",
    ],
)
def test_ip_addresses_in_unicode_spellings_are_refused(client, tenant, url):
    assert refused(create(client, tenant, url)) == [f"The {URL} field must not be an IP address."]


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/a\x7fb",
        "https://hooks.example.com/a\x00b",
        "https://hooks.example.com\x00/in",
        "https://hooks.example.com/in?x=\x1b",
        "https://hooks.example.com/a\x80b",
        "https://hooks.example.com/a\x85b",
        "https://hooks.example.com/a\x9fb",
        "https://hooks.example.com/a b",
        "https://hooks.example.com/in\t",
        " https://hooks.example.com/in",
    ],
)
def test_control_characters_and_spaces_are_refused_not_a_500(client, tenant, url):
    messages = refused(create(client, tenant, url))
    assert set(messages) <= {f"The {URL} field format is invalid.", f"The {URL} field must be a valid URL."}
    assert url_problem(url, allow_private=True) == "must be a valid URL"


def test_non_ascii_path_is_stored_percent_encoded(client, tenant):
    hook = make_webhook(client, tenant, url="https://Hooks.Example.com/café?q=ü&r=%20")
    assert hook["data"]["url"] == "https://hooks.example.com/caf%C3%A9?q=%C3%BC&r=%20"
    listed = client.get("/webhooks", headers=tenant.headers).json()["data"]
    assert [item["data"]["url"] for item in listed] == [hook["data"]["url"]]
    # What was stored is ASCII that http.client accepts as a request line and Host header.
    host, port, target = prepare(hook["data"]["url"])
    assert (host, port, target) == ("hooks.example.com", 443, "/caf%C3%A9?q=%C3%BC&r=%20")
    http.client.HTTPConnection(host, port).putrequest("POST", target)


def test_international_host_is_stored_in_idna(client, tenant):
    hook = make_webhook(client, tenant, url="https://Bücher.example/in")
    assert hook["data"]["url"] == "https://xn--bcher-kva.example/in"
    fullwidth = make_webhook(client, tenant, url="https://ｈｏｏｋｓ。example.com/in")
    assert fullwidth["data"]["url"] == "https://hooks.example.com/in"


def test_update_stores_the_normalised_url(client, tenant):
    hook = make_webhook(client, tenant)
    body = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"url": "https://hooks.example.com/naïve"}}]}
    response = client.patch("/webhooks", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    assert response.json()["data"][0]["data"]["url"] == "https://hooks.example.com/na%C3%AFve"
    body["data"][0]["data"]["url"] = "https://１２７.０.０.１/in"
    assert refused(client.patch("/webhooks", json=body, headers=tenant.headers)) == [
        f"The {URL} field must not be an IP address."
    ]


def test_what_is_accepted_is_delivered(client, tenant, receiver):
    """A url with a fullwidth host and a non-ASCII path is subscribed, then really sent."""
    hook = make_webhook(client, tenant, url=f"https://ｌｏｃａｌｈｏｓｔ:{receiver.port}/café")
    assert hook["data"]["url"] == f"https://localhost:{receiver.port}/caf%C3%A9"
    result = post(hook["data"]["url"], b"{}", {}, allow_private=True, ca_bundle=receiver.ca_path)
    assert result.ok, result
    assert receiver.requests[0].path == "/caf%C3%A9"


def test_delivery_normalises_urls_stored_before_the_check(receiver):
    """Rows written before normalisation still deliver; a control character is refused, not sent."""
    raw = f"https://localhost:{receiver.port}/café"
    assert post(raw, b"{}", {}, allow_private=True, ca_bundle=receiver.ca_path).ok
    assert receiver.requests[0].path == "/caf%C3%A9"
    broken = post(raw + "\x7f", b"{}", {}, allow_private=True, ca_bundle=receiver.ca_path)
    assert broken.status is None and broken.error.startswith("invalid URL")
    fullwidth_loopback = post(f"https://１２７.０.０.１:{receiver.port}/x", b"{}", {})
    assert fullwidth_loopback.error == "destination address 127.0.0.1 is not allowed"
    assert not receiver.wait_for(2, timeout=0.2)


def test_normalised_url_must_still_fit_the_column(client, tenant):
    url = "https://hooks.example.com/" + "é" * 400  # 426 characters, 2426 once percent-encoded
    assert refused(create(client, tenant, url)) == [f"The {URL} field must not be greater than 2048 characters."]


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("https://hooks.example.com/in", 201),
        ("https://hooks.example.com:8443/in?x=1", 201),
        ("https://localhost:8443/hook", 201),  # the test env sets RISKAPI_WEBHOOK_ALLOW_PRIVATE=1
        ("http://hooks.example.com/in", 422),
        ("https://127.0.0.1/in", 422),
        ("https://[::1]/in", 422),
        ("https://user:pw@hooks.example.com/in", 422),
        ("https://bad_host.example.com/in", 422),
        ("https://a..example.com/in", 422),
    ],
)
def test_existing_good_and_bad_urls_behave_as_before(client, tenant, url, status):
    response = create(client, tenant, url)
    assert response.status_code == status, response.text
    if status == 201:
        assert response.json()["data"][0]["data"]["url"] == url


@pytest.mark.parametrize(
    "url", ["https://hooks.example.com/café?q=ü#frag", "https://ＨＯＯＫＳ.example.com/x", "https://[2001:DB8::1]:8443/in"]
)
def test_normalise_is_idempotent_and_ascii(url):
    once = normalise(url)
    assert once.isascii() and normalise(once) == once


def test_a_port_in_fullwidth_digits_is_refused_not_rewritten():
    with pytest.raises(ValueError):
        normalise("https://hooks.example.com:８443/x")
