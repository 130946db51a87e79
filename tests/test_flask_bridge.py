"""api.flask_bridge: Flask in handler threads as Connexion's last middleware, each operation wrapped once."""

import asyncio
import functools
import threading
import time

import connexion
import flask
import httpx
from connexion.middleware import ConnexionMiddleware

from api.flask_bridge import WsgiBridge
from api.handler_threads import HandlerThreads


def _bridged(threads: HandlerThreads) -> connexion.FlaskApp:
    """Return a bare FlaskApp whose Flask runs in these threads, as api.app builds the service."""
    bridge = functools.partial(WsgiBridge, threads=threads)
    return connexion.FlaskApp(__name__, middlewares=[*ConnexionMiddleware.default_middlewares, bridge])


def _app_with_a_blocking_route(gate: threading.Event, inside: list, threads: HandlerThreads) -> connexion.FlaskApp:
    """Return a bridged FlaskApp whose one route waits at gate, counting the requests waiting there."""
    app = _bridged(threads)
    lock = threading.Lock()

    def wait():
        with lock:
            inside.append(threading.current_thread().name)
        gate.wait(30)
        return "done"

    def echo():
        request = flask.request
        body = request.get_data()
        return flask.jsonify(method=request.method, query=request.query_string.decode(), body=body.decode(), length=len(body))

    def fail():
        raise RuntimeError("boom")

    app.add_url_rule("/wait", "wait", wait)
    app.add_url_rule("/echo", "echo", echo, methods=["GET", "POST"])
    app.app.add_url_rule("/fail", "fail", fail)
    return app


def _call(app: connexion.FlaskApp, *requests: tuple) -> list[httpx.Response]:
    async def scenario():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await asyncio.gather(
                *(client.request(*request[:2], **(request[2] if len(request) > 2 else {})) for request in requests)
            )

    return asyncio.run(scenario())


def test_the_threads_given_serve_every_flask_request_with_at_most_that_many_at_once():
    gate, inside = threading.Event(), []
    app = _app_with_a_blocking_route(gate, inside, HandlerThreads(2, 0.0))

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            requests = [asyncio.create_task(client.get("/wait")) for _ in range(4)]
            deadline = time.monotonic() + 30  # roomy: a busy machine may be slow to start the threads
            while len(inside) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # time for a third request to get in, were there more threads (longer: stricter)
            at_once = len(inside)
            gate.set()
            responses = await asyncio.gather(*requests)
        return at_once, responses

    at_once, responses = asyncio.run(scenario())
    assert at_once == 2
    assert [response.status_code for response in responses] == [200] * 4
    assert len(inside) == 4 and set(inside) <= {"handler-1", "handler-2"}


def test_the_bridge_hands_flask_the_request_and_the_client_its_whole_answer():
    app = _app_with_a_blocking_route(threading.Event(), [], HandlerThreads(2, 0.0))
    big = "x" * 300_000  # several receive messages
    get, post = _call(app, ("GET", "/echo?a=1&b=2"), ("POST", "/echo", {"content": big}))
    assert get.status_code == 200 and get.json() == {"method": "GET", "query": "a=1&b=2", "body": "", "length": 0}
    assert get.headers["content-type"] == "application/json"
    assert post.status_code == 200 and post.json()["length"] == len(big) and post.json()["body"] == big


def test_an_error_in_flask_reaches_the_asgi_side_as_a2wsgi_raised_it():
    app = _app_with_a_blocking_route(threading.Event(), [], HandlerThreads(1, 0.0))
    app.app.config["PROPAGATE_EXCEPTIONS"] = True  # Flask lets the error out of the WSGI call
    (response,) = _call(app, ("GET", "/fail"))
    assert response.status_code == 500


def test_each_request_is_queued_as_a_read_or_a_write_by_its_method_and_precognition():
    seen = []

    class Recording(HandlerThreads):
        def start(self, read, job):
            seen.append(read)
            super().start(read, job)

    app = _app_with_a_blocking_route(threading.Event(), [], Recording(1, 0.0))
    for request in (("GET", "/echo"), ("POST", "/echo"), ("POST", "/echo", {"headers": {"Precognition": "true"}})):
        _call(app, request)
    assert seen == [True, False, True]


def test_each_operation_is_wrapped_once_not_on_every_request(settings, database, tenant, monkeypatch):
    from connexion.decorators.parameter import SyncParameterDecorator

    from api.app import create_app

    wrapped = []
    decorate = SyncParameterDecorator.__call__
    monkeypatch.setattr(
        SyncParameterDecorator, "__call__", lambda self, function: wrapped.append(function) or decorate(self, function)
    )
    app = create_app(settings)

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test/api/v1") as client:
            first = await client.get("/webhooks", headers=tenant.headers)
            at_start = len(wrapped)
            more = [await client.get("/webhooks", headers=tenant.headers) for _ in range(3)]
            return first, at_start, more

    first, at_start, more = asyncio.run(scenario())
    assert first.status_code == 200 and [response.status_code for response in more] == [200] * 3
    assert at_start > 1 and len(wrapped) == at_start  # every operation wrapped as the API was added; none since
