"""A database to start from, tenants made directly in it, and bulk request bodies."""

from __future__ import annotations

from dataclasses import dataclass

import models
from models import migrations
from models.tenancy import Agency, Risk, Token


def reset_database(url: str) -> None:
    """Drop and recreate every table, so a run starts from nothing."""
    models.bind(url)
    with models.db.connection_context():
        models.db.drop_tables(migrations.all_models(), safe=True, cascade=not url.startswith("sqlite"))
    migrations.upgrade()


@dataclass
class Tenant:
    """An agency with a token and a risk profile."""

    agency: object
    token: str
    risk: str
    risk_type: str

    @property
    def headers(self) -> dict:
        """Authorization headers of the tenant."""
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}

    def url(self, suffix: str = "") -> str:
        """Return a path under this tenant's risk profile."""
        return f"/risks/{self.risk}/data{suffix}"


def make_tenant(risk_type: str = "commercial", webhook_limit: int = 10) -> Tenant:
    """Create an agency, a token and a risk profile directly in the database."""
    with models.db.connection_context():
        agency = Agency.create(name="Agency", webhook_limit=webhook_limit)
        token = Token.issue(agency)
        risk = Risk.create(agency=agency, type=risk_type, name="Risk")
    return Tenant(agency=agency, token=token, risk=str(risk.uuid), risk_type=risk_type)


def items(kind: str, *datas, **extra) -> dict:
    """Build a bulk create body."""
    return {"data": [{"object": kind, "data": data, **extra} for data in datas]}
