"""jobs.lines: the order a round's attempts start in, and what comes between them.

Starting an attempt costs the GIL a millisecond or more, so a burst's round of a hundred takes a tenth of a second.
A delivery to a webhook that answers quickly must not wait behind it (bench/isolation.py measured such a wait).
Order only: each test drives one round by hand with an executor that records what it is given.
"""

import dataclasses
import threading
import types

import pytest
import redis

from jobs.lines import ROUND_PART, Engine
from models.webhooks import Webhook

QUICK = 999  # a webhook that answered quickly lately


@pytest.fixture
def engine(settings, redis_url, queue_name, monkeypatch):
    """An engine (not started: its rounds are driven by hand) whose attempts are only recorded, in `engine.started`."""
    connection = redis.Redis.from_url(redis_url, socket_timeout=5)
    made = Engine(dataclasses.replace(settings, webhook_queue=queue_name, webhook_max_rate=0.0), connection)
    made.started = []
    made.on_start = lambda count: None
    made.slow.answered(QUICK)

    def submit(_attempt, item, webhook, _at):
        made.started.append((webhook.id, item.delivery.id))
        made.on_start(len(made.started))

    monkeypatch.setattr(made, "_executor", types.SimpleNamespace(submit=submit))
    yield made
    connection.close()


def line_up(engine: Engine, *webhook_ids: int) -> None:
    """Line up one delivery (id = 1000 + its position) to each webhook, as RQ's threads do."""
    engine.line_up([(types.SimpleNamespace(id=1000 + n), Webhook(id=w), 1, 0.0) for n, w in enumerate(webhook_ids)])


def run_round(engine: Engine) -> None:
    """Take a round and start it, as the dispatcher does (it holds the lock while it takes)."""
    with engine._cond:
        picked, _ = engine._take_due()
        engine._start(picked)


def test_a_round_starts_the_attempts_to_quick_webhooks_first(engine):
    line_up(engine, 1, 2, 3, QUICK, 4)
    run_round(engine)
    assert [webhook for webhook, _ in engine.started] == [QUICK, 1, 2, 3, 4]


def test_a_quick_webhooks_delivery_lined_up_during_a_long_round_starts_before_the_rest_of_it(engine):
    """RQ's threads line up while a round starts (no lock held), and a quick webhook's delivery goes next."""
    unproven = list(range(1, 31))
    line_up(engine, *unproven)
    lined = threading.Event()

    def meanwhile(count):
        if count == 2:  # another thread lines up while the round's first part starts
            other = threading.Thread(target=lambda: (line_up(engine, QUICK), lined.set()))
            other.start()
            other.join(timeout=10)
            assert lined.is_set(), "lining up waited for the round to end"

    engine.on_start = meanwhile
    run_round(engine)
    order = [webhook for webhook, _ in engine.started]
    assert order == unproven[:ROUND_PART] + [QUICK] + unproven[ROUND_PART:], order
    assert engine.turns.in_flight == len(unproven) + 1 and engine.waiting() == {}


def test_no_more_of_a_round_starts_once_the_engine_is_paused(engine):
    """The recorder pauses the engine when the database goes away: the rest of a round waits in its lines."""
    line_up(engine, *range(1, 21))
    engine.on_start = lambda count: count == 1 and engine.pause()
    run_round(engine)
    assert [webhook for webhook, _ in engine.started] == list(range(1, ROUND_PART + 1))
    assert engine.turns.in_flight == ROUND_PART
    assert sorted(engine.waiting()) == list(range(ROUND_PART + 1, 21))
    engine.resume()
    run_round(engine)
    assert [webhook for webhook, _ in engine.started] == list(range(1, 21))
