"""Tests for jobs.https.connections: which idle connections are kept, handed out and closed."""

import socket

import pytest

from jobs.https import connections
from jobs.https.connections import Key, Pool

KEY = Key("hooks.example.com", 443, None, False)
FRESH = 1e12  # an opening time (monotonic) ahead of now: never too old, however long the suite runs


@pytest.fixture
def pairs():
    """Yield a factory of connected socket pairs (ours, the receiver's), all closed afterwards."""
    made = []

    def pair():
        made.append(socket.socketpair())
        return made[-1]

    yield pair
    for ours, theirs in made:
        ours.close()
        theirs.close()


def test_a_given_connection_is_taken_back_once(pairs):
    pool, (ours, _) = Pool(), pairs()
    pool.give(KEY, ours, FRESH)
    assert pool.take(KEY) == (ours, FRESH)
    assert pool.take(KEY) is None


def test_only_the_same_key_takes_it(pairs):
    pool, (ours, _) = Pool(), pairs()
    pool.give(KEY, ours, FRESH)
    for other in (KEY._replace(port=8443), KEY._replace(ca_bundle="/ca.pem"), KEY._replace(allow_private=True)):
        assert pool.take(other) is None
    assert pool.take(KEY)[0] is ours


def test_a_connection_the_receiver_closed_or_wrote_on_is_closed_not_taken(pairs):
    pool = Pool()
    (closed, their_end), (chatty, their_chatty) = pairs(), pairs()
    their_end.close()
    their_chatty.sendall(b"HTTP/1.1 200 OK\r\n\r\n")  # unasked: would be read as the next answer
    pool.give(KEY, closed, FRESH)
    pool.give(KEY, chatty, FRESH)
    assert pool.take(KEY) is None
    assert closed.fileno() == -1 and chatty.fileno() == -1


def test_old_or_long_idle_connections_are_not_taken(pairs, monkeypatch):
    pool, (old, _), (idle, _) = Pool(), pairs(), pairs()
    pool.give(KEY, old, opened=-1e12)  # opened long before LIFETIME
    assert pool.take(KEY) is None and old.fileno() == -1
    monkeypatch.setattr(connections, "IDLE", 0.0)
    pool.give(KEY, idle, FRESH)
    assert pool.take(KEY) is None and idle.fileno() == -1


def test_at_most_per_key_idle_connections_are_kept(pairs, monkeypatch):
    monkeypatch.setattr(connections, "PER_KEY", 2)
    pool, socks = Pool(), [pairs()[0] for _ in range(3)]
    for sock in socks:
        pool.give(KEY, sock, FRESH)
    assert socks[2].fileno() == -1  # the third was closed
    assert {pool.take(KEY)[0], pool.take(KEY)[0]} == set(socks[:2])


def test_the_least_recently_used_receiver_is_forgotten(pairs, monkeypatch):
    monkeypatch.setattr(connections, "KEYS", 2)
    pool, socks = Pool(), [pairs()[0] for _ in range(3)]
    keys = [KEY._replace(port=port) for port in (1, 2, 3)]
    for key, sock in zip(keys, socks, strict=True):
        pool.give(key, sock, FRESH)
    assert socks[0].fileno() == -1 and pool.take(keys[0]) is None
    assert pool.take(keys[2])[0] is socks[2]


def test_a_forked_child_starts_without_the_parents_connections(pairs, monkeypatch):
    """A child using the parent's socket would interleave two processes' bytes on one TLS stream."""
    pool, (ours, _) = Pool(), pairs()
    pool.give(KEY, ours, FRESH)
    monkeypatch.setattr(connections.os, "getpid", lambda: -7)
    assert pool.take(KEY) is None
    assert ours.fileno() != -1  # left open: it is still the parent's


def test_clear_closes_every_idle_connection(pairs):
    pool, (ours, _) = Pool(), pairs()
    pool.give(KEY, ours, FRESH)
    pool.clear()
    assert ours.fileno() == -1 and pool.take(KEY) is None
