"""Check spec/openapi.yaml beyond what OpenAPI validators and linters see (run by `tox -e spec`).

    python -m tools.spec_check            every check below; exit 1 naming each problem

1. every schema object says only what JSON Schema and OpenAPI know (tools.spec_keywords);
2. every example is valid against its schema, and every event has a valid payload example
   (tools.spec_examples);
3. no change breaks a client against the last released spec (spec/released/), unless the version
   is raised as the policy says, and spec/CHANGELOG.md is current (tools.spec_gate).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from tools import spec_changelog, spec_doc, spec_examples, spec_gate, spec_keywords

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "openapi.yaml"


def problems(doc: dict, released: list[tuple[str, dict]] | None = None, changelog: str | None = None) -> list[str]:
    """Return every problem of a document, each naming where it is (the gate's too, given the releases and changelog)."""
    found = [f"unknown keyword: {p}" for p in spec_keywords.check(doc)]
    found += [f"invalid example: {p}" for p in spec_examples.check(doc)]
    if released is not None:
        found += spec_gate.check(doc, released, changelog)
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the checks on the working tree's spec; print each problem."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=pathlib.Path, default=SPEC)
    args = parser.parse_args(argv)
    changelog = spec_changelog.CHANGELOG
    text = changelog.read_text(encoding="utf-8") if changelog.exists() else None
    found = problems(spec_doc.load(args.spec), spec_changelog.releases(), text)
    for problem in found:
        print(problem, file=sys.stderr)
    print(f"{args.spec.name}: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
