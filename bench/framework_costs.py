"""What the cuts issue 35 leaves for a decision would save: per-request work inside Connexion, Flask and uvicorn.

    python -m bench.framework_costs              # a fresh SQLite file, 20,000 repetitions of each part

Each cut would need the one adapter (api/flask_bridge.py) to grow past public names, which issue 35
forbids without a decision; this measures, in-process and on the real app, the work each would remove from a
create of drivers, so the decision has its figures. Each part is run as the framework runs it per request,
in a loop on one thread, and given in CPU µs per request (time.process_time):
- connexion: what Connexion's request validation derives again on every request from the operation alone
  (two URI parsers, the body's definition seven times with its media-type dict, the body validator built);
- flask: Flask's second routing of a request Connexion routed already (the URL adapter and its match);
- uvicorn: an answer's head and body sent in two writes, as uvicorn sends them, against one (loopback TCP,
  the reader draining in another thread).
The answer's own parts (its validation, the handler, the statements) are not among them: those stay.
"""

import argparse
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable

import httpx
from connexion import utils
from connexion.middleware import request_validation

from toolkit.serving import ServerThread, free_port
from toolkit.tenants import items, make_tenant, reset_database


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.framework_costs", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20_000, help="repetitions of each part (default 20,000)")
    return parser.parse_args(argv)


def per_call(work: Callable[[], object], repeat: int) -> float:
    """Return the CPU µs one call of work takes, the best of three runs of `repeat` calls."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(repeat):
            work()
        best = min(best, (time.process_time() - start) / repeat * 1e6)
    return best


def captured_operation(url: str, tenant, path: str) -> tuple[object, dict]:
    """Serve one create through the real app; return Connexion's validation operation for it and the request's scope."""
    seen: list[tuple[object, dict]] = []
    original = request_validation.RequestValidationOperation.__call__

    async def capturing(self, scope, receive, send):
        seen.append((self, dict(scope)))
        return await original(self, scope, receive, send)

    request_validation.RequestValidationOperation.__call__ = capturing
    try:
        answer = httpx.post(url + path, json=items("driver", {"first_name": "Ann"}), headers=tenant.headers)
        assert answer.status_code == 201, answer.text
    finally:
        request_validation.RequestValidationOperation.__call__ = original
    return seen[-1]


def connexion_derivations(validation, scope: dict) -> Callable[[], object]:
    """Return what RequestValidationOperation.__call__ derives per request from its operation (connexion 3.3)."""
    operation = validation._operation

    def derive() -> object:
        uri_parser = operation._uri_parser_class(operation.parameters, operation.body_definition())
        validation._validator_map["parameter"](
            operation.parameters,
            uri_parser=uri_parser,
            strict_validation=validation.strict_validation,
            security_query_params=validation.security_query_params,
        )
        mime_type, encoding = validation.extract_content_type(scope["headers"])
        validation.validate_mime_type(mime_type)
        schema = operation.body_schema(mime_type)
        return validation._validator_map["body"][mime_type](
            schema=schema,
            required=operation.request_body.get("required", False),
            nullable=utils.is_nullable(operation.body_definition(mime_type)),
            encoding=encoding,
            strict_validation=validation.strict_validation,
            uri_parser=operation.uri_parser_class(operation.parameters, operation.body_definition()),
        )

    return derive


def flask_routing(flask_app, path: str) -> Callable[[], object]:
    """Return Flask's routing of one request (its URL adapter made and matched), as a request context does it."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "HTTP_HOST": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "QUERY_STRING": "",
    }

    def route() -> object:
        request = flask_app.request_class(environ)
        return flask_app.create_url_adapter(request).match(return_rule=True)

    return route


def socket_writes(head: bytes, body: bytes, repeat: int) -> tuple[float, float]:
    """Return the CPU µs of sending head and body in two writes, and in one, on a loopback TCP connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as uvicorn's transport
    reader, _ = listener.accept()
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            if not reader.recv(1 << 20):
                return

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    # The reader's thread runs in this process too: only this thread's CPU is counted.
    clock = time.thread_time
    results = []
    for parts in ((head, body), (head + body,)):
        best = float("inf")
        for _ in range(3):
            start = clock()
            for _ in range(repeat):
                for part in parts:
                    sender.sendall(part)
            best = min(best, (clock() - start) / repeat * 1e6)
        results.append(best)
    stop.set()
    sender.close()
    thread.join(5)
    reader.close()
    listener.close()
    return results[0], results[1]


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    os.environ["DATABASE_URL"] = "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="riskapi-costs-"), "costs.db")
    os.environ.setdefault("RISKAPI_ACCESS_LOG", "0")
    from api.app import create_app
    from foundation.config import Settings

    settings = Settings.from_env()
    reset_database(settings.database_url)
    app = create_app(settings)
    with ServerThread(app, free_port()) as server:
        tenant = make_tenant()
        path = f"/api/v1/risks/{tenant.risk}/data/drivers"
        validation, scope = captured_operation(server.url, tenant, path)
        answer = httpx.post(server.url + path, json=items("driver", {"first_name": "Bob"}), headers=tenant.headers)
    head = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in answer.headers.items()) + b"\r\n"
    connexion_us = per_call(connexion_derivations(validation, scope), args.repeat)
    flask_us = per_call(flask_routing(app.app, path), args.repeat)
    two, one = socket_writes(b"HTTP/1.1 201 Created\r\n" + head, answer.content, args.repeat)
    print(f"per request of a 1-driver create (CPU µs, best of 3 x {args.repeat:,}):")
    print(f"  connexion: validation set-up derived from the operation again     {connexion_us:7.1f}")
    print(f"  flask: the second routing (URL adapter and match)                  {flask_us:7.1f}")
    print(f"  uvicorn: head and body in two writes {two:6.1f}, in one {one:6.1f}: saved {two - one:7.1f}")
    print(f"  all three                                                          {connexion_us + flask_us + two - one:7.1f}")


if __name__ == "__main__":
    main()
