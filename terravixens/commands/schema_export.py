"""`terravixens schema export`: the JSON Schemas of the site, spec and posture files
(terravixens.standalone.schemas)."""

from __future__ import annotations

import argparse
from pathlib import Path

from terravixens.arguments import Definition
from terravixens.exitcodes import ExitCode, codes


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="json-schemas", help="folder to write into (default: json-schemas)")


def command(args: argparse.Namespace) -> int:
    from terravixens.standalone import schemas

    for path in schemas.export(Path(args.out)):
        print(path)
    return ExitCode.OK


SCHEMA_EXPORT = Definition(
    arguments,
    command,
    codes(ExitCode.OK, ExitCode.INTERRUPTED),
    examples=("terravixens schema export --out json-schemas",),
)

__all__ = ["SCHEMA_EXPORT", "arguments", "command"]
