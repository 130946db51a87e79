"""The channels of each webhook, a row a name (models.webhooks.WebhookChannel), filled from the webhooks there.

An event finds the webhooks it reaches through this table's index instead of reading each of its agency's
webhooks. A webhook without channels gets one row with the empty name, which every event's lookup asks for.
The models are frozen copies of this release's columns, so the table this migration makes stays what it made
whatever the live models become. IF NOT EXISTS: a table already there is left as it is and only filled
for the webhooks it lacks.
"""

import peewee
from playhouse.migrate import SchemaMigrator

EVERY = ""


class Frozen(peewee.Model):
    class Meta:
        legacy_table_names = False  # as models.BaseModel: webhook_channel


class Agency(Frozen):
    """The agency table (created by 0001; not created here)."""


class Webhook(Frozen):
    """The webhook table as this migration reads it (created by 0001; not created here)."""

    id = peewee.AutoField()
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE")
    channels = peewee.TextField(null=True)


class WebhookChannel(Frozen):
    agency = peewee.ForeignKeyField(Agency, backref="+", on_delete="CASCADE", index=False)
    name = peewee.CharField(max_length=128)
    webhook = peewee.ForeignKeyField(Webhook, backref="+", on_delete="CASCADE")

    class Meta:
        indexes = ((("agency", "name", "webhook"), True),)


def up(migrator: SchemaMigrator, database: peewee.Database) -> None:
    with database.bind_ctx([Agency, Webhook, WebhookChannel]):
        database.create_tables([WebhookChannel], safe=True)
        filed = WebhookChannel.select(WebhookChannel.webhook).where(WebhookChannel.webhook == Webhook.id)
        unfiled = Webhook.select(Webhook.id, Webhook.agency, Webhook.channels).where(~peewee.fn.EXISTS(filed))
        rows = [
            {"agency": agency_id, "name": name, "webhook": webhook_id}
            for webhook_id, agency_id, channels in database.execute(unfiled)
            for name in dict.fromkeys([name for name in (channels or "").split(",") if name] or [EVERY])
        ]
        for start in range(0, len(rows), 500):
            WebhookChannel.insert_many(rows[start : start + 500]).execute()
