"""Sections in order, each planned on the node as the sections before it left it, then applied; the JSON result.

    {"schema": "terravixens/agent-result/v1", "schema_version": 1, "identity": "dns1", "mode": "apply", "ok": true,
     "changed": 2, "seconds": 0.41,
     "sections": [{"name": "hostname", "changes": ["hostname debian -> dns1"], "failed": null}, …]}

`--dry-run` plans every section against the node as it is (a later section may then list a step that an earlier
one would have made unnecessary, e.g. keys of a user not yet added) and changes nothing. A failing step stops its
section (the rest of it would build on it) and the run goes on with the next: the result says which failed and why.
A change refused when planned (a link the agent will not follow, a system account) is never run, in a dry run too:
it fails its section without stopping the section's other changes, which do not build on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from terravixens.agent.desired import SCHEMA_VERSION, Desired
from terravixens.agent.sections import SECTIONS
from terravixens.agent.system import Node, Refused


@dataclass
class SectionResult:
    name: str
    changes: list[str] = field(default_factory=list)
    failed: str | None = None


@dataclass
class Result:
    identity: str
    dry_run: bool
    sections: list[SectionResult]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(section.failed is None for section in self.sections)

    @property
    def changed(self) -> int:
        return sum(len(section.changes) for section in self.sections)

    def document(self) -> dict[str, Any]:
        return {
            "schema": "terravixens/agent-result/v1",  # docs/json/agent-result.v1.schema.json
            "schema_version": SCHEMA_VERSION,
            "identity": self.identity,
            "mode": "dry-run" if self.dry_run else "apply",
            "ok": self.ok,
            "changed": self.changed,
            "seconds": round(self.seconds, 3),
            "sections": [{"name": s.name, "changes": s.changes, "failed": s.failed} for s in self.sections],
        }

    def lines(self) -> list[str]:
        verb = "would change" if self.dry_run else "changed"
        out = []
        for section in self.sections:
            for change in section.changes:
                out.append(f"{section.name}: {change}")
            if section.failed:
                out.append(f"{section.name}: FAILED: {section.failed}")
        failed = [s.name for s in self.sections if s.failed]
        summary = f"{self.identity}: {verb} {self.changed} item(s) in {self.seconds:.2f} s"
        if failed:
            summary += f"; failed: {', '.join(failed)} (the other sections are applied)"
        elif not self.changed:
            summary = f"{self.identity}: in line with its spec, nothing to do ({self.seconds:.2f} s)"
        return [*out, summary]


def converge(node: Node, want: Desired, dry_run: bool = False) -> Result:
    started = time.monotonic()
    results = []
    for section in SECTIONS:
        result = SectionResult(section.name)
        results.append(result)
        try:
            changes = section.plan(node, want)
        except Refused as error:
            result.failed = str(error)
            continue
        except OSError as error:
            result.failed = f"cannot read the node: {error}"
            continue
        failures = []
        for change in changes:
            if change.refused:
                failures.append(f"{change.text}: {change.refused}")
                continue
            if dry_run:
                result.changes.append(change.text)
                continue
            try:
                failure = change.step()
            except Refused as error:
                failure = str(error)
            except OSError as error:
                failure = f"{error.strerror or error}: {getattr(error, 'filename', '') or ''}".rstrip(": ")
            if failure:
                failures.append(f"{change.text}: {failure}")
                break
            result.changes.append(change.text)
        result.failed = "; ".join(failures) or None
    return Result(want.identity, dry_run, results, time.monotonic() - started)
