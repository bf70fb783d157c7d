"""Schema conformance: synthesized JSON checked against the committed provider schemas, without Terraform.

Fast enough for the unit suite (pure Python over `terravixens/schemas/*.json`, the format
`terraform providers schema -json` prints). For every resource, data source and provider block it reports unknown
attributes or blocks, missing required ones, computed-only attributes that are set, wrong block nesting and item
counts, and wrong literal types (expressions `${...}` are unknown until plan and are not typed). Each finding names
the stack, the address, the attribute path and what the schema says.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parent / "schemas"
META_ARGUMENTS = {"//", "count", "for_each", "depends_on", "lifecycle", "provider", "provisioner", "connection"}
PROVIDER_META = {"alias", "version"}


@dataclass(frozen=True)
class Finding:
    stack: str
    address: str
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.stack}: {self.address}: {self.path}: {self.problem}"


def load_schemas(folder: Path = SCHEMAS) -> dict[str, dict[str, Any]]:
    """Local provider name -> provider schema, for every committed schema file."""
    schemas = {}
    for path in sorted(folder.glob("*.json")):
        document = json.loads(path.read_text())
        for source, schema in document["provider_schemas"].items():
            schemas[source.rsplit("/", 1)[1]] = schema
    return schemas


def _is_expression(value: object) -> bool:
    return isinstance(value, str) and "${" in value


def _type_name(spec: object) -> str:
    return spec if isinstance(spec, str) else json.dumps(spec)


def _check_type(value: object, spec: object, path: str) -> Iterator[tuple[str, str]]:
    """Yields (path, problem) where a literal value cannot have the schema's type."""
    if value is None or _is_expression(value) or spec == "dynamic":
        return
    if spec == "string":
        if isinstance(value, (dict, list)):
            yield path, f"is a {type(value).__name__}, the schema says string"
    elif spec == "number":
        if isinstance(value, (bool, dict, list)) or (isinstance(value, str) and not _numeric(value)):
            yield path, f"is {value!r}, the schema says number"
    elif spec == "bool":
        if not isinstance(value, bool) and not (isinstance(value, str) and value in ("true", "false")):
            yield path, f"is {value!r}, the schema says bool"
    elif isinstance(spec, list):
        kind, inner = spec[0], spec[1]
        if kind in ("list", "set"):
            if not isinstance(value, list):
                yield path, f"is a {type(value).__name__}, the schema says {_type_name(spec)}"
                return
            for index, item in enumerate(value):
                yield from _check_type(item, inner, f"{path}[{index}]")
        elif kind == "map":
            if not isinstance(value, dict):
                yield path, f"is a {type(value).__name__}, the schema says {_type_name(spec)}"
                return
            for key, item in value.items():
                yield from _check_type(item, inner, f"{path}.{key}")
        elif kind == "object":
            if not isinstance(value, dict):
                yield path, f"is a {type(value).__name__}, the schema says an object"
                return
            for key in sorted(set(value) - set(inner)):
                yield f"{path}.{key}", f"is not an attribute of this object (it has: {', '.join(sorted(inner))})"
            missing = sorted(set(inner) - set(value))
            if missing:
                yield (
                    path,
                    (f"lacks {', '.join(missing)}: every attribute of an object type must be given (null when unset)"),
                )
            for key in sorted(set(value) & set(inner)):
                yield from _check_type(value[key], inner[key], f"{path}.{key}")


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_attributes(body: dict[str, Any], attributes: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    for name, attribute in attributes.items():
        here = f"{path}{name}"
        if name not in body:
            if attribute.get("required"):
                yield here, "is required by the schema and missing"
            continue
        value = body[name]
        if attribute.get("computed") and not (attribute.get("optional") or attribute.get("required")):
            yield here, "is computed by the provider and cannot be set"
        if "nested_type" in attribute:
            yield from _check_nested(value, attribute["nested_type"], here)
        else:
            yield from _check_type(value, attribute.get("type", "dynamic"), here)


def _check_nested(value: object, nested: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    if value is None or _is_expression(value):
        return
    mode = nested["nesting_mode"]
    if mode == "single":
        items = [(path, value)]
        if not isinstance(value, dict):
            yield path, f"is a {type(value).__name__}, the schema says a single nested object"
            return
    elif mode in ("list", "set"):
        if not isinstance(value, list):
            yield path, f"is a {type(value).__name__}, the schema says a {mode} of nested objects"
            return
        items = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    else:  # map
        if not isinstance(value, dict):
            yield path, f"is a {type(value).__name__}, the schema says a map of nested objects"
            return
        items = [(f"{path}.{key}", item) for key, item in value.items()]
    for here, item in items:
        if _is_expression(item) or not isinstance(item, dict):
            continue
        for key in sorted(set(item) - set(nested["attributes"])):
            yield f"{here}.{key}", "is not an attribute of this nested object"
        yield from _check_attributes(item, nested["attributes"], f"{here}.")


def check_block(
    body: dict[str, Any], block: dict[str, Any], path: str = "", ignore: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str]]:
    """Yields (path, problem) for one configuration body against one schema block."""
    attributes = block.get("attributes", {})
    block_types = block.get("block_types", {})
    for key in sorted(set(body) - set(attributes) - set(block_types) - set(ignore)):
        yield f"{path}{key}", "is neither an attribute nor a block of this type"
    yield from _check_attributes(body, attributes, path)
    for name, nested in block_types.items():
        here = f"{path}{name}"
        mode, inner = nested["nesting_mode"], nested["block"]
        value = body.get(name)
        if value is None:
            if nested.get("min_items", 0) > 0:
                yield here, f"is a required block (min_items {nested['min_items']}) and missing"
            continue
        if _is_expression(value):
            continue
        if mode == "single" or (isinstance(value, dict) and mode == "list" and nested.get("max_items") == 1):
            items = [value] if isinstance(value, dict) else None
            if items is None:
                yield here, f"is a {type(value).__name__}, the schema says a single block"
                continue
        elif mode in ("list", "set"):
            items = value if isinstance(value, list) else [value] if isinstance(value, dict) else None
            if items is None:
                yield here, f"is a {type(value).__name__}, the schema says a {mode} of blocks"
                continue
            if nested.get("max_items") and len(items) > nested["max_items"]:
                yield here, f"has {len(items)} blocks, the schema allows at most {nested['max_items']}"
            if len(items) < nested.get("min_items", 0):
                yield here, f"has {len(items)} blocks, the schema needs at least {nested['min_items']}"
        else:  # map
            if not isinstance(value, dict):
                yield here, f"is a {type(value).__name__}, the schema says a map of blocks"
                continue
            items = list(value.values())
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                yield f"{here}[{index}]", f"is a {type(item).__name__}, the schema says a block"
                continue
            prefix = f"{here}[{index}]." if len(items) > 1 or mode != "single" else f"{here}."
            yield from check_block(item, inner, prefix)


def check_stack(
    stack_name: str, stack: dict[str, Any], schemas: dict[str, dict[str, Any]]
) -> tuple[list[Finding], set[str]]:
    """Findings for one synthesized stack, and the providers that have no committed schema (not checked)."""
    findings: list[Finding] = []
    unchecked: set[str] = set()

    def add(address: str, problems: Iterable[tuple[str, str]]) -> None:
        findings.extend(Finding(stack_name, address, path, problem) for path, problem in problems)

    for kind, prefix, section in (("resource", "", "resource_schemas"), ("data", "data.", "data_source_schemas")):
        for block_type, items in stack.get(kind, {}).items():
            if block_type in ("terraform_remote_state", "terraform_data"):
                continue
            provider = block_type.split("_", 1)[0]
            if provider not in schemas:
                unchecked.add(provider)
                continue
            schema = schemas[provider][section].get(block_type)
            for name, body in items.items():
                address = f"{prefix}{block_type}.{name}"
                if schema is None:
                    findings.append(
                        Finding(stack_name, address, block_type, f"is not a {kind} type of provider {provider}")
                    )
                    continue
                add(address, check_block(body, schema["block"], ignore=frozenset(META_ARGUMENTS)))
    for provider, configs in stack.get("provider", {}).items():
        if provider not in schemas:
            unchecked.add(provider)
            continue
        for config in configs:
            add(
                f"provider.{provider}",
                check_block(config, schemas[provider]["provider"]["block"], ignore=frozenset(PROVIDER_META)),
            )
    return findings, unchecked
