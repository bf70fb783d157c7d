"""A small JSON Schema checker for the `--json` shapes in docs/json/ (jsonschema is not a dependency of the project).

It knows the keywords those files use — type (one or a list), const, enum, properties, required,
additionalProperties: false, items — and refuses any other keyword, so a schema cannot rely on one it would
silently ignore. Returns every mismatch with its JSON path; [] when the document fits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SHAPES = Path(__file__).resolve().parent.parent / "docs" / "json"
KNOWN = {"$schema", "$id", "title", "description", "type", "const", "enum", "properties", "required"}
KNOWN |= {"additionalProperties", "items"}
TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


# `show`'s schema ships in the wheel, next to the module that writes it (terravixens/operations/show.schema.json).
PACKAGED = {"show": SHAPES.parent.parent / "terravixens" / "operations" / "show.schema.json"}


def shape(command: str, version: int = 1) -> dict[str, Any]:
    path = PACKAGED.get(command) or SHAPES / f"{'-'.join(command.split())}.v{version}.schema.json"
    return json.loads(path.read_text())


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    return isinstance(value, TYPES[name])


def mismatches(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    unknown = set(schema) - KNOWN
    if unknown:
        return [f"{where}: the schema uses {sorted(unknown)}, which this checker does not know"]
    found: list[str] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, name) for name in names):
            return [f"{where}: {value!r} is not {' or '.join(names)}"]
    if "const" in schema and value != schema["const"]:
        found.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        found += [f"{where}: {key!r} is missing" for key in schema.get("required", []) if key not in value]
        if schema.get("additionalProperties") is False:
            found += [f"{where}: {key!r} is not in the schema" for key in value if key not in properties]
        for key, item in value.items():
            if key in properties:
                found += mismatches(item, properties[key], f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += mismatches(item, schema["items"], f"{where}[{index}]")
    return found


def conforms(document: Any, command: str) -> list[str]:
    """The mismatches of `document` against its command's schema (named by its own `schema` field)."""
    return mismatches(document, shape(command))
