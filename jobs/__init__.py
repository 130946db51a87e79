"""The delivery pipeline: one delivery's stages, each a module named for it, in the order its data moves.

1. webhooks.outbox: the event and one delivery row per subscribed webhook, in the write's transaction.
2. jobs.relay: committed deliveries become RQ jobs carrying ids (shapes and names: jobs.queue); lost jobs are rescued.
3. jobs.claims: an RQ job claims its deliveries and lines them up in the engine the worker hands it.
4. jobs.lines: the engine; webhooks' lines take turns, paced (jobs.pacing), slow ones held back
   (jobs.slowness); a pool thread sends the attempt (jobs.send -> jobs.https.transport -> jobs.https.dialing,
   jobs.https.connections).
5. jobs.recorder: one thread writes the outcomes, several in one transaction; kept while the database is
   away, no attempt starting meanwhile.
6. jobs.outcomes: what an attempt came to (the attempt log, the delivery's next state), then retry or give
   up, as data (decide, next_delay), the webhook's health, and the retry's RQ job.

Around them: jobs.runtime.worker (one process's relay, RQ workers and engine: jobs.runtime.rq_workers, jobs.runtime.rq_scheduler,
jobs.rq_internals), jobs.outages (riding out Redis and database outages), jobs.runtime.embedded_redis, jobs.retention.
"""
