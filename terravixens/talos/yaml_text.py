"""YAML text of machine configuration patches: PyYAML's output, byte for byte, written directly where that is safe.

PyYAML's pure-Python emitter takes about a millisecond per node patch (docs/adr/0027-synth-speed.md); libyaml's
(yaml.CSafeDumper) is several times faster, but its representer, in Python, still built a node graph for every
scalar, the largest share of what building a node costs in Python at fleet scale (docs/adr/0057-blocks-from-python.md).
For a document made only of mappings with non-empty string keys, lists, integers, booleans, nulls and strings drawn
from `[A-Za-z0-9._/:@=+-]` there is nothing to fold, escape or quote but in one way: a string is written plain, or in
single quotes when PyYAML's resolver would read it back as another type (`yes`, `00`, `12:30:00`, `=`) or its
emitter would not write it plain (`-`, `a:`, `@x`, `---`). `dump` writes such documents itself, with PyYAML's own
resolver deciding the first case and the emitter's rules for this alphabet the second; tests/test_patches.py compares
the text with yaml.safe_dump on generated documents. Any other document (a label value with a space, text from a
library user) goes through PyYAML's own emitter, as before.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

SIMPLE_TEXT = re.compile(r"[A-Za-z0-9._/:@=+-]+\Z")
_RESOLVER = Resolver()
_STR = "tag:yaml.org,2002:str"
INDENT = "  "


def is_simple(value: object) -> bool:
    """Whether `dump` writes `value` itself (see the module docstring)."""
    if isinstance(value, str):
        return SIMPLE_TEXT.match(value) is not None
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, dict):
        return all(isinstance(key, str) and SIMPLE_TEXT.match(key) and is_simple(item) for key, item in value.items())
    if isinstance(value, list):
        return all(is_simple(item) for item in value)
    return False


class _NotSimple(Exception):
    """A value `dump` leaves to PyYAML (see is_simple)."""


@lru_cache(maxsize=4096)
def _text(value: object) -> str:
    """A string of the simple alphabet as PyYAML writes it in block style: plain, or single-quoted."""
    if not isinstance(value, str) or SIMPLE_TEXT.match(value) is None:
        raise _NotSimple(value)
    if _RESOLVER.resolve(ScalarNode, value, (True, False)) != _STR:  # type: ignore[no-untyped-call]
        return f"'{value}'"  # it would read back as a bool, an int, a float, a null, a timestamp, `=` or `<<`
    # PyYAML's Emitter.analyze_scalar on this alphabet: a document marker, an indicator first ('@', or '-' and ':'
    # alone), or ':' last (a key's separator) rule a plain scalar out of block style.
    if value[:3] in ("---", "...") or value[0] == "@" or value in ("-", ":") or value[-1] == ":":
        return f"'{value}'"
    return value


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _text(value)
    raise _NotSimple(value)


def _mapping(mapping: dict[str, Any], indent: str, lines: list[str], first: str | None = None) -> None:
    """Each key at `indent`; the first one after `first` instead when the mapping is a list item ("- ")."""
    for index, key in enumerate(sorted(mapping)):
        lead = first if index == 0 and first is not None else indent
        _value(f"{lead}{_text(key)}:", mapping[key], indent, lines)


def _sequence(items: list[Any], indent: str, lines: list[str], first: str | None = None) -> None:
    """Each item after "- " at `indent` (the first after `first` when the list is itself an item)."""
    for index, item in enumerate(items):
        dash = (first if index == 0 and first is not None else indent) + "- "
        if isinstance(item, dict) and item:
            _mapping(item, indent + INDENT, lines, dash)
        elif isinstance(item, list) and item:
            _sequence(item, indent + INDENT, lines, dash)
        else:
            lines.append(dash + _inline(item))


def _value(head: str, value: object, indent: str, lines: list[str]) -> None:
    """A key's value: a mapping below it, indented; a list below it at the key's own indent (PyYAML's indentless
    sequences); a scalar or an empty collection after it."""
    if isinstance(value, dict) and value:
        lines.append(head)
        _mapping(value, indent + INDENT, lines)
    elif isinstance(value, list) and value:
        lines.append(head)
        _sequence(value, indent, lines)
    else:
        lines.append(f"{head} {_inline(value)}")


def _inline(value: object) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump(document: dict[str, Any]) -> str:
    """yaml.safe_dump(document, sort_keys=True, default_flow_style=False), the same text."""
    if document and isinstance(document, dict):
        lines: list[str] = []
        try:  # one pass: a value outside the domain stops it (is_simple(document) is False then)
            _mapping(document, "", lines)
        except _NotSimple:
            pass
        else:
            return "\n".join(lines) + "\n"
    return yaml.safe_dump(document, sort_keys=True, default_flow_style=False)
