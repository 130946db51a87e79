"""Handlers stay thin (issue 52, point 1): the services own the work and its transaction.

Read from the source: no module of handlers/ opens a transaction or a snapshot (a `with` on
`models.atomic`, `models.snapshot`, a database's `atomic` or `transaction`), and none imports another
resource's handler module (what they share is `handlers.common`, and the package's `settings`). A write's body
reaches its handler as the operation's arguments (`body`, `body_errors`, `dry_run`) and a list's query as
`list_request`, as Connexion's examples take them: no handler reads the request itself (`flask.request`,
`connexion.context`, or either imported by name). And no handler builds or runs a query (`.select(`, `.where(`,
`.execute_sql(`, ...): the rows a list or a probe reads are chosen in services and models.
"""

import ast
from pathlib import Path

HANDLERS = Path(__file__).resolve().parent.parent / "handlers"
TRANSACTIONS = {"atomic", "snapshot", "transaction", "savepoint", "connection_context"}
SHARED = {"handlers", "handlers.common"}
# The calls that build or run a query (Peewee's); `update` and `join`, a dict's and a string's too, are left out.
QUERIES = {"select", "where", "execute_sql", "raw", "dicts", "tuples", "insert", "insert_many", "delete"}
# What a handler would read the request through, by module.
REQUESTS = {"flask": {"request"}, "connexion": {"context"}, "connexion.context": {"context", "operation"}}


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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in QUERIES:
            found.append(f"{path.name}:{node.lineno} runs a query ({node.func.attr})")
        elif isinstance(node, ast.Attribute) and _reads_the_request(node):
            found.append(f"{path.name}:{node.lineno} reads the request ({ast.unparse(node)})")
        elif (
            isinstance(node, ast.ImportFrom) and node.module in REQUESTS and {a.name for a in node.names} & REQUESTS[node.module]
        ):
            found.append(f"{path.name}:{node.lineno} imports the request ({node.module})")
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


def _reads_the_request(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and (node.value.id, node.attr) in {("flask", "request"), ("connexion", "context")}


def test_no_handler_opens_a_transaction_imports_another_handler_or_reads_the_request():
    assert [offence for path in sorted(HANDLERS.glob("*.py")) for offence in offences(path)] == []


def test_the_check_sees_a_transaction_and_an_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import models\nfrom handlers.webhooks import x\nwith models.atomic():\n    pass\n"
        "errors = connexion.context.context.get('body_errors')\nargs = flask.request.args\n"
        "from connexion import context\nfrom flask import request as r\n"
        "rows = Webhook.select().where(Webhook.agency == 1)\n"
    )
    assert sorted(offences(bad)) == [
        "bad.py:2 imports handlers.webhooks",
        "bad.py:3 opens a transaction (atomic)",
        "bad.py:5 reads the request (connexion.context)",
        "bad.py:6 reads the request (flask.request)",
        "bad.py:7 imports the request (connexion)",
        "bad.py:8 imports the request (flask)",
        "bad.py:9 runs a query (select)",
        "bad.py:9 runs a query (where)",
    ]
