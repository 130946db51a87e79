"""Per-webhook pacing: at most RISKAPI_WEBHOOK_MAX_RATE attempts start in any one second, across workers, however late.

Nothing here asserts how fast the machine is: a wait is checked against bounds that hold whatever time passed
between two calls (measured around them), and starts against the moments Redis recorded for them.
"""

import collections
import dataclasses
import datetime
import os
import signal
import threading
import time
import types
import uuid

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from jobs.lines import Engine
from jobs.pacing import Pacer, allowance
from models.webhooks import Attempt, Delivery, Webhook
from tests.support import make_webhook
from toolkit.serving import wait_until
from toolkit.tenants import items

RATE = 10.0
SLACK = 0.002  # Redis's clock and this process's, read microseconds apart


def most_in_any_second(starts_us: list[int]) -> int:
    """Return the most starts (microseconds) within any half-open one-second window."""
    starts = sorted(starts_us)
    return max(sum(1 for t in starts[i:] if t - first < 1_000_000) for i, first in enumerate(starts))


def timed(call):
    """Return call()'s result and the seconds measured around it (an upper bound on the time it spanned)."""
    began = time.monotonic()
    result = call()
    return result, time.monotonic() - began


def admit_all(pacers: list[Pacer], webhook_id: int, wanted: int) -> tuple[list[int], list[float]]:
    """Admit `wanted` starts to one webhook from threads of every pacer, each retrying after its wait; return the
    starts (us) and every wait told."""
    starts, waits, lock = [], [], threading.Lock()

    def run(pacer):
        while True:
            with lock:
                if len(starts) >= wanted:
                    return
            wait, at = pacer.admit(webhook_id)
            with lock:
                if at is not None:
                    starts.append(at)
                else:
                    waits.append(wait)
            time.sleep(wait)

    threads = [threading.Thread(target=run, args=(pacer,)) for pacer in pacers for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return starts, waits


def test_the_allowance_of_a_rate():
    assert allowance(0) == (0, 0)
    assert allowance(10) == (10, 1_000_000)
    assert allowance(2.5) == (2, 1_000_000)  # whole starts in a one-second window
    assert allowance(0.5) == (1, 2_000_000)  # below one a second: one start in 1/rate seconds


def test_slots_are_one_interval_apart_for_every_pacer_sharing_redis(redis_url):
    prefix = f"riskapi:pace:test-{uuid.uuid4().hex}"
    connection = redis.Redis.from_url(redis_url)
    one, other = Pacer(connection, RATE, prefix), Pacer(connection, RATE, prefix)
    (first, then), between = timed(lambda: (one.reserve(7, 3), other.reserve(7)))
    assert first[0] == 0 and [round(b - a, 6) for a, b in zip(first, first[1:], strict=False)] == [0.1, 0.1]
    # After the three the first pacer took, not beside them: 0.3 s after the first, less what passed meanwhile.
    assert max(0.3 - between - SLACK, 0) <= then[0] <= 0.3, (then, between)
    assert other.reserve(8)[0] == 0  # each webhook has its own slots
    connection.delete(one.key(7), one.key(8))


def test_several_webhooks_reserve_in_one_round_trip_as_one_by_one(redis_url):
    prefix = f"riskapi:pace:test-{uuid.uuid4().hex}"
    connection = redis.Redis.from_url(redis_url)
    one, other = Pacer(connection, RATE, prefix), Pacer(connection, RATE, prefix)
    waits, between = timed(lambda: (other.reserve(7, 2), one.reserve_many({7: 2, 8: 1, 9: 0}))[1])
    assert set(waits) == {7, 8, 9} and waits[9] == []
    assert max(0.2 - between - SLACK, 0) <= waits[7][0] <= 0.2, (waits, between)  # after webhook 7's two taken
    assert round(waits[7][1] - waits[7][0], 6) == 0.1 and waits[8] == [0], waits
    connection.delete(one.key(7), one.key(8))


def test_without_a_rate_nothing_waits_and_redis_is_not_asked():
    pacer = Pacer(redis.Redis(port=1), 0, "riskapi:pace:none")  # nothing listens on port 1
    assert pacer.reserve(1, 3) == [0.0, 0.0, 0.0]
    assert pacer.admit(1) == (0.0, None)  # the caller takes its own clock


def test_without_redis_a_process_paces_by_itself():
    away = redis.Redis(port=1, retry=Retry(NoBackoff(), 0))  # nothing listens on port 1
    pacer = Pacer(away, RATE, "riskapi:pace:away")
    (waits, later), between = timed(lambda: (pacer.reserve(1, 2), pacer.reserve(1)))
    assert waits == [0, 0.1], waits
    assert max(0.2 - between - SLACK, 0) <= later[0] <= 0.2, (later, between)
    starts, _ = admit_all([pacer], 1, 12)
    assert most_in_any_second(starts) <= 10, sorted(starts)


def test_starts_never_exceed_the_rate_in_any_second_however_late_they_come(redis_url):
    # Every caller asks at once and again the moment it is told, as workers that woke late would: the
    # window, not the callers' timing, decides.
    prefix = f"riskapi:pace:test-{uuid.uuid4().hex}"
    connection = redis.Redis.from_url(redis_url)
    pacers = [Pacer(connection, RATE, prefix), Pacer(connection, RATE, prefix)]  # two hosts
    starts, waits = admit_all(pacers, 7, 25)
    assert len(starts) >= 25 and most_in_any_second(starts) <= 10, sorted(starts)
    assert waits and all(0 < wait <= 1 for wait in waits), waits  # told to wait, never longer than the window
    connection.delete(pacers[0].starts_key(7))


def test_a_stalled_worker_does_not_start_its_missed_slots_at_once(redis_url):
    # A worker late for its slots (a busy machine): everything it reserved is due when it wakes.
    prefix = f"riskapi:pace:test-{uuid.uuid4().hex}"
    connection = redis.Redis.from_url(redis_url)
    pacer = Pacer(connection, RATE, prefix)
    assert pacer.reserve(7, 15)[-1] == pytest.approx(1.4)
    time.sleep(1.5)  # past every slot: the longer, the more would start at once without the window
    told, spent = timed(lambda: [pacer.admit(7) for _ in range(15)])
    starts = [at for _, at in told if at is not None]
    assert most_in_any_second(starts) <= 10, told
    if spent < 1:  # all asked within one window: the rest were told to wait for it
        assert len(starts) == 10 and all(0 < wait <= 1 for wait, at in told if at is None), told
    connection.delete(pacer.key(7), pacer.starts_key(7))


def test_several_webhooks_admit_in_one_round_trip_each_as_far_as_its_window_allows(redis_url):
    prefix = f"riskapi:pace:test-{uuid.uuid4().hex}"
    connection = redis.Redis.from_url(redis_url)
    one, other = Pacer(connection, RATE, prefix), Pacer(connection, RATE, prefix)
    assert other.admit_many({7: 8}) == {7: (8, pytest.approx(time.time() * 1e6, abs=5e6), 0.0)}
    told, between = timed(lambda: one.admit_many({7: 5, 8: 3, 9: 0}))
    assert set(told) == {7, 8, 9} and told[9] == (0, None, 0.0)
    (admitted, at, wait), (admitted_8, at_8, wait_8) = told[7], told[8]
    assert admitted == 2 and at <= at_8, told  # the other pacer's 8 count: 2 of 10 left in webhook 7's window
    assert 1 - between - SLACK <= wait <= 1, (told, between)  # until the oldest of the window leaves it
    assert (admitted_8, wait_8) == (3, 0.0), told
    assert connection.zcard(one.starts_key(7)) == 10 and connection.zcard(one.starts_key(8)) == 3  # every start recorded
    connection.delete(one.starts_key(7), one.starts_key(8))


def test_a_round_of_attempts_to_several_webhooks_is_admitted_in_one_call(settings, redis_url, queue_name, monkeypatch):
    """The dispatcher asks the pacer once for all it would start; what a window refuses goes back first in its line."""
    connection = redis.Redis.from_url(redis_url)
    engine = Engine(dataclasses.replace(settings, webhook_queue=queue_name, webhook_max_rate=1.0), connection)
    asked, started = [], []
    real = engine.pacer.admit_many
    monkeypatch.setattr(engine.pacer, "admit_many", lambda wanted: asked.append(wanted) or real(wanted))
    monkeypatch.setattr(engine, "_executor", types.SimpleNamespace(submit=lambda *call: started.append(call)))
    hooks = [Webhook(id=n) for n in (101, 102, 103)]
    # Another host started an attempt to 101 just now: its window (one start a second) is full.
    other = Pacer(connection, 1.0, engine.pacer.prefix)
    before = time.time()
    assert other.admit_many({101: 1})[101][0] == 1
    engine.line_up([(types.SimpleNamespace(id=hook.id), hook, 1, 0.0) for hook in hooks])
    with engine._cond:
        picked, _ = engine._take_due()
        assert [webhook.id for _, webhook in picked] == [101, 102, 103]
        engine._start(picked)
        assert asked == [{101: 1, 102: 1, 103: 1}]  # one round trip for the round
        # 102 and 103 start, each at Redis's moment for it; 101 waits for its window, first in its line.
        assert [call[2].id for call in started] == [102, 103] and started[0][3] <= started[1][3]
        assert (before - 1e-3) * 1e6 <= started[0][3] <= (time.time() + 1e-3) * 1e6  # Redis's clock: this machine's
        (waiting,) = engine.waiting()[101]
        # Due when the other host's start leaves the window: a second after it.
        assert before + 1 - 1e-3 <= waiting.due <= time.time() + 1 and engine.turns.in_flight == 2, waiting
        taken, after = engine._take_due()[0], time.time()
        assert taken == [] or after >= waiting.due, taken  # nothing more before 101's window allows it
    connection.delete(*(key for hook in hooks for key in (engine.pacer.starts_key(hook.id), engine.pacer.key(hook.id))))
    connection.close()


def test_a_burst_reaches_the_receiver_at_the_rate_with_two_workers_even_when_they_stall(
    client, tenant, receiver, start_worker, connection
):
    workers = [start_worker(max_rate=str(RATE)), start_worker(max_rate=str(RATE))]
    hook = make_webhook(client, tenant, url=receiver.url)
    response = client.post(tenant.url("/drivers"), json=items("driver", *[{}] * 30), headers=tenant.headers)
    assert response.status_code == 201, response.text
    assert receiver.wait_for(3, timeout=30)
    # Both workers stop mid-burst, as on a machine busy elsewhere: when they go on, every slot that passed
    # meanwhile is due at once.
    for worker in workers:
        os.killpg(worker.process.pid, signal.SIGSTOP)
    time.sleep(1.5)  # longer only leaves more slots behind
    for worker in workers:
        os.killpg(worker.process.pid, signal.SIGCONT)
    assert receiver.wait_for(30, timeout=60)
    assert len({request.headers["service-delivery"] for request in receiver.requests}) == 30
    # What the receiver sees: each request's webhook-timestamp is the second its attempt started in.
    per_second = collections.Counter(request.headers["webhook-timestamp"] for request in receiver.requests)
    assert max(per_second.values()) <= RATE, per_second
    # What the attempt log records: each start, on Redis's clock, to the microsecond.
    attempts = Attempt.select(Attempt.at).join(Delivery).join(Webhook).where(Webhook.uuid == hook["uuid"])
    assert wait_until(lambda: attempts.count() == 30, timeout=30)
    moments = [attempt.at for attempt in attempts]
    starts = [(moment - min(moments)) // datetime.timedelta(microseconds=1) for moment in moments]
    assert most_in_any_second(starts) <= RATE, sorted(starts)


def test_other_webhooks_do_not_wait_for_a_paced_one(client, tenant, other_tenant, receiver, start_worker):
    start_worker(max_rate="2")
    make_webhook(client, tenant, url=receiver.url)
    other = make_webhook(client, other_tenant, url=receiver.url)
    # 20 s of backlog at 2/s: the other webhook's one delivery, made when the first arrives, must not wait for it.
    client.post(tenant.url("/drivers"), json=items("driver", *[{}] * 40), headers=tenant.headers)
    assert receiver.wait_for(1, timeout=30)
    client.post(other_tenant.url("/drivers"), json=items("driver", {}), headers=other_tenant.headers)

    def arrived_for_other():
        return any(request.headers["service-webhook"] == other["uuid"] for request in receiver.requests)

    assert wait_until(arrived_for_other, timeout=60)
    # Recorded, not timed: when it arrived, most of the paced webhook's backlog was still waiting its turn.
    index = next(i for i, r in enumerate(receiver.requests) if r.headers["service-webhook"] == other["uuid"])
    assert index < 20, index
