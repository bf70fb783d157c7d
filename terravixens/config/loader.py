"""Loads a site file and turns every problem into a message naming the file, the field, the bad value and the fix."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from terravixens.config.model import Site
from terravixens.config.site_rules import SiteRuleError

DEFAULT_SITE = Path(__file__).resolve().parents[2] / "sites" / "example.yaml"
SITE_ENV = "TERRAVIXENS_SITE"


@dataclass(frozen=True)
class SiteProblem:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SiteError(Exception):
    """A site file that cannot be used. `str()` is the whole report, ready to print."""

    def __init__(self, path: Path | str, problems: list[SiteProblem]):
        self.path = str(path)
        self.problems = problems
        lines = [f"{self.path}: {len(problems)} problem{'s' if len(problems) != 1 else ''} in the site file"]
        lines += [f"  - {problem}" for problem in problems]
        super().__init__("\n".join(lines))


def _field_path(location: tuple) -> str:
    return ".".join(str(part) for part in location) or "(top level)"


def _pydantic_problems(error: ValidationError) -> list[SiteProblem]:
    problems = []
    for item in error.errors(include_url=False):
        location = tuple(part for part in item["loc"] if not str(part).startswith("function-after"))
        message = item["msg"].removeprefix("Value error, ")
        kind = item["type"]
        if kind == "extra_forbidden":
            message = f"unknown key (value {item['input']!r}): remove it or check its spelling against docs/site-file.md"
        elif kind == "missing":
            message = "is required: add it"
        elif kind in ("int_parsing", "string_type", "int_type", "bool_parsing", "bool_type", "dict_type", "list_type"):
            message = f"{message} (got {item['input']!r})"
        elif kind in ("greater_than_equal", "less_than_equal", "literal_error"):
            message = f"{message} (got {item['input']!r})"
        problems.append(SiteProblem(_field_path(location), message))
    return problems


def parse_site(data: object, path: Path | str = "<site>") -> Site:
    """Validates already-parsed YAML data. Raises SiteError with every problem found."""
    if not isinstance(data, dict):
        raise SiteError(path, [SiteProblem("(top level)", "the site file must be a YAML mapping with 'site', 'proxmox', 'hypervisors' and 'clusters'")])
    try:
        return Site.model_validate(data)
    except ValidationError as error:
        raise SiteError(path, _pydantic_problems(error)) from None
    except SiteRuleError as error:
        raise SiteError(path, [SiteProblem(_field_path(loc), message) for loc, message in error.problems]) from None


def load_site(path: Path | str | None = None) -> Site:
    """Reads the site file at `path`, else $TERRAVIXENS_SITE, else the shipped example."""
    path = Path(path or os.environ.get(SITE_ENV) or DEFAULT_SITE)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SiteError(path, [SiteProblem("(file)", f"cannot be read ({error.strerror}): check the path or set {SITE_ENV}")]) from None
    except UnicodeDecodeError as error:
        raise SiteError(path, [SiteProblem("(file)", f"is not UTF-8 text (byte {error.start}): save it as UTF-8")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        raise SiteError(path, [SiteProblem(where, f"is not valid YAML: {getattr(error, 'problem', error)}")]) from None
    return parse_site(data, path)
