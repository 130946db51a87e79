"""Fan-out's cost per event: webhooks whose channels an event does not share must cost it nothing (issue 34).

Each side is a child process on a fresh SQLite file, so the database works inside the process and its CPU time
(`time.process_time`) is the whole cost, whatever else loads the machine. The child creates an agency's webhooks
over HTTP through its checkout's own app, then writes `driver.created` events one at a time, each in its own
transaction, through `outbox.record` (the path every risk-data write takes), and reports CPU microseconds per event.
The sides take turns round by round, so a busy machine weighs on each alike.

The sides:
- `five`: 5 webhooks subscribed to `driver.created`, without channels (the fan-out the issue calls today's);
- `fifty`: the same 5 and 45 more whose channels are other risk profiles' (`risk:<uuid>`), which the event's
  channels (`risk:<its profile>`, `profile_type:commercial`) do not match;
- with `--against DIR`: `five` again on checkout DIR's code (for example a worktree of c751e00, before channels).

    python -m bench.fanout --events 2000 --rounds 5 [--against DIR]
"""

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENT = "driver.created"
MATCHING = 5
NOT_MATCHING = 45


def child(scenario: str, events: int) -> dict:
    """Create the scenario's webhooks, write the events; return CPU microseconds per event and the deliveries made."""
    import models
    from api.app import create_app
    from models import migrations
    from models.tenancy import Agency, Risk, Token
    from models.webhooks import Delivery
    from webhooks import outbox

    app = create_app()
    migrations.upgrade()
    with models.db.connection_context():
        agency = Agency.create(name="bench", webhook_limit=1000)
        token = Token.issue(agency)
        risk = Risk.create(agency=agency.id, type="commercial", name="bench")
    hooks = [{"type": "custom", "url": f"https://hooks{i}.bench-receiver.com/in", "events": [EVENT]} for i in range(MATCHING)]
    if scenario == "fifty":
        others = [f"risk:{uuid.uuid4()}" for _ in range(NOT_MATCHING)]
        hooks += [
            {"type": "custom", "url": f"https://other{i}.bench-receiver.com/in", "events": [EVENT], "channels": [name]}
            for i, name in enumerate(others)
        ]
    client = app.test_client()
    body = {"data": [{"object": "webhook", "data": hook} for hook in hooks]}
    answer = client.post("/api/v1/webhooks", json=body, headers={"Authorization": f"Bearer {token}"})
    if answer.status_code != 201:
        raise SystemExit(f"creating the webhooks answered {answer.status_code}: {answer.text}")
    # Before channels (issue 34) `record` took none; a risk-data event now carries its profile's two.
    takes_channels = "channels" in inspect.signature(outbox.record).parameters
    channels = {"channels": [f"risk:{risk.uuid}", "profile_type:commercial"]} if takes_channels else {}
    payload = {"object": "driver", "uuid": "", "risk": str(risk.uuid), "first_name": "Ada", "last_name": "Lovelace"}
    with models.db.connection_context():
        for _ in range(50):  # warm the caches and the code paths
            with models.atomic():
                outbox.record(agency.id, EVENT, [{**payload, "uuid": str(uuid.uuid4())}], **channels)
        before = Delivery.select().count()
        start = time.process_time()
        for _ in range(events):
            with models.atomic():
                outbox.record(agency.id, EVENT, [{**payload, "uuid": str(uuid.uuid4())}], **channels)
        spent = time.process_time() - start
        made = Delivery.select().count() - before
    return {"us_per_event": spent / events * 1e6, "deliveries_per_event": made / events}


def run_side(root: Path, scenario: str, events: int) -> dict:
    """Run one side in a child process of checkout root on a fresh SQLite file; return its figures."""
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **os.environ,
            "PYTHONPATH": str(root),
            "DATABASE_URL": f"sqlite:///{folder}/fanout.db",
            "RISKAPI_RATE_LIMIT": "0",
        }
        out = subprocess.run(
            [sys.executable, __file__, "--child", scenario, "--events", str(events)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if out.returncode != 0:
        raise SystemExit(f"{scenario} in {root} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run the sides in turn, round by round; print each round and the medians with their ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000, help="events written per side and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout: its `five` runs as a third side")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.events)))
        return
    sides = [("five", ROOT, "five"), ("fifty", ROOT, "fifty")]
    if args.against:
        sides.append((f"five@{args.against.name}", args.against.resolve(), "five"))
    figures: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    for round_ in range(1, args.rounds + 1):
        for name, root, scenario in sides:
            result = run_side(root, scenario, args.events)
            figures[name].append(result["us_per_event"])
            print(
                f"round {round_} {name:>16}: {result['us_per_event']:8.1f} µs CPU an event, "
                f"{result['deliveries_per_event']:.0f} deliveries an event",
                flush=True,
            )
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print("\nmedian CPU an event:")
    for name, value in medians.items():
        print(f"  {name:>16}: {value:8.1f} µs  ({value / medians['five']:.2f} of five)")


if __name__ == "__main__":
    main()
