"""The breaking-change gate: the working tree's spec against the last release, under the versioning policy.

The policy (README.md, "Editing the spec"), on `info.version` = MAJOR.MINOR.PATCH:
- a change that breaks a client (tools.spec_diff) passes only with MAJOR raised above the last
  release's, and spec/CHANGELOG.md regenerated so that its section for the new version names it;
- once the version is raised, an addition or a deprecation needs at least MINOR raised;
- the version never goes below the last release's; spec/CHANGELOG.md is always current.
Changes that break nothing pass with the version as it is: they are listed when it is raised.
"""

from __future__ import annotations

from tools import spec_changelog, spec_diff, spec_doc

RUN = "python -m tools.spec_changelog"


def check(current: dict, released: list[tuple[str, dict]], changelog: str | None) -> list[str]:
    """Return the gate's problems: each unrecorded break by name and place, a version off the policy, a stale changelog."""
    problems: list[str] = []
    breaks: list[str] = []
    last_version = ""
    if released:
        last_version, last = released[-1]
        new, old = spec_doc.version(current), spec_doc.version(last)
        changes = spec_diff.compare(last, current)
        breaks = changes.breaking()
        if new < old:
            problems.append(f"info.version {current['info']['version']} is below the last release, {last_version}")
        elif breaks and new[:1] <= old[:1]:
            bump = f"{old[0] + 1}.0.0"
            problems += [f"breaking change (against {last_version}): {line}" for line in breaks]
            problems.append(
                f"{len(breaks)} breaking change(s) against the released {last_version}: undo them, or break on purpose "
                f"(raise info.version to {bump} and run `{RUN}` to record them in spec/CHANGELOG.md)"
            )
        elif new != old and (changes.of_kind("added") or changes.of_kind("deprecated")) and new[:2] <= old[:2]:
            problems.append(f"info.version {current['info']['version']}: additions and deprecations raise at least MINOR")
    if changelog != spec_changelog.render(current, released):
        # Under a raised, unreleased MAJOR a further break passes the policy: the changelog is then what names it.
        unrecorded = [line for line in breaks if line not in (changelog or "") and not problems]
        problems += [f"breaking change not in spec/CHANGELOG.md (against {last_version}): {line}" for line in unrecorded]
        problems.append(f"spec/CHANGELOG.md is not current: run `{RUN}`")
    return problems
