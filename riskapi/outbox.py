"""Transactional outbox: events and their deliveries are written with the change that caused them."""


def record(agency_id: int, event: str, payloads: list[dict]) -> None:
    """Write one event per payload, and a delivery per subscribed active webhook, in the caller's transaction."""
    # Filled in by the webhooks issue (#3); risk-data writes already call it inside their transaction.
    return None
