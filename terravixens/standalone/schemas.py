"""JSON Schemas of the files a user writes, generated from the pydantic models (so they cannot drift from them).

Editors (VS Code YAML, JetBrains) validate as you type with a first line like
`# yaml-language-server: $schema=../json-schemas/spec.schema.json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schemas() -> dict[str, dict[str, Any]]:
    from terravixens.config.model import Site
    from terravixens.standalone.posture import Posture
    from terravixens.standalone.spec import Spec

    result = {}
    for name, model, title in (
        ("site", Site, "terravixens site file"),
        ("spec", Spec, "terravixens spec file"),
        ("posture", Posture, "terravixens posture file"),
    ):
        schema = model.model_json_schema(mode="validation")
        result[name] = {"$schema": SCHEMA_DIALECT, **schema, "title": title}
    return result


def export(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = folder / f"{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
