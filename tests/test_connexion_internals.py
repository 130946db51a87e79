"""What riskapi.api.connexion_internals relies on in Connexion's private internals: an upgrade that changes it fails here."""

import asyncio
import threading
import time

import connexion
import httpx
from a2wsgi import WSGIMiddleware

from riskapi.api.connexion_internals import run_flask_in_threads


def _app_with_a_blocking_route(gate: threading.Event, inside: list) -> connexion.FlaskApp:
    """Return a bare FlaskApp whose one route waits at gate, counting the requests waiting there."""
    app = connexion.FlaskApp(__name__)
    lock = threading.Lock()

    def wait():
        with lock:
            inside.append(threading.current_thread().name)
        gate.wait(30)
        return "done"

    app.add_url_rule("/wait", "wait", wait)
    return app


def test_flask_runs_inside_a2wsgi_in_the_middleware_app():
    app = connexion.FlaskApp(__name__)
    wrapped = app._middleware_app.asgi_app
    assert isinstance(wrapped, WSGIMiddleware)
    assert wrapped.app == app.app.wsgi_app


def test_the_pool_set_serves_every_flask_request_with_at_most_that_many_at_once():
    gate, inside = threading.Event(), []
    app = _app_with_a_blocking_route(gate, inside)
    run_flask_in_threads(app, 2)

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            requests = [asyncio.create_task(client.get("/wait")) for _ in range(4)]
            deadline = time.monotonic() + 10
            while len(inside) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # time for a third request to get in, were the pool any larger
            at_once = len(inside)
            gate.set()
            responses = await asyncio.gather(*requests)
        return at_once, responses

    at_once, responses = asyncio.run(scenario())
    assert at_once == 2
    assert [response.status_code for response in responses] == [200] * 4
    assert len(inside) == 4 and len(set(inside)) <= 2


def test_a2wsgi_submits_each_request_with_its_environ_first_to_the_executor_given():
    """riskapi.api.handler_threads orders requests by the environ that a2wsgi passes as the first argument of each call."""
    from concurrent.futures import ThreadPoolExecutor

    seen = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            seen.append((args[0]["REQUEST_METHOD"], args[0]["PATH_INFO"]))
            return super().submit(fn, *args, **kwargs)

    gate, inside = threading.Event(), []
    gate.set()
    app = _app_with_a_blocking_route(gate, inside)
    run_flask_in_threads(app, 2, Recording(max_workers=2))

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/wait")

    assert asyncio.run(scenario()).status_code == 200
    assert seen == [("GET", "/wait")]
