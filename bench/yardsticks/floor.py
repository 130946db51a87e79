"""The floor of a Python process: a bare ASGI callable with asyncpg and orjson, the service's drivers page.

Serve it with `uvicorn bench.yardsticks.floor:app --workers 2 --loop uvloop --http httptools` on PostgreSQL
(DATABASE_URL). It does what a page of the service does, and nothing else: the token (cached per
process, as the service caches it), the risk profile of the token's agency (one query), the page of drivers
with each one's vehicle uuid (one query, a keyset on number and id), written out in the service's envelope.
No framework, no validation, no metrics, no access log, no rate limit: what is left is the socket, the event
loop, the driver and the JSON, the least any Python service pays for this page (issue 35). Never imported by
the product.
"""

from __future__ import annotations

import base64
import os
import re
from urllib.parse import parse_qsl

import asyncpg
import orjson

from bench.yardsticks import FIELDS, envelope, page
from models.risk_data import Driver
from models.tenancy import Token

COLUMNS = ", ".join(f'd."{Driver._meta.fields[name].column_name}" AS "{name}"' for name in FIELDS)
PAGE = (
    f"SELECT d.id, d.uuid, {COLUMNS}, d.created, d.updated, v.uuid AS vehicle_uuid FROM driver d "
    "LEFT JOIN vehicle v ON v.id = d.vehicle_id WHERE d.risk_id = $1 {after} ORDER BY d.number, d.id LIMIT $2"
)
FIRST, AFTER = PAGE.format(after=""), PAGE.format(after="AND (d.number > $3 OR (d.number = $3 AND d.id > $4))")
RISK = "SELECT id FROM risk WHERE uuid = $1 AND agency_id = $2"
ROUTE = re.compile(r"^/api/v1/risks/([0-9a-f-]{36})/data/drivers$")
NOT_FOUND = b'{"message":"Not found.","status":404}'
JSON = [(b"content-type", b"application/json")]

_pool: list[asyncpg.Pool] = []
_tokens: dict[bytes, int | None] = {}


async def _agency(pool: asyncpg.Pool, authorization: bytes) -> int | None:
    if authorization not in _tokens:
        digest = Token.hash(authorization.decode("latin-1").removeprefix("Bearer "))
        row = await pool.fetchrow(
            "SELECT agency_id FROM token WHERE digest = $1 AND revoked IS NULL AND (expires IS NULL OR expires > now())",
            digest,
        )
        _tokens[authorization] = row["agency_id"] if row else None
    return _tokens[authorization]


async def _page(pool: asyncpg.Pool, scope: dict, risk: str) -> tuple[int, bytes]:
    headers = dict(scope["headers"])
    agency = await _agency(pool, headers.get(b"authorization", b""))
    profile = await pool.fetchval(RISK, risk, agency) if agency is not None else None
    if profile is None:
        return 404, NOT_FOUND
    query = dict(parse_qsl(scope["query_string"].decode("latin-1")))
    per_page = int(query.get("per_page", 50))
    if "cursor" in query:
        number, ident = orjson.loads(base64.urlsafe_b64decode(query["cursor"]))
        rows = await pool.fetch(AFTER, profile, per_page + 1, number, ident)
    else:
        rows = await pool.fetch(FIRST, profile, per_page + 1)
    more, rows = len(rows) > per_page, rows[:per_page]
    cursor = base64.urlsafe_b64encode(orjson.dumps([rows[-1]["number"], rows[-1]["id"]])).decode() if more else None
    host = headers.get(b"host", b"localhost").decode()
    path = f"http://{host}{scope['path']}"
    return 200, orjson.dumps(page([envelope(row) for row in rows], path, per_page, cursor))


async def app(scope: dict, receive, send) -> None:
    """Answer GET /api/v1/risks/{risk}/data/drivers; 404 for anything else."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                _pool.append(await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=4, max_size=4))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for pool in _pool:
                    await pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    route = ROUTE.match(scope["path"]) if scope["method"] == "GET" else None
    status, body = await _page(_pool[0], scope, route.group(1)) if route else (404, NOT_FOUND)
    await send({"type": "http.response.start", "status": status, "headers": JSON})
    await send({"type": "http.response.body", "body": body})
