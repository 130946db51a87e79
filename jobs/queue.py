"""The RQ queue of delivery jobs: how deliveries become jobs (ids only), with their names and retry schedule.

RQ buys distribution: any worker on any host takes the next job. First attempts travel in batch jobs
(jobs.claims.take_batch) of up to BATCH_SIZE deliveries: RQ's bookkeeping costs more per job than a
delivery's POST, so one job per first attempt would spend most of a worker's time on RQ. A delivery
that needs a retry, or that is handed over again mid-round, gets a job of its own (jobs.claims.take)
with RQ's Retry for the rest. Job ids are deterministic, so the relay's rescue can look a job up.

Two lanes for first attempts: of a relay pass larger than BATCH_SIZE (a burst), each webhook's first
delivery goes on the queue, the rest on `<queue>:bulk`, which workers serve only while the queue is empty
(`lanes`); a burst that spans passes has its first on the queue in its first pass only. A burst of one
webhook, or of a few hundred, thus never stands in RQ ahead of another webhook's new delivery: it stands
behind one job per 25 of its webhooks, once, and the rest of each webhook's burst waits in its line
(jobs.lines) anyway. A pass no larger than a batch keeps to the queue: it delays nobody. One RQ thread of
each worker serves the queue alone (jobs.runtime.worker), so a bulk batch in every other thread's hands
never holds a new delivery back.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from typing import Any, cast

import redis
from rq import Queue, Retry
from rq.job import Job
from rq.queue import EnqueueData

JOB_FUNCTION = "jobs.claims.take"
BATCH_FUNCTION = "jobs.claims.take_batch"
# Large enough that RQ's per-job cost is small next to the posts, small enough that a relay pass
# of a burst still spreads over the worker threads.
BATCH_SIZE = 25
# The bulk lane's batches are larger: a burst's deliveries wait in their webhooks' lines anyway, and RQ's
# ~4 ms per job was a sixth of a worker's CPU at 25 per job.
BULK_BATCH_SIZE = 100
# A job's result is of no use (the database has it), but letting it expire is cheaper for RQ than
# deleting it at once (result_ttl=0 costs ~30 % of a job's RQ overhead). Failures keep a week.
RESULT_TTL = 10
FAILURE_TTL = 7 * 24 * 3600


def queue(connection: redis.Redis, name: str) -> Queue:
    """Return the delivery queue on a Redis connection."""
    return Queue(name, connection=connection)


def retries(connection: redis.Redis, name: str) -> Queue:
    """Return the queue of retries, which workers serve only while the queue of first attempts is empty.

    A receiver that keeps failing brings back a job per delivery at every retry; behind them, another
    webhook's new deliveries would wait for RQ to get through them all.
    """
    return Queue(f"{name}:retry", connection=connection)


def bulk(connection: redis.Redis, name: str) -> Queue:
    """Return the queue of bursts' first attempts beyond what their webhooks may have in flight (see `lanes`)."""
    return Queue(f"{name}:bulk", connection=connection)


def lanes(
    deliveries: list[tuple], size: int = BATCH_SIZE, bursting: Iterable[int] = ()
) -> tuple[list[tuple], list[tuple], set[int]]:
    """Split a relay pass's (delivery id, uuid, generation, tries, webhook id) tuples, in order, into the queue's and
    the bulk lane's (without the webhook id): all on the queue up to `size`, else each webhook's first, but for
    webhooks still `bursting` (whose first went on the queue in the relay's previous pass); also return the
    webhooks bursting in this pass (those with deliveries in the bulk lane), for the next."""
    if len(deliveries) <= size:
        return [delivery[:4] for delivery in deliveries], [], set()
    seen: set[int] = set(bursting)
    first: list[tuple] = []
    rest: list[tuple] = []
    burst: set[int] = set()
    for delivery in deliveries:
        webhook = delivery[4]
        if webhook in seen:
            rest.append(delivery[:4])
            burst.add(webhook)
        else:
            first.append(delivery[:4])
            seen.add(webhook)
    return first, rest, burst


def job_id(delivery_uuid: uuid.UUID, generation: int) -> str:
    """Name the job of one generation of a delivery."""
    return f"delivery-{delivery_uuid}-{generation}"


def retry_id(delivery_uuid: uuid.UUID, generation: int, tries: int) -> str:
    """Name the job of a retry scheduled after attempt `tries` (apart from the job that made it, which may still run)."""
    return f"delivery-{delivery_uuid}-{generation}-{tries}"


def batch_id(first_uuid: uuid.UUID, generation: int) -> str:
    """Name a batch job after its first delivery's generation: unique, as that hand-over is."""
    return f"batch-{first_uuid}-{generation}"


def retry_for(delays: Iterable[float], tries: int) -> Retry | None:
    """Return RQ's retry of a delivery that has already made `tries` attempts in this round."""
    remaining = [int(d) if float(d).is_integer() else float(d) for d in list(delays)[tries:]]
    # RQ's stubs say whole seconds; it schedules by timedelta(seconds=...), which takes fractions too.
    return Retry(max=len(remaining), interval=cast("list[int]", remaining)) if remaining else None


def plan(deliveries: list[tuple], size: int = BATCH_SIZE) -> list[tuple[str | None, list[tuple]]]:
    """Group (delivery id, uuid, generation, tries) tuples into jobs: [(batch job id or None, deliveries)].

    First attempts (tries 0) go in batches of up to `size`; a lone one, and any later attempt,
    gets a job of its own (None), as before batches: its retries are RQ's.
    """
    first = [d for d in deliveries if d[3] == 0]
    own = [d for d in deliveries if d[3] != 0]
    groups = [first[start : start + size] for start in range(0, len(first), size)]
    planned = []
    for group in groups:
        if len(group) == 1:
            own.append(group[0])
        else:
            planned.append((batch_id(group[0][1], group[0][2]), group))
    return planned + [(None, [d]) for d in own]


def _lone_options(
    delivery_uuid: uuid.UUID, generation: int, tries: int, delays: Iterable[float], name: str | None = None
) -> dict[str, Any]:
    """Options of the job of one delivery, whether the relay or a batch's failed attempt makes it."""
    return {
        "job_id": name or job_id(delivery_uuid, generation),
        "retry": retry_for(delays, tries),
        "result_ttl": RESULT_TTL,
        "failure_ttl": FAILURE_TTL,
        "description": f"deliver {delivery_uuid}",
    }


def _single(delivery: tuple, delays: list[float], timeout: float) -> EnqueueData:
    delivery_id, delivery_uuid, generation, tries = delivery
    return Queue.prepare_data(
        JOB_FUNCTION,
        args=(delivery_id, generation),
        timeout=int(timeout) + 30,
        **_lone_options(delivery_uuid, generation, tries, delays),
    )


def _batch(name: str, deliveries: list[tuple], timeout: float) -> EnqueueData:
    # No Retry: what a failed or killed batch leaves unsettled is the relay's rescue's to hand back.
    return Queue.prepare_data(
        BATCH_FUNCTION,
        args=([(delivery_id, generation) for delivery_id, _, generation, _ in deliveries],),
        job_id=name,
        timeout=len(deliveries) * (int(timeout) + 1) + 30,
        result_ttl=RESULT_TTL,
        failure_ttl=FAILURE_TTL,
        description=f"deliver {len(deliveries)} deliveries",
    )


def enqueue(target: Queue, planned: list[tuple], delays: Iterable[float], timeout: float) -> list[str]:
    """Enqueue the jobs of `plan()` in one round trip; return their ids."""
    delays = list(delays)
    datas = [
        _batch(name, deliveries, timeout) if name is not None else _single(deliveries[0], delays, timeout)
        for name, deliveries in planned
    ]
    if not datas:
        return []
    with target.connection.pipeline() as pipe:
        jobs = target.enqueue_many(datas, pipeline=pipe)
        pipe.execute()
    return [job.id for job in jobs]


def schedule_retry(
    target: Queue,
    delivery_uuid: uuid.UUID,
    delivery_id: int,
    generation: int,
    tries: int,
    at: datetime.datetime,
    delays: Iterable[float],
    timeout: float,
    name: str | None = None,
) -> Job:
    """Give a delivery whose attempt `tries` failed in a batch (or in flight) a job of its own, due `at`
    (naive UTC), with RQ's Retry for the attempts after it; `name` is its job id if not job_id()."""
    return target.enqueue_at(
        at.replace(tzinfo=datetime.UTC),
        JOB_FUNCTION,
        delivery_id,
        generation,
        job_timeout=int(timeout) + 30,
        **_lone_options(delivery_uuid, generation, tries, delays, name),
    )


def statuses(connection: redis.Redis, job_ids: list[str]) -> dict[str, tuple[str | None, datetime.datetime | None]]:
    """Map job ids to (RQ status, naive UTC start time); (None, None) when Redis no longer knows the job."""
    found = Job.fetch_many(job_ids, connection=connection) if job_ids else []
    out: dict[str, tuple[str | None, datetime.datetime | None]] = {}
    for wanted, job in zip(job_ids, found, strict=True):
        if job is None:
            out[wanted] = (None, None)
            continue
        started = job.started_at
        if started is not None and started.tzinfo is not None:
            started = started.astimezone(datetime.UTC).replace(tzinfo=None)
        out[wanted] = (str(job.get_status(refresh=False).value), started)
    return out
