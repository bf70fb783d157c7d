"""YAML text of machine configuration patches: PyYAML's output, byte for byte, at libyaml's speed where that is safe.

PyYAML's pure-Python emitter takes about a millisecond per node patch, the largest share of what building a node
costs in Python (docs/adr/0027-synth-speed.md). libyaml's emitter (yaml.CSafeDumper) is several times faster but
does not always write the same bytes: it folds long double-quoted strings and writes empty keys differently. For a
document made only of mappings with non-empty string keys, lists, integers, booleans, nulls and strings drawn from
`[A-Za-z0-9._/:@=+-]` there is nothing to fold, escape or quote differently (no space, no quote, nothing
non-printable), and both write the same text (tests/test_patches.py compares them on generated documents). Such
documents — every patch of a site the model accepted, addresses, names, images and labels — go through libyaml; any
other document (a label value with a space, text from a library user) through PyYAML's own emitter, as before.
"""

from __future__ import annotations

import re

import yaml

SIMPLE_TEXT = re.compile(r"[A-Za-z0-9._/:@=+-]+\Z")
_FAST = getattr(yaml, "CSafeDumper", None)


def is_simple(value) -> bool:
    """Whether libyaml writes `value` exactly as PyYAML does (see the module docstring)."""
    if isinstance(value, str):
        return SIMPLE_TEXT.match(value) is not None
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, dict):
        return all(isinstance(key, str) and SIMPLE_TEXT.match(key) and is_simple(item) for key, item in value.items())
    if isinstance(value, list):
        return all(is_simple(item) for item in value)
    return False


def dump(document: dict) -> str:
    """yaml.safe_dump(document, sort_keys=True, default_flow_style=False), the same text."""
    if _FAST is not None and is_simple(document):
        return yaml.dump(document, Dumper=_FAST, sort_keys=True, default_flow_style=False)
    return yaml.safe_dump(document, sort_keys=True, default_flow_style=False)
