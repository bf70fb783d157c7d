"""A specs folder: `<name>.yaml` is the spec `name`, `postures/<name>.yaml` the posture `name` (ADR 0018).

Every file goes through the strict bounded reader. All files are read and every problem of every file is reported
at once (`CatalogError`), each naming its own file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from terravixens.config.model import DNS_LABEL
from terravixens.inputs import InputError, Lines, Problem, shown
from terravixens.standalone.files import M, load_model
from terravixens.standalone.posture import SHIPPED_POSTURES, Posture
from terravixens.standalone.spec import Spec

SPEC = "spec file"
POSTURE = "posture file"
POSTURES_DIR = "postures"
MAX_FILES = 10_000
REFERENCE = "docs/standalone.md"


class CatalogError(Exception):
    """Problems in one or more files. `str()` is every file's report, ready to print."""

    def __init__(self, errors: list[InputError]):
        self.errors = errors
        super().__init__("\n".join(str(error) for error in errors))


@dataclass(frozen=True)
class Loaded:
    path: Path
    lines: Lines


@dataclass
class Catalog:
    folder: Path
    specs: dict[str, Spec] = field(default_factory=dict)
    postures: dict[str, Posture] = field(default_factory=lambda: dict(SHIPPED_POSTURES))
    files: dict[tuple[str, str], Loaded] = field(default_factory=dict)  # ("spec"|"posture", name) -> file

    def spec_file(self, name: str) -> Loaded:
        return self.files[("spec", name)]


def _yaml_files(folder: Path, what: str, errors: list[InputError]) -> list[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        errors.append(InputError(folder, [Problem("(file)", "is not a folder: give the specs folder")], what))
        return []
    except OSError as error:
        errors.append(InputError(folder, [Problem("(folder)", f"cannot be listed ({error.strerror})")], what))
        return []
    if len(entries) > MAX_FILES:
        errors.append(
            InputError(
                folder,
                [
                    Problem(
                        "(folder)",
                        f"holds {len(entries):,} entries, over the "
                        f"{MAX_FILES:,} limit: check that this is the specs "
                        f"folder",
                    )
                ],
                what,
            )
        )
        return []
    found = []
    for entry in entries:
        path = Path(entry.path)
        if entry.name.endswith(".yml"):
            errors.append(
                InputError(
                    path,
                    [Problem("(file)", f"is named .yml: rename it {path.stem}.yaml (only .yaml files are read)")],
                    what,
                )
            )
        elif entry.name.endswith(".yaml"):
            if not DNS_LABEL.fullmatch(path.stem):
                message = (
                    f"name {shown(path.stem)} is not a DNS label: the file name is the {what.split()[0]}'s "
                    f"name, referenced from the site file; use lowercase letters, digits and '-'"
                )
                errors.append(InputError(path, [Problem("(file)", message)], what))
            else:
                found.append(path)
    return found


def _load(kind: str, model: type[M], path: Path, what: str, catalog: Catalog, errors: list[InputError]) -> M | None:
    try:
        loaded, lines = load_model(model, path, what=what, reference=REFERENCE)
    except InputError as error:
        errors.append(error)
        return None
    catalog.files[(kind, path.stem)] = Loaded(path, lines)
    return loaded


def load_catalog(folder: Path | str) -> Catalog:
    """Every spec and posture of `folder`; raises CatalogError listing every problem of every file."""
    folder = Path(folder)
    catalog = Catalog(folder)
    errors: list[InputError] = []
    _load_postures(catalog, errors)
    for path in _yaml_files(folder, SPEC, errors):
        spec = _load("spec", Spec, path, SPEC, catalog, errors)
        if spec is not None:
            catalog.specs[path.stem] = spec
    errors += _unknown_postures(catalog)
    if errors:
        raise CatalogError(errors)
    return catalog


def load_spec_file(path: Path | str) -> tuple[Spec, Catalog]:
    """One spec file, with the postures of its folder (to check its posture reference)."""
    path = Path(path)
    catalog = Catalog(path.parent)
    errors: list[InputError] = []
    _load_postures(catalog, errors)
    spec = _load("spec", Spec, path, SPEC, catalog, errors)
    if spec is not None:
        catalog.specs[path.stem] = spec
        errors += _unknown_postures(catalog)
    if errors or spec is None:  # no spec: its problems are in errors
        raise CatalogError(errors)
    return spec, catalog


def _unknown_postures(catalog: Catalog) -> list[InputError]:
    errors = []
    for name, spec in catalog.specs.items():
        if spec.access.posture not in catalog.postures:
            loaded = catalog.spec_file(name)
            message = (
                f"unknown posture {shown(spec.access.posture)}: use one of "
                f"{', '.join(sorted(catalog.postures))} or add {POSTURES_DIR}/{spec.access.posture}.yaml "
                f"next to the spec"
            )
            errors.append(
                InputError(
                    loaded.path, [Problem("access.posture", message, loaded.lines.of(("access", "posture")))], SPEC
                )
            )
    return errors


def _load_postures(catalog: Catalog, errors: list[InputError]) -> None:
    for path in _yaml_files(catalog.folder / POSTURES_DIR, POSTURE, errors):
        posture = _load("posture", Posture, path, POSTURE, catalog, errors)
        if posture is not None:
            catalog.postures[path.stem] = posture
