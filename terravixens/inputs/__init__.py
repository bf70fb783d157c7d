"""Strict, bounded reading of every file the terravixens CLI takes from a user (site files, plan JSON, specs, …).

A file from careless or hostile hands must never hang the CLI, exhaust its memory, print a traceback, echo a
secret into a CI log or be silently merged: each check below turns into one short located problem instead.

    read_text(path, limit=…, what=…)   regular files (or '-' for stdin) only, size-capped, UTF-8 with a located error
    load_yaml(text, path)              one YAML document; duplicate keys refused with both lines; depth, value count,
                                       alias expansion and numbers bounded; returns the data and each field's line
    load_json(text, path)              the same guarantees for JSON (plans from `terraform show -json`)

Standard library only until YAML is read: the YAML reader (and PyYAML) is imported on first use of `load_yaml`,
`Lines` or `YamlLimits`, so the node client (terravixens.specclient) reads its files with nothing but Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from terravixens.inputs.json_strict import JsonObject, load_json
from terravixens.inputs.problems import InputError, Problem, looks_secret, shown, shown_at
from terravixens.inputs.reading import private_mode_problem, read_text

if TYPE_CHECKING:
    from terravixens.inputs.yaml_strict import Lines, YamlLimits, load_yaml

_YAML = ("Lines", "YamlLimits", "load_yaml")


def __getattr__(name: str) -> Any:
    if name in _YAML:
        from terravixens.inputs import yaml_strict

        return getattr(yaml_strict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "InputError",
    "JsonObject",
    "Lines",
    "Problem",
    "YamlLimits",
    "load_json",
    "load_yaml",
    "looks_secret",
    "private_mode_problem",
    "read_text",
    "shown",
    "shown_at",
]
