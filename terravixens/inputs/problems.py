"""What is wrong with an input file, said briefly: located, bounded, and never echoing a secret."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# A value under a key like these is never printed: a secret pasted under a mistyped key must not reach a CI log.
SECRET_KEY = re.compile(r"token|passw|secret|credential|private|(?:^|[_-])key$|^key", re.IGNORECASE)
VALUE_LIMIT = 80
LINE_LIMIT = 400
MAX_REPORTED = 40

# Where a value sits in a file: keys and list indexes from the top (pydantic's `loc`, the YAML reader's paths).
FieldPath = tuple[object, ...]


def looks_secret(key: object) -> bool:
    return isinstance(key, str) and bool(SECRET_KEY.search(key))


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown(value: object, limit: int = VALUE_LIMIT) -> str:
    """A value as a message shows it: containers by their size only (they may hold secrets), scalars truncated."""
    if isinstance(value, dict):
        return f"a mapping of {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return _truncate(repr(value), limit)


def shown_at(path: FieldPath, value: object) -> str:
    """`shown(value)`, unless any key on the way to it looks like it holds a secret."""
    if any(looks_secret(part) for part in path):
        return "(value hidden: the key looks like it holds a secret)"
    return shown(value)


@dataclass(frozen=True)
class Problem:
    """One problem: where (a field path, or '(file)'), what and the fix, and the line when it is known."""

    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            where = self.field
        elif self.field == "(file)":
            where = f"line {self.line}"
        else:
            where = f"line {self.line}, {self.field}"
        return _truncate(f"{where}: {self.message}", LINE_LIMIT)


class InputError(Exception):
    """An input file that cannot be used. `str()` is the whole report, bounded, ready to print."""

    def __init__(self, path: Path | str, problems: list[Problem], what: str = "input file"):
        self.path = str(path)
        self.problems = problems
        self.what = what
        count = len(problems)
        lines = [f"{self.path}: {count} problem{'s' if count != 1 else ''} in the {what}"]
        lines += [f"  - {problem}" for problem in problems[:MAX_REPORTED]]
        if count > MAX_REPORTED:
            lines.append(f"  … and {count - MAX_REPORTED} more: fix these first")
        super().__init__("\n".join(lines))


def field_path(location: FieldPath) -> str:
    return ".".join(str(part) for part in location) or "(top level)"
