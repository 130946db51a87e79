"""Check spec/openapi.yaml beyond what OpenAPI validators and linters see (run by `tox -e spec`).

    python -m tools.spec_check            every check below; exit 1 naming each problem

1. every schema object says only what JSON Schema and OpenAPI know (tools.spec_keywords);
2. every example is valid against its schema, and every event has a valid payload example
   (tools.spec_examples).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from tools import spec_doc, spec_examples, spec_keywords

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "openapi.yaml"


def problems(doc: dict) -> list[str]:
    """Return every problem of a document, each naming where it is."""
    found = [f"unknown keyword: {p}" for p in spec_keywords.check(doc)]
    found += [f"invalid example: {p}" for p in spec_examples.check(doc)]
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the checks on the working tree's spec; print each problem."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=pathlib.Path, default=SPEC)
    args = parser.parse_args(argv)
    found = problems(spec_doc.load(args.spec))
    for problem in found:
        print(problem, file=sys.stderr)
    print(f"{args.spec.name}: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
