"""A bare Flask + Peewee endpoint: the service's first-page driver query, without Connexion.

Serve it with `gunicorn -w 2 bench.yardsticks.baseline:app` (sync workers) or
`uvicorn bench.yardsticks.baseline:asgi --factory --workers 2` (an a2wsgi pool, as the service ran Flask until issue 24).
"""

import base64
import os

import flask
import orjson
import peewee

import models
from bench.yardsticks import envelope, page
from foundation.config import Settings
from models.risk_data import Driver, Vehicle
from models.tenancy import Risk, Token

app = flask.Flask(__name__)
models.bind(os.environ.get("DATABASE_URL", "sqlite:///riskapi.db"))
_tokens: dict = {}  # The service caches tokens too: both sides do two queries per page.


@app.before_request
def _connect():
    models.db.connect(reuse_if_open=True)


@app.get("/api/v1/risks/<risk>/data/drivers")
def list_drivers(risk):
    """List a page of drivers ordered by number (an unsigned keyset cursor, forward only)."""
    token = flask.request.headers.get("Authorization", "").removeprefix("Bearer ")
    if token not in _tokens:
        _tokens[token] = Token.agency_of(token)
    profile = Risk.get_or_none((Risk.uuid == risk) & (Risk.agency == _tokens[token])) if _tokens[token] else None
    if profile is None:
        return flask.Response(b'{"message":"Not found.","status":404}', status=404, mimetype="application/json")
    per_page = int(flask.request.args.get("per_page", 50))
    vehicle = Vehicle.alias()
    query = (
        Driver.select(Driver, vehicle.uuid.alias("vehicle_uuid"))
        .join_from(Driver, vehicle, peewee.JOIN.LEFT_OUTER, on=(Driver.vehicle == vehicle.id))
        .where(Driver.risk == profile.id)
    )
    cursor = flask.request.args.get("cursor")
    if cursor:
        number, ident = orjson.loads(base64.urlsafe_b64decode(cursor))
        query = query.where((Driver.number > number) | ((Driver.number == number) & (Driver.id > ident)))
    rows = list(query.order_by(Driver.number, Driver.id).limit(per_page + 1).dicts())
    more, rows = len(rows) > per_page, rows[:per_page]
    next_cursor = base64.urlsafe_b64encode(orjson.dumps([rows[-1]["number"], rows[-1]["id"]])).decode() if more else None
    path = flask.request.base_url
    body = page([envelope(row) for row in rows], path, per_page, next_cursor)
    return flask.Response(orjson.dumps(body), mimetype="application/json")


def asgi():
    """Return the endpoint in an a2wsgi pool of RISKAPI_THREADS (how the service ran its Flask app until issue 24)."""
    from a2wsgi import WSGIMiddleware

    return WSGIMiddleware(app.wsgi_app, workers=Settings.from_env().threads)
