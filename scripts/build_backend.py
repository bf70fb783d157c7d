"""setuptools' build backend, refusing a wheel or an sdist without the generated provider bindings (ADR 0041).

The bindings (terravixens/_bindings/, `cdktf get` output) are generated, not committed: a wheel built before
`make setup` silently lacked them and failed at the first synth with ModuleNotFoundError. Editable installs are not
checked: `pipenv sync` installs the package editable before the bindings exist, and the editable finder maps the
whole package, bindings included once they are generated. Standard library and setuptools only (pyproject.toml's
backend-path; pip runs it in the build environment).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403  (every other hook is setuptools' own)

BINDINGS = Path("terravixens") / "_bindings"
COMMAND = "make setup` (or `python3 scripts/providers.py bindings`)"


def missing_bindings(root: Path) -> list[str]:
    """The providers of cdktf.json (an sdist has none: the bindings' constraints.json then) without a generated
    package under terravixens/_bindings/."""
    project = root / "cdktf.json"
    if project.is_file():
        names = [
            item.partition("@")[0].split("/")[-1] for item in json.loads(project.read_text())["terraformProviders"]
        ]
    else:
        constraints = root / BINDINGS / "constraints.json"
        names = sorted(json.loads(constraints.read_text())["providers"]) if constraints.is_file() else ["(all)"]
    return [name for name in names if not (root / BINDINGS / name / "__init__.py").is_file()]


def check(root: Path) -> None:
    missing = missing_bindings(root)
    if missing:
        raise SystemExit(
            f"terravixens: no generated provider bindings in {BINDINGS}/ for {', '.join(missing)}: "
            f"run `{COMMAND} in the checkout before building a wheel"
        )


def build_wheel(
    wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    check(Path.cwd())
    return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    check(Path.cwd())
    return build_meta.build_sdist(sdist_directory, config_settings)
