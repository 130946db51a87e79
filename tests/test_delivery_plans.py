"""models.delivery_states: a write to deliveries named by id finds them by their key, whatever the statistics say.

The statistics are taken while every delivery of the table has succeeded, then a backlog grows: the planner
then believes `status = 'pending'` rarer than the ids named, and walked the status index through the whole
backlog for each claim. Each statement the writes ran is then explained on the database under test.
"""

import datetime
import logging

import pytest

import models
from models import delivery_states, utcnow
from models.webhooks import PENDING, SUCCEEDED, Delivery, Webhook, pack_events
from webhooks import outbox

BACKLOG = 2000


class Statements(logging.Handler):
    """Collect the UPDATE statements Peewee runs, with their parameters."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[str, tuple]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not isinstance(record.msg, tuple):
            return
        # A transaction's first statement carries its BEGIN on PostgreSQL (models.databases.PostgresqlPool.begin).
        sql = str(record.msg[0]).lstrip().removeprefix("BEGIN; ")
        if sql.upper().startswith("UPDATE"):
            self.seen.append((sql, tuple(record.msg[1] or ())))


@pytest.fixture
def backlog(db_tenant, connection) -> list[tuple[int, int]]:
    """A backlog of pending deliveries grown after the statistics saw only succeeded ones; their (id, generation)."""
    hook = Webhook.create(
        agency=db_tenant.agency.id, type="custom", url="https://hooks.example.com/in", events=pack_events(["x.y"]), secret="s"
    )
    with models.atomic():
        outbox.record(db_tenant.agency.id, "x.y", [{"n": n} for n in range(BACKLOG)])
    mine = Delivery.webhook == hook.id
    Delivery.update(status=SUCCEEDED).where(mine).execute()  # set-up, as the rows would be once delivered
    models.db.execute_sql("ANALYZE delivery")
    Delivery.update(status=PENDING).where(mine).execute()
    return list(models.tuples(Delivery.select(Delivery.id, Delivery.generation).where(mine).order_by(Delivery.id)))


def plan(sql: str, params: tuple) -> str:
    """Return the database's plan of a statement, as text."""
    explain = "EXPLAIN QUERY PLAN " if models.is_sqlite() else "EXPLAIN "
    return "\n".join(" ".join(map(str, row)) for row in models.db.execute_sql(explain + sql, params).fetchall())


def test_writes_by_id_read_the_key_not_the_status_index(backlog):
    pairs = backlog[::250][:8]
    now = utcnow()
    lease = now + datetime.timedelta(seconds=30)
    statements = Statements()
    peewee_log = logging.getLogger("peewee")
    level = peewee_log.level
    peewee_log.addHandler(statements)
    peewee_log.setLevel(logging.DEBUG)
    try:
        assert delivery_states.claim_many(pairs, now, lease) is None  # every one claimed
        assert delivery_states.renew(pairs, lease + datetime.timedelta(seconds=30)) == set()
        delivery_states.hand_back(pairs[:4])
        delivery_states.rescue(pairs[4:], lease + datetime.timedelta(seconds=60))
        assert delivery_states.claim(*pairs[0], now, lease)
        assert delivery_states.succeed_many({1: pairs[:1]}, now) == {pairs[0][0]}
    finally:
        peewee_log.removeHandler(statements)
        peewee_log.setLevel(level)
    assert len(statements.seen) == 9  # claim_many, renew, hand_back, a rescue of each of 4 pairs, claim, succeed_many
    for sql, params in statements.seen:
        shown = plan(sql, params)
        assert "delivery_status_next_attempt" not in shown, f"{sql}\n{shown}"
        assert ("PRIMARY KEY" if models.is_sqlite() else "delivery_pkey") in shown, f"{sql}\n{shown}"
    # And each did what it is for: the first handed back, claimed again and settled; the rest handed back or rescued.
    query = Delivery.select(Delivery.id, Delivery.status, Delivery.locked_until).where(Delivery.id.in_([i for i, _ in pairs]))
    rows = {delivery_id: (status, held) for delivery_id, status, held in models.tuples(query)}
    assert [rows[i] for i, _ in pairs] == [(SUCCEEDED, None)] + [(PENDING, None)] * 7
