"""Token lifecycle: list by prefix (never the token), revoke by token or prefix, expiry; revocation bounded by the cache TTL."""

import datetime
import json

import cachetools
import pytest

import models
from api import auth
from models import tenancy
from riskapi import cli


def run(capsys, *args) -> list[dict]:
    """Run the riskapi command line in-process on the test database; return its JSON lines."""
    cli.main(list(args))
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def agency_uuid(tenant) -> str:
    return str(tenant.agency.uuid)


def test_list_shows_prefix_and_times_never_the_token(client, tenant, capsys):
    [made] = run(capsys, "token", "create", "--agency", agency_uuid(tenant))
    assert made["prefix"] == made["token"][:11] and made["expires"] is None
    assert client.get("/webhooks", headers={"Authorization": f"Bearer {made['token']}"}).status_code == 200
    listed = run(capsys, "token", "list", "--agency", agency_uuid(tenant))
    assert [row["prefix"] for row in listed] == [tenant.token[:11], made["prefix"]]
    assert listed[1]["last_used"] is not None and listed[1]["revoked"] is None
    assert set(listed[1]) == {"prefix", "created", "last_used", "expires", "revoked"}
    text = json.dumps(listed)
    assert made["token"] not in text and tenant.token not in text


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("by", ["prefix", "token"])
def test_a_revoked_token_answers_401_within_the_cache_bound(client, tenant, capsys, by, monkeypatch):
    # The served app runs in this process: its token cache is given a clock the test moves, so the bound
    # is checked in the cache's own time, however long the machine takes over the requests.
    clock = _Clock()
    monkeypatch.setattr(auth, "_cache", cachetools.TTLCache(maxsize=10000, ttl=auth.TTL, timer=clock))
    headers = {"Authorization": f"Bearer {tenant.token}"}
    assert client.get("/webhooks", headers=headers).status_code == 200  # now cached by this process
    [done] = run(capsys, "token", "revoke", tenant.token[:11] if by == "prefix" else tenant.token)
    assert done["prefix"] == tenant.token[:11] and done["revoked"]
    clock.now += auth.TTL + 0.001
    assert client.get("/webhooks", headers=headers).status_code == 401
    with pytest.raises(SystemExit, match="no unrevoked token matches"):
        cli.main(["token", "revoke", tenant.token[:11]])


def test_an_ambiguous_prefix_is_refused(tenant, capsys):
    from models.tenancy import Token

    twin = Token.get(Token.digest == Token.hash(tenant.token))
    Token.update(prefix=twin.prefix).where(Token.id != twin.id).where(Token.agency == twin.agency).execute()
    run(capsys, "token", "create", "--agency", agency_uuid(tenant))
    Token.update(prefix=twin.prefix).where(Token.agency == twin.agency).execute()
    with pytest.raises(SystemExit, match="2 tokens have this prefix"):
        cli.main(["token", "revoke", twin.prefix])


def test_a_token_expires(client, tenant, capsys, monkeypatch):
    # Issue and check (the CLI and the served app both run in this process) on a wall clock the test
    # moves: a busy machine's first request may otherwise come after a short expiry.
    now = [models.utcnow()]
    monkeypatch.setattr(tenancy, "utcnow", lambda: now[0])
    monkeypatch.setattr(auth, "utcnow", lambda: now[0])
    [made] = run(capsys, "token", "create", "--agency", agency_uuid(tenant), "--expires-in", "2s")
    assert made["expires"] is not None
    headers = {"Authorization": f"Bearer {made['token']}"}
    assert client.get("/webhooks", headers=headers).status_code == 200  # and cached
    now[0] += datetime.timedelta(seconds=1.9)
    assert client.get("/webhooks", headers=headers).status_code == 200
    now[0] += datetime.timedelta(seconds=0.1)
    assert client.get("/webhooks", headers=headers).status_code == 401  # expired, though still cached
    with pytest.raises(SystemExit):
        cli.main(["token", "create", "--agency", agency_uuid(tenant), "--expires-in", "soon"])
