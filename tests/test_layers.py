"""Layers: imports run one way, from the composition root down to the infrastructure (ARCHITECTURE.md).

Every import of every module counts, function-level ones included: a cycle hidden inside a function is
still a cycle. A module's layer is the first entry of LAYERS whose prefix names it.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"riskapi": ROOT / "riskapi", "riskapi.handlers": ROOT / "handlers", "riskapi.models": ROOT / "models",
           "riskapi.jobs": ROOT / "jobs"}  # fmt: skip

# (layer, module prefixes), top to bottom.
LAYERS = [
    ("composition", ["riskapi.cli", "riskapi.server", "riskapi.listener"]),
    ("api", ["riskapi.app", "riskapi.middleware", "riskapi.errors", "riskapi.docs", "riskapi.request_validators", "riskapi.turns",
             "riskapi.connexion_internals", "riskapi.ratelimit", "riskapi.resolver"]),
    ("handlers", ["riskapi.handlers", "riskapi.precognition"]),
    ("workers", ["riskapi.jobs.worker", "riskapi.jobs.rq_internals", "riskapi.jobs.relay", "riskapi.jobs.inflight",
                 "riskapi.jobs.recorder", "riskapi.jobs.claims", "riskapi.jobs.batch", "riskapi.jobs.delivery",
                 "riskapi.jobs.queue", "riskapi.jobs.retention", "riskapi.jobs.pacing", "riskapi.jobs.slowness",
                 "riskapi.jobs.broker", "riskapi.jobs.transport", "riskapi.jobs.connections"]),
    # Risk data's write and list services, and the webhook write side (outbox, URL rules, secrets).
    ("domain", ["riskapi.writes", "riskapi.risk_writes", "riskapi.bulk", "riskapi.query", "riskapi.pagination",
                "riskapi.render", "riskapi.validation", "riskapi.auth", "riskapi.jobs.outbox", "riskapi.jobs.webhook_urls",
                "riskapi.jobs.signing"]),
    ("observability", ["riskapi.metrics", "riskapi.logs"]),
    ("models", ["riskapi.models"]),
    ("infrastructure", ["riskapi.config", "riskapi.spec", "riskapi.wake", "riskapi.problems", "riskapi.messages"]),
]  # fmt: skip
ORDER = [name for name, _ in LAYERS]
# What each layer may import besides itself. The API and the workers never import each other: only
# the composition root (cli, server) puts them together.
MAY_IMPORT = {
    "composition": set(ORDER),
    "api": {"handlers", "domain", "observability", "models", "infrastructure"},
    "handlers": {"domain", "models", "infrastructure"},
    "workers": {"domain", "observability", "models", "infrastructure"},
    "domain": {"models", "infrastructure"},
    "observability": {"models", "infrastructure"},
    "models": {"infrastructure"},
    "infrastructure": set(),
}


def layer_of(module: str) -> str:
    if module in ("riskapi", "riskapi.jobs"):
        return "infrastructure"  # packages whose __init__ holds a docstring, a version, a warnings filter
    for name, prefixes in LAYERS:
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return name
    raise AssertionError(f"{module} is in no layer")


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Return the project modules a module imports (as modules: `from riskapi import models` is riskapi.models)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [name for name in names if name in known] or [node.module]  # submodules, or names of a module
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                out.add(name)
    return out


def arrows() -> dict[tuple[str, str], set[str]]:
    found = modules()
    graph: dict[tuple[str, str], set[str]] = {}
    for module, path in found.items():
        for target in imports(module, path, set(found)):
            source_layer, target_layer = layer_of(module), layer_of(target)
            if source_layer != target_layer:
                graph.setdefault((source_layer, target_layer), set()).add(f"{module} -> {target}")
    return graph


def test_no_generic_top_level_package_is_imported():
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "level", 0) == 0:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for name in names:
                    assert name.split(".")[0] not in {"models", "jobs", "handlers", "spec"}, f"{module}: import {name}"


def test_imports_run_down_the_layers_only():
    wrong = {
        pair: sorted(edges) for pair, edges in arrows().items() if pair[1] not in MAY_IMPORT[pair[0]]
    }
    assert not wrong, "\n".join(f"{a} -> {b}: {edges}" for (a, b), edges in wrong.items())


if __name__ == "__main__":  # print the layer graph: python -m tests.test_layers
    for (source, target), edges in sorted(arrows().items(), key=lambda item: (ORDER.index(item[0][0]), ORDER.index(item[0][1]))):
        print(f"{source:>14} -> {target:<14} ({len(edges)} imports)")
