"""A delivery's state has one owner: only models.delivery_states writes a delivery's state columns.

Read from the source (kept simple on purpose): a write is a call of `Delivery.<write>(...)` (every Peewee
write but delete: retention's purge changes no state), a call passing `Delivery` to an `insert` (the
batched inserts of models.inserts), an assignment `<delivery>.<state column> = ...` or `<delivery>.save()`
(a name spelt with "deliver"), or SQL text that updates or inserts into the delivery table. Tests may
set up rows as they need: the product's trees and the benchmarks are read.
"""

import ast
import re
from pathlib import Path

from models import delivery_states

ROOT = Path(__file__).resolve().parent.parent
TREES = ("riskapi", "api", "handlers", "services", "webhooks", "jobs", "models", "foundation", "bench", "tools", "toolkit")
OWNER = ROOT / "models" / "delivery_states.py"
WRITES = {"update", "insert", "insert_many", "insert_from", "replace", "replace_many", "create", "get_or_create", "save"}
WRITES |= {"bulk_create", "bulk_update"}
RAW = re.compile(r"\b(update|insert\s+into)\s+\"?delivery\"?\s", re.I)


def _named_delivery(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "deliver" in name.lower()


def writes(source: str) -> list[int]:
    """Return the lines of a module's source that write a delivery's state."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            on, method = node.func.value, node.func.attr
            if method in WRITES and isinstance(on, ast.Name) and on.id == "Delivery":
                found.append(node.lineno)
            elif method.startswith("insert") and any(isinstance(arg, ast.Name) and arg.id == "Delivery" for arg in node.args):
                found.append(node.lineno)
            elif method == "save" and _named_delivery(on):
                found.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in delivery_states.STATE and _named_delivery(target.value):
                    found.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and RAW.search(node.value):
            found.append(node.lineno)
    return sorted(found)


def test_only_the_owner_writes_a_deliverys_state():
    strays = []
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if path != OWNER:
                strays += [f"{path.relative_to(ROOT)}:{line}" for line in writes(path.read_text(encoding="utf-8"))]
    assert strays == [], "write a delivery's state through models.delivery_states"


def test_the_check_sees_each_kind_of_write():
    source = """
Delivery.update(status="failed").where(x).execute()
inserts.insert(Delivery, COLUMNS, rows)
delivery.locked_until = None
item.delivery.save()
db.execute_sql('UPDATE delivery SET status = %s')
Delivery.delete().where(x).execute()
Delivery.select().where(Delivery.status == PENDING)
"""
    assert writes(source) == [2, 3, 4, 5, 6]


def test_outcomes_decide_stays_pure():
    """jobs.outcomes.decide decides; it reads no model and writes nothing (models.delivery_states writes)."""
    module = ast.parse((ROOT / "jobs" / "outcomes.py").read_text(encoding="utf-8"))
    decide = next(node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "decide")
    names = {node.id for node in ast.walk(decide) if isinstance(node, ast.Name)}
    assert not names & {"Delivery", "Webhook", "Attempt", "models", "delivery_states", "inserts", "metrics", "notices"}
