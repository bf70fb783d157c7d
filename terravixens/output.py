"""The one seam between what a command found and how it is shown: a report renders as text or as JSON (`--json`).

An operation that reports returns a value (a `Report`: its exit code, its human lines, its document); the command
line picks the renderer. Human text and the JSON document come from the same value, so they cannot disagree, and no
command keeps its own printing for each format. Every document carries `schema`: `terravixens/<command>/v<N>`;
its JSON Schema is docs/json/<command>.v<N>.schema.json and docs/json-output.md shows real output. A change that
removes or renames a field, or changes a field's type, is a new version; adding a field is not.

With `--json` stdout holds the document only (one JSON value, then a newline); progress and human lines that a
script does not need go to stderr. Standard library only: the operations use it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TextIO

SCHEMA = "terravixens/{command}/v{version}"


def schema_id(command: str, version: int = 1) -> str:
    """`terravixens/<command>/v<N>`: `command` as typed, its words joined with `-` ("snapshot list")."""
    return SCHEMA.format(command="-".join(command.split()), version=version)


def document(command: str, body: Mapping[str, Any], version: int = 1) -> dict[str, Any]:
    """The versioned document: `schema` first, then the command's fields."""
    return {"schema": schema_id(command, version), **body}


def dumps(command: str, body: Mapping[str, Any], version: int = 1) -> str:
    return json.dumps(document(command, body, version), indent=2, ensure_ascii=False)


class Report(Protocol):
    """What a reporting operation returns. `command` names its schema; `lines()` is the human text for stdout,
    `notes()` the human text for stderr (problems, refusals: what a script piping stdout must not swallow);
    `body()` the document's fields."""

    @property
    def command(self) -> str: ...

    @property
    def exit_code(self) -> int: ...

    def lines(self) -> Sequence[str]: ...

    def notes(self) -> Sequence[str]: ...

    def body(self) -> Mapping[str, Any]: ...


def render(report: Report, as_json: bool, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Prints `report` as its JSON document on `out` (nothing else there), or as its notes on `err` then its lines on
    `out` (default: stdout and stderr); returns its exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    if as_json:
        print(dumps(report.command, report.body()), file=out, flush=True)
        return int(report.exit_code)
    for stream, lines in ((err, report.notes()), (out, report.lines())):
        if lines:
            print("\n".join(lines), file=stream, flush=True)
    return int(report.exit_code)


__all__ = ["SCHEMA", "Report", "document", "dumps", "render", "schema_id"]
