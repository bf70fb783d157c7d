"""One YAML file -> one pydantic model, with the site file's guarantees: strict bounded reading (regular files only,
size cap, UTF-8), strict YAML (duplicate keys, depth, aliases, numbers), and every problem located and secret-safe."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from terravixens.inputs import InputError, Lines, Problem, load_yaml, looks_secret, read_text, shown_at
from terravixens.inputs.problems import field_path

M = TypeVar("M", bound=BaseModel)
FILE_LIMIT = 256 * 1024


def pydantic_problems(
    error: ValidationError, lines: Lines, reference: str, *, secret_values: bool = False
) -> list[Problem]:
    """Located problems; with `secret_values` no value of the file is ever shown (a misspelled key such as
    'site_tokn' does not look secret, but its value is)."""
    problems = []
    for item in error.errors(include_url=False, include_context=False):
        location = tuple(part for part in item["loc"] if not str(part).startswith("function-after"))
        message = item["msg"].removeprefix("Value error, ")
        kind = item["type"]
        value = "(value hidden: a secrets file)" if secret_values else shown_at(location, item.get("input"))
        if kind == "extra_forbidden":
            hidden = secret_values or (looks_secret(location[-1]) if location else False)
            message = (
                f"unknown key{'' if hidden else f' (value {value})'}: remove it or check its spelling "
                f"against {reference}"
            )
        elif kind == "missing":
            message = "is required: add it"
        elif kind == "literal_error" and location and location[-1] == "schema_version":
            message = f"is {value}: this terravixens reads schema_version 1 (write 'schema_version: 1')"
        elif not kind.startswith("value_error") and kind != "assertion_error":
            message = f"{message} (got {value})"
        problems.append(Problem(field_path(location), message, lines.of(location)))
    return problems


def parse_model(
    model: type[M],
    data: object,
    path: Path | str,
    lines: Lines,
    *,
    what: str,
    reference: str,
    secret_values: bool = False,
) -> M:
    if not isinstance(data, dict):
        raise InputError(
            path, [Problem("(top level)", f"a {what} is a YAML mapping starting with 'schema_version: 1'")], what
        )
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InputError(path, pydantic_problems(error, lines, reference, secret_values=secret_values), what) from None


def load_model(
    model: type[M], path: Path | str, *, what: str, reference: str, limit: int = FILE_LIMIT, secret_values: bool = False
) -> tuple[M, Lines]:
    """The file's model and the line of each field; raises InputError naming the file, field, value and fix."""
    text = read_text(path, limit=limit, what=what)
    data, lines = load_yaml(text, path, what=what)
    return parse_model(model, data, path, lines, what=what, reference=reference, secret_values=secret_values), lines
