"""`terravixens spec validate`: a spec file or folder, or a site's standalone nodes against its specs (and secrets
file) — terravixens.standalone.validate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from terravixens.arguments import Definition, site_option
from terravixens.exitcodes import ExitCode, codes


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="a spec file, a specs folder, or a site file (same as --site)")
    site_option(parser, "check the site's standalone nodes against its specs folder instead")
    parser.add_argument("--secrets", help="with --site: also check ssh keys and tokens in this secrets file")


def command(args: argparse.Namespace) -> int:
    from terravixens.standalone import validate

    if (args.path is None) == (args.site is None):
        print("spec validate: give a spec file or folder, or --site SITE [--secrets FILE]", file=sys.stderr)
        return ExitCode.BAD_INPUT
    code, text = validate.validate(
        args.path and Path(args.path), args.site and Path(args.site), args.secrets and Path(args.secrets)
    )
    print(text, file=sys.stderr if code else sys.stdout)
    return code


SPEC_VALIDATE = Definition(
    arguments,
    command,
    codes(ExitCode.OK, (ExitCode.BAD_INPUT, "every problem printed"), ExitCode.INTERRUPTED),
    examples=(
        "terravixens spec validate specs/",
        "terravixens spec validate --site sites/example.yaml --secrets secrets.yaml",
    ),
)

__all__ = ["SPEC_VALIDATE", "arguments", "command"]
