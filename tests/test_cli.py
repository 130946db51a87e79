"""The riskapi command line, run as a real process against its own database."""

import json
import os
import subprocess
import sys

import httpx

from toolkit.serving import ServerThread, answers, free_port


def run(db_url, *args):
    env = {**os.environ, "DATABASE_URL": db_url}
    out = subprocess.run([sys.executable, "-m", "riskapi.process", *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_agency_token_risk_then_the_token_works(tmp_path):
    url = f"sqlite:///{tmp_path}/cli.db"
    run(url, "db", "upgrade")
    agency = run(url, "agency", "create", "--name", "Acme", "--webhook-limit", "3")
    assert agency["name"] == "Acme" and agency["webhook_limit"] == 3 and len(agency["uuid"]) == 36
    token = run(url, "token", "create", "--agency", agency["uuid"])
    assert token["agency"] == agency["uuid"] and len(token["token"]) > 30
    risk = run(url, "risk", "create", "--agency", agency["uuid"], "--type", "personal", "--name", "Home")
    assert risk["type"] == "personal" and risk["agency"] == agency["uuid"]
    stored = subprocess.run(["grep", "-c", token["token"], f"{tmp_path}/cli.db"], capture_output=True, text=True)
    assert stored.stdout.strip() == "0"  # only the hash is stored

    import models
    from riskapi.api.app import create_app
    from riskapi.config import Settings

    try:
        app = create_app(Settings(database_url=url, validate_responses=True))
        with ServerThread(app, free_port()) as server:
            response = httpx.get(
                f"{server.url}/api/v1/risks/{risk['uuid']}/data/drivers",
                headers={"Authorization": f"Bearer {token['token']}"},
                timeout=30,
            )
            assert response.status_code == 200 and response.json()["data"] == []
    finally:
        models.bind(os.environ["DATABASE_URL"])


def test_serve_says_where_it_listens_how_to_make_a_tenant_and_is_ready_with_its_embedded_redis(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from toolkit.serving import free_port, wait_until

    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path}/first.db")  # warnings as a user's terminal shows them
    port = free_port()
    command = [sys.executable, "-m", "riskapi.process", "serve", "--port", str(port)]
    serve = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:

        def ready():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v1/readyz", timeout=30).json()
            except (httpx.TransportError, ValueError):
                return None

        assert wait_until(lambda: (ready() or {}).get("status") == "ok", timeout=30)
        assert ready()["checks"] == {"database": "ok", "redis": "ok"}  # the embedded Redis, known to the API
        serve.send_signal(signal.SIGTERM)
        output = serve.communicate(timeout=30)[0].decode()
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    lines = output.splitlines()
    base = f"http://127.0.0.1:{port}/api/v1"
    assert lines[0] == f"riskapi: serving {base} (docs: {base}/docs/, spec: {base}/openapi.yaml)"
    assert lines[1] == "riskapi: no agency yet; make one, its token and a risk profile with"
    assert 'python3 dev.py riskapi agency create --name "Acme Insurance"' in output
    assert "Warning" not in output and "Traceback" not in output, output


def test_serve_no_worker_runs_the_api_alone(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from tests.webhook_support import descendants
    from toolkit.serving import free_port, wait_until

    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path}/alone.db")
    port = free_port()
    command = [sys.executable, "-m", "riskapi.process", "serve", "--no-worker", "--port", str(port)]
    serve = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    try:

        def ready():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v1/readyz", timeout=30).json()
            except (httpx.TransportError, ValueError):
                return None

        assert wait_until(ready, timeout=30)
        assert ready() == {"status": "ok", "checks": {"database": "ok", "redis": "unconfigured"}}
        assert descendants(serve.pid) == set()  # no worker, no embedded Redis
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()


def test_sigterm_lets_an_in_flight_request_finish_and_takes_no_new_one(tmp_path):
    import concurrent.futures
    import json
    import os
    import signal
    import subprocess
    import sys
    import threading

    import httpx

    from toolkit.serving import free_port, wait_until
    from toolkit.tenants import items

    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path}/graceful.db")

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "riskapi.process", *args], env=env, capture_output=True, check=True)
        return json.loads(out.stdout)

    agency = cli("agency", "create", "--name", "Graceful")
    headers = {"Authorization": "Bearer " + cli("token", "create", "--agency", agency["uuid"])["token"]}
    risk = cli("risk", "create", "--agency", agency["uuid"], "--type", "commercial")["uuid"]
    port = free_port()
    command = [sys.executable, "-m", "riskapi.process", "serve", "--no-worker", "--port", str(port)]
    serve = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        assert wait_until(lambda: answers(base), timeout=30)
        address = {"data": {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701"}}
        body = items("driver", *[{"notes": "n" * 4000, "address": address} for _ in range(1000)])
        payload = json.dumps(body).encode()
        head_sent, signalled = threading.Event(), threading.Event()

        def stream():
            """Send all but the body's last bytes, and those only once the server has taken SIGTERM."""
            yield payload[:-100]
            head_sent.set()
            signalled.wait(30)
            yield payload[-100:]

        sized = {**headers, "Content-Type": "application/json", "Content-Length": str(len(payload))}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            url = f"{base}/risks/{risk}/data/drivers"
            pending = pool.submit(httpx.post, url, content=stream(), headers=sized, timeout=60)
            assert head_sent.wait(30)  # the 4 MB request is in flight
            serve.send_signal(signal.SIGTERM)
            try:
                assert wait_until(lambda: not answers(base), timeout=30)  # no new request is taken
            finally:
                signalled.set()
            answer = pending.result()
        assert answer.status_code == 201, answer.text
        assert len(answer.json()["data"]) == 1000
        assert serve.wait(30) == 0
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
