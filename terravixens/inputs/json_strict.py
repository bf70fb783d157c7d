"""JSON with the same guarantees as the YAML loader: duplicate keys refused, depth and numbers bounded, no traceback.

Used for plans (`terraform show -json` output, which can be hundreds of MB): the C scanner does the parsing; the
hooks below only see each object's pairs and each number's text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NoReturn

from terravixens.inputs.problems import InputError, Problem, shown

MAX_DEPTH = 100
# A JSON object as a reader holds it once its shape is checked (plans, states, etcd's status): keys are text, values
# whatever JSON allows.
JsonObject = dict[str, Any]
MAX_INT_DIGITS = 20


class _Duplicate(Exception):
    def __init__(self, key: str):
        self.key = key


class _BadNumber(Exception):
    def __init__(self, text: str):
        self.text = text


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return result


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _BadNumber(text)
    return int(text)


def _constant(text: str) -> NoReturn:
    raise _BadNumber(text)


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _duplicate_lines(text: str, key: str) -> str:
    """Where a duplicated key appears (first occurrences of the quoted key): found only when there is one."""
    found = [_line(text, match.start()) for match in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)]
    return f" (lines {', '.join(map(str, found[:4]))}{'…' if len(found) > 4 else ''})" if found else ""


def _depth_problem(data: object, limit: int) -> bool:
    level = [data]
    for _ in range(limit + 1):
        level = [
            child
            for item in level
            if isinstance(item, (dict, list))
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return True


def load_json(text: str, path: Path | str, *, what: str = "file", max_depth: int = MAX_DEPTH) -> object:
    def fail(where: str, message: str, line: int | None = None) -> NoReturn:
        raise InputError(path, [Problem(where, message, line)], what) from None

    try:
        data = json.loads(text, object_pairs_hook=_pairs, parse_int=_integer, parse_constant=_constant)
    except json.JSONDecodeError as error:
        fail("(file)", f"is not valid JSON: {error.msg} (column {error.colno})", error.lineno)
    except _Duplicate as duplicate:
        fail(
            "(file)",
            f"key {shown(duplicate.key)} appears twice in one object"
            f"{_duplicate_lines(text, duplicate.key)}: JSON readers would keep only one silently; "
            f"regenerate the file",
        )
    except _BadNumber as bad:
        fail(
            "(file)", f"number {shown(bad.text)} is out of range: numbers here are finite and below 10^{MAX_INT_DIGITS}"
        )
    except RecursionError:
        fail("(file)", f"is nested more than {max_depth} levels deep: check that this is the right file")
    if _depth_problem(data, max_depth):
        fail("(file)", f"is nested more than {max_depth} levels deep: check that this is the right file")
    return data
