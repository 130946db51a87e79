"""The riskapi command line, run as a real process against its own database."""

import json
import os
import subprocess
import sys
import uuid

import httpx

from toolkit.serving import ServerThread, answers, free_port


def run(db_url, *args):
    env = {**os.environ, "DATABASE_URL": db_url}
    out = subprocess.run([sys.executable, "-m", "riskapi", *args], env=env, capture_output=True, text=True, check=True)
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
    from api.app import create_app
    from foundation.config import Settings

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


def lines(db_url, *args):
    env = {**os.environ, "DATABASE_URL": db_url}
    out = subprocess.run([sys.executable, "-m", "riskapi", *args], env=env, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_quickstart_exports_a_tenant_the_api_answers_for(tmp_path):
    url = f"sqlite:///{tmp_path}/quick.db"
    import models
    from api.app import create_app
    from foundation.config import Settings

    try:
        app = create_app(Settings(database_url=url, validate_responses=True))
        with ServerThread(app, free_port()) as server:
            # As the README and serve's greeting say: eval its lines; RISKAPI_API_URL is the API it exports.
            script = (
                f'eval "$({sys.executable} -m riskapi quickstart)" && '
                'printf "%s\\n" "$API" "$TOKEN" "$RISK" "$H" "$RISKAPI_API_URL" "$RISKAPI_TOKEN"'
            )
            env = {**os.environ, "DATABASE_URL": url, "RISKAPI_API_URL": f"{server.url}/api/v1"}
            done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True)
            api, token, risk, header, api_url, api_token = done.stdout.splitlines()
            assert api == f"{server.url}/api/v1" and header == f"Authorization: Bearer {token}"
            assert (api_url, api_token) == (api, token)  # what `listen` and `trigger` read, no --token in `ps`
            auth = {"Authorization": f"Bearer {token}"}
            listed = httpx.get(f"{api}/risks", headers=auth).json()["data"]
            assert [(r["uuid"], r["data"]) for r in listed] == [(risk, {"type": "commercial", "name": "Fleet"})]
            assert httpx.get(f"{api}/risks/{risk}/data/drivers", headers=auth).status_code == 200
    finally:
        models.bind(os.environ["DATABASE_URL"])
    (agency,) = lines(url, "agency", "list")
    assert agency["name"] == "Acme Insurance" and agency["webhook_limit"] == 10  # RISKAPI_DEFAULT_WEBHOOK_LIMIT's default
    assert lines(url, "token", "list", "--agency", agency["uuid"])[0]["prefix"] == token[:11]
    flags = ["--name", "Beta", "--risk-name", "Vans", "--webhook-limit", "1000000", "--api-url", "http://127.0.0.1:9000/api/v1/"]
    printed = subprocess.run(
        [sys.executable, "-m", "riskapi", "quickstart", *flags],
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "export API=http://127.0.0.1:9000/api/v1\n" in printed and printed.startswith("# agency 'Beta'")
    assert "export RISKAPI_API_URL=http://127.0.0.1:9000/api/v1\n" in printed  # what `listen` and `trigger` read
    assert [(a["name"], a["webhook_limit"]) for a in lines(url, "agency", "list")][1] == ("Beta", 1000000)


def test_agency_list_and_risk_list_find_a_lost_uuid(tmp_path):
    url = f"sqlite:///{tmp_path}/lists.db"
    assert lines(url, "agency", "list") == []
    first = run(url, "agency", "create", "--name", "First")
    second = run(url, "agency", "create", "--name", "Second", "--webhook-limit", "2")
    listed = lines(url, "agency", "list")
    assert [(a["uuid"], a["name"], a["webhook_limit"]) for a in listed] == [
        (first["uuid"], "First", 10),
        (second["uuid"], "Second", 2),
    ]
    assert all(a["created"].endswith("+00:00") for a in listed)
    home = run(url, "risk", "create", "--agency", first["uuid"], "--type", "personal", "--name", "Home")
    fleet = run(url, "risk", "create", "--agency", first["uuid"], "--type", "commercial")
    run(url, "risk", "create", "--agency", second["uuid"], "--type", "commercial", "--name", "Theirs")
    risks = lines(url, "risk", "list", "--agency", first["uuid"])
    assert [(r["uuid"], r["type"], r["name"], r["agency"]) for r in risks] == [
        (home["uuid"], "personal", "Home", first["uuid"]),
        (fleet["uuid"], "commercial", None, first["uuid"]),
    ]
    assert [r["uuid"] for r in lines(url, "risk", "list", "--agency", first["uuid"], "--type", "commercial")] == [fleet["uuid"]]
    env = {**os.environ, "DATABASE_URL": url}
    for agency, message in [("nope", "riskapi: agency 'nope' is not a UUID"), (str(uuid.uuid4()), "riskapi: no agency ")]:
        done = subprocess.run(
            [sys.executable, "-m", "riskapi", "risk", "list", "--agency", agency], env=env, capture_output=True, text=True
        )
        assert done.returncode == 1 and done.stdout == "" and done.stderr.startswith(message) and "Traceback" not in done.stderr


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
    command = [sys.executable, "-m", "riskapi", "serve", "--port", str(port)]
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
    # The README's command, its $API this server's.
    assert f'  eval "$(python3 dev.py riskapi quickstart --api-url {base} | tee tenant.env)"' in lines[2]
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
    command = [sys.executable, "-m", "riskapi", "serve", "--no-worker", "--port", str(port)]
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
        out = subprocess.run([sys.executable, "-m", "riskapi", *args], env=env, capture_output=True, check=True)
        return json.loads(out.stdout)

    agency = cli("agency", "create", "--name", "Graceful")
    headers = {"Authorization": "Bearer " + cli("token", "create", "--agency", agency["uuid"])["token"]}
    risk = cli("risk", "create", "--agency", agency["uuid"], "--type", "commercial")["uuid"]
    port = free_port()
    command = [sys.executable, "-m", "riskapi", "serve", "--no-worker", "--port", str(port)]
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
