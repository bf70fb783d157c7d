"""Loads a site file and turns every problem into a message naming the file, the line, the field, the bad value
(truncated, never a secret) and the fix.

Three steps, each reporting every problem it finds (docs/adr/0017-site-validation-in-three-steps.md):
1. reading and YAML parsing, strict and bounded (terravixens.inputs): a 1 MiB cap, regular files only, duplicate
   keys refused with both lines, no unbounded alias expansion or nesting;
2. the typed model (pydantic): types, per-field rules, and site text without Terraform templates (ADR 0016); with
   it, what the model would read differently from what the file says (terravixens.config.coercion: keys that become
   one key once coerced, VLAN ids not written as numbers, integers YAML reads in base 8 or 60 — ADR 0032);
3. once the model is valid, the rules that need the whole site (terravixens.config.site_rules.RULES).

A rule's `Caution` does not refuse the site: `warnings(site, lines)` locates them for `validate` (`load_checked`)
and `show`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from terravixens.config import coercion, site_rules
from terravixens.config.model import Site
from terravixens.config.storage import STORAGE_TYPES
from terravixens.inputs import InputError, Lines, Problem, load_yaml, looks_secret, read_text, shown_at
from terravixens.inputs.problems import field_path

# Relative to the folder the command runs in (a checkout, or a site repository laid out like one): never a path inside
# the installed package, which would be site-packages/sites/example.yaml once installed from a wheel.
DEFAULT_SITE = Path("sites") / "example.yaml"
SITE_ENV = "TERRAVIXENS_SITE"
SITE_LIMIT = 1024 * 1024
WHAT = "site file"

SiteProblem = Problem


class SiteError(InputError):
    """A site file that cannot be used. `str()` is the whole report, ready to print."""

    def __init__(self, path: Path | str, problems: list[Problem]):
        super().__init__(path, problems, WHAT)


def without_union_tags(location: tuple[Any, ...]) -> tuple[Any, ...]:
    """pydantic puts the tag of a discriminated union in the location (`storage.nas.nfs.export`): the file has no
    such key, so it is dropped (`storage.nas.export`). The site's one such union is a hypervisor's storage."""
    return tuple(
        part
        for index, part in enumerate(location)
        if not (part in STORAGE_TYPES and index >= 2 and location[index - 2] == "storage")
    )


def _pydantic_problems(error: ValidationError, lines: Lines) -> list[Problem]:
    problems = []
    for item in error.errors(include_url=False):
        location = without_union_tags(tuple(part for part in item["loc"] if not str(part).startswith("function-after")))
        message = item["msg"].removeprefix("Value error, ")
        kind = item["type"]
        value = shown_at(location, item.get("input"))
        if kind == "site_text":  # name the very key or item that holds the bad text
            location, message = (*location, *item["ctx"]["inside"]), item["ctx"]["bare"]
        elif kind == "extra_forbidden":
            hidden = looks_secret(location[-1]) if location else False
            message = (
                f"unknown key{'' if hidden else f' (value {value})'}: remove it or check its spelling "
                f"against docs/site-file.md"
            )
        elif kind == "missing":
            message = "is required: add it"
        elif not kind.startswith("value_error") and kind not in ("assertion_error", "site_text"):
            message = f"{message} (got {value})"
        problems.append(Problem(field_path(location), message, lines.of(location)))
    return problems


def parse_site(data: object, path: Path | str = "<site>", lines: Lines | None = None) -> Site:
    """Validates already-parsed YAML data. Raises SiteError with every problem found."""
    lines = lines or Lines()
    if not isinstance(data, dict):
        raise SiteError(
            path,
            [
                Problem(
                    "(top level)",
                    "the site file must be a YAML mapping with 'site', 'proxmox', 'hypervisors' and 'clusters'",
                )
            ],
        )
    problems = coercion.problems(data, lines)
    try:
        site = Site.model_validate(data)
    except ValidationError as error:
        raise SiteError(path, problems + _pydantic_problems(error, lines)) from None
    if problems:
        raise SiteError(path, problems)
    findings = site_rules.check(site)
    if findings:
        raise SiteError(path, [Problem(field_path(loc), message, lines.of(loc)) for loc, message in findings])
    return site


def warnings(site: Site, lines: Lines | None = None) -> list[Problem]:
    """What the site rules warn about (site_rules.cautions) for a site that loaded, each with its field and, given
    the file's lines, its line."""
    lines = lines or Lines()
    return [Problem(field_path(loc), message, lines.of(loc)) for loc, message in site_rules.cautions(site)]


def _read(path: Path | str | None) -> tuple[Path, object, Lines]:
    path = Path(path or os.environ.get(SITE_ENV) or DEFAULT_SITE)
    try:
        text = read_text(path, limit=SITE_LIMIT, what=WHAT)
        data, lines = load_yaml(text, path, what=WHAT)
    except InputError as error:
        problems = [
            Problem(p.field, f"{p.message} or set {SITE_ENV}", p.line) if p.message.startswith("cannot be read") else p
            for p in error.problems
        ]
        raise SiteError(path, problems) from None
    return path, data, lines


def load_site(path: Path | str | None = None) -> Site:
    """Reads the site file at `path`, else $TERRAVIXENS_SITE, else sites/example.yaml in the current folder."""
    path, data, lines = _read(path)
    return parse_site(data, path, lines)


def load_checked(path: Path | str | None = None) -> tuple[Site, list[Problem]]:
    """`load_site`, and the site rules' warnings with their lines (`terravixens validate`)."""
    path, data, lines = _read(path)
    site = parse_site(data, path, lines)
    return site, warnings(site, lines)
