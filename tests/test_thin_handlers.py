"""Handlers stay thin (issue 52, point 1): the services own the work and its transaction.

Read from the source: no module of handlers/ opens a transaction or a snapshot (a `with` on
`models.atomic`, `models.snapshot`, a database's `atomic` or `transaction`), and none imports another
resource's handler module (what they share is `handlers.common`, and the package's `settings`).
"""

import ast
from pathlib import Path

HANDLERS = Path(__file__).resolve().parent.parent / "handlers"
TRANSACTIONS = {"atomic", "snapshot", "transaction", "savepoint", "connection_context"}
SHARED = {"handlers", "handlers.common"}


def offences(path: Path) -> list[str]:
    """Return what a handler module does that a service should."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                name = call.func.attr if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None
                if name in TRANSACTIONS:
                    found.append(f"{path.name}:{node.lineno} opens a transaction ({name})")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "handlers":
            names = {node.module} if node.module != "handlers" else {f"handlers.{alias.name}" for alias in node.names}
            found += [f"{path.name}:{node.lineno} imports {name}" for name in names - SHARED - {"handlers.settings"}]
        elif isinstance(node, ast.Import):
            found += [
                f"{path.name}:{node.lineno} imports {a.name}"
                for a in node.names
                if a.name.startswith("handlers.") and a.name not in SHARED
            ]
    return found


def test_no_handler_opens_a_transaction_or_imports_another_handler():
    assert [offence for path in sorted(HANDLERS.glob("*.py")) for offence in offences(path)] == []


def test_the_check_sees_a_transaction_and_an_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import models\nfrom handlers.webhooks import x\nwith models.atomic():\n    pass\n")
    assert sorted(offences(bad)) == ["bad.py:2 imports handlers.webhooks", "bad.py:3 opens a transaction (atomic)"]
