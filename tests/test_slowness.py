"""jobs.slowness: a webhook marked slow by one worker process is known to the others, asked in one round trip."""

import time
import types
import uuid

import redis

from jobs import slowness
from jobs.slowness import SlowMarks


def test_marks_made_in_one_process_are_learnt_by_another_for_many_webhooks_at_once(redis_url):
    queue = f"slow-{uuid.uuid4().hex[:8]}"
    connection = redis.Redis.from_url(redis_url)
    one, other = SlowMarks(connection, queue, 30.0), SlowMarks(connection, queue, 30.0)
    one.mark(1)
    one.mark(3)
    now = time.monotonic()
    assert not other.is_slow(1, now)  # not asked yet
    other.ask([1, 2, 3])
    now = time.monotonic()
    assert [other.is_slow(w, now) for w in (1, 2, 3)] == [True, False, True]
    assert not other.is_slow(1, now + 31)  # the mark's time runs out here too
    connection.delete(one.key(1), one.key(3))


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_webhook_is_asked_about_at_most_once_a_second(redis_url, monkeypatch):
    # The second is the test's: a busy machine's pause between the two asks must not end it.
    clock = _Clock()
    monkeypatch.setattr(slowness, "time", types.SimpleNamespace(monotonic=clock))
    queue = f"slow-{uuid.uuid4().hex[:8]}"
    connection = redis.Redis.from_url(redis_url)
    one, other = SlowMarks(connection, queue, 30.0), SlowMarks(connection, queue, 30.0)
    other.ask([5])
    one.mark(5)
    clock.now += 0.5
    other.ask([5])  # within the second: Redis is not asked again
    assert not other.is_slow(5, clock.now)
    clock.now += 0.5
    other.ask([5])  # a second on: asked, and learnt
    assert other.is_slow(5, clock.now)
    connection.delete(one.key(5))
