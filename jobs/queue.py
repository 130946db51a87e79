"""The RQ queue of delivery jobs: how a delivery becomes a job, with its retry schedule."""

from __future__ import annotations

import datetime
from collections.abc import Iterable

import redis
from rq import Queue, Retry
from rq.job import Job

JOB_FUNCTION = "jobs.delivery.deliver"
# A job's result is of no use (the database has it), but letting it expire is cheaper for RQ than
# deleting it at once (result_ttl=0 costs ~30 % of a job's RQ overhead). Failures keep a week.
RESULT_TTL = 10
FAILURE_TTL = 7 * 24 * 3600


def queue(connection: redis.Redis, name: str) -> Queue:
    """Return the delivery queue on a Redis connection."""
    return Queue(name, connection=connection)


def job_id(delivery_uuid, generation: int) -> str:
    """Name the job of one generation of a delivery."""
    return f"delivery-{delivery_uuid}-{generation}"


def retry_for(delays: Iterable[float], tries: int) -> Retry | None:
    """Return RQ's retry of a delivery that has already made `tries` attempts in this round."""
    remaining = [int(d) if float(d).is_integer() else float(d) for d in list(delays)[tries:]]
    return Retry(max=len(remaining), interval=remaining) if remaining else None


def enqueue(target: Queue, deliveries: list[tuple], delays: Iterable[float], timeout: float) -> list[str]:
    """Enqueue (delivery id, uuid, generation, tries) tuples in one round trip; return the job ids."""
    delays = list(delays)
    datas = [
        Queue.prepare_data(
            JOB_FUNCTION,
            args=(delivery_id, generation),
            job_id=job_id(delivery_uuid, generation),
            retry=retry_for(delays, tries),
            timeout=int(timeout) + 30,
            result_ttl=RESULT_TTL,
            failure_ttl=FAILURE_TTL,
            description=f"deliver {delivery_uuid}",
        )
        for delivery_id, delivery_uuid, generation, tries in deliveries
    ]
    if not datas:
        return []
    with target.connection.pipeline() as pipe:
        jobs = target.enqueue_many(datas, pipeline=pipe)
        pipe.execute()
    return [job.id for job in jobs]


def statuses(connection: redis.Redis, job_ids: list[str]) -> dict[str, tuple]:
    """Map job ids to (RQ status, naive UTC start time); (None, None) when Redis no longer knows the job."""
    found = Job.fetch_many(job_ids, connection=connection) if job_ids else []
    out = {}
    for wanted, job in zip(job_ids, found, strict=True):
        if job is None:
            out[wanted] = (None, None)
            continue
        started = job.started_at
        if started is not None and started.tzinfo is not None:
            started = started.astimezone(datetime.UTC).replace(tzinfo=None)
        out[wanted] = (str(job.get_status(refresh=False).value), started)
    return out
