"""Events published by the platform's other services (forms, e-signatures) for their agency."""

import models
from handlers import common
from riskapi import bulk, outbox


def publish_event(user):
    """Record an event and queue a delivery to each active webhook of the agency subscribed to it."""
    payload, errors = common.body()
    bulk.fail_if(errors)
    with models.atomic():
        accepted = outbox.record(user, payload["event"], [payload["data"]], keep=True)[0]
    return common.respond(202, accepted)
