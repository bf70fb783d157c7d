"""The command line's shared vocabulary: what a command module declares (`Definition`), and the argument types and
options several commands take (--site, --secrets, --json, talosctl's options, --no-snapshot, durations, seconds,
whole numbers).

A command lives in one module (under terravixens/operations/, or its own module for the commands that are not
operations): its `arguments(parser)`, its run function, the exit codes it returns and its examples, bundled in one
`Definition` that the command table (terravixens.cli.COMMANDS) names as `"module:NAME"`, imported when the command
is run, its `--help` printed or the docs rendered. An option two commands share is declared here, once, so that
it reads the same in every `--help`.

Argument types raise argparse's own error (exit 2, one line naming the option) for a value that cannot be used.
Standard library only, and the ground floor: every command module imports it; it imports nothing above the runner.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from terravixens.etcd_snapshots import no_snapshot_reason
from terravixens.exitcodes import Declared
from terravixens.runner import MAX_DEADLINE, parse_duration

SITE_HELP = "site file (default: $TERRAVIXENS_SITE or sites/example.yaml)"
Parser = argparse.ArgumentParser | argparse._ArgumentGroup


@dataclass(frozen=True)
class Definition:
    """What a command module declares for one command: the function that adds its arguments, the function that runs
    it (what it is given — its arguments only, the site too, or an operation's workspace, Terraform and console —
    is the command table's `gives`), the exit codes it can return, each with what it means for this command ("" when
    the table says it all: terravixens.exitcodes.codes), and its examples (each a whole command line; its `--help`
    shows them before the exit codes, and tests/test_cli_surface.py parses every one)."""

    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[..., int]
    codes: Declared
    examples: tuple[str, ...]


# ------------------------------------------------------------------------------------------------------- types
def duration(text: str) -> int:
    """An argparse type: 90s, 15m, 1h or plain seconds (terravixens.runner.parse_duration, the one parser), a
    deadline of 1s to 24h (terravixens.runner.MAX_DEADLINE: a call that runs longer has hung)."""
    try:
        return parse_duration(text, maximum=MAX_DEADLINE)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def seconds(minimum: float, maximum: float = 86_400.0) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds in [minimum, maximum] (nan, inf and negatives are usage errors,
    exit 2 with one line, never a traceback or a timer that never fires)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not (minimum <= value <= maximum):  # also false for nan
            raise argparse.ArgumentTypeError(
                f"{text[:32]!r} is not a number of seconds from {minimum:g} to {maximum:g}"
            )
        return value

    return parse


def whole(minimum: int, what: str, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number of `what`, at least `minimum` (`why` says why that minimum)."""

    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {what}: give a whole number, {minimum} or more{f' ({why})' if why else ''}"
            )
        return int(text)

    return parse


batch = whole(1, "batch size of workers")


def no_snapshot(text: str) -> str:
    try:
        return no_snapshot_reason(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# ----------------------------------------------------------------------------------------------------- options
def site_option(parser: Parser, help: str = SITE_HELP, required: bool = False) -> None:
    parser.add_argument("--site", required=required, help=help)


def site_argument(parser: argparse.ArgumentParser) -> None:
    """--site, and the positional SITE it replaces (accepted for one release, with a note: ADR 0040)."""
    site_option(parser)
    parser.add_argument(
        "site_positional",
        nargs="?",
        metavar="SITE",
        help="deprecated: write --site SITE (accepted until the next release)",
    )


def site_from_positional(args: argparse.Namespace, name: str) -> bool:
    """The site given as a positional argument (validate, stacks: deprecated, ADR 0040) becomes --site, with one
    line on stderr; False (nothing done) when both name different files."""
    positional = getattr(args, "site_positional", None)
    if positional is None:
        return True
    if args.site is not None and args.site != positional:
        print(
            f"terravixens {name}: two sites given ({positional} and --site {args.site}): give --site only",
            file=sys.stderr,
        )
        return False
    print(
        f"terravixens {name}: deprecated: the site as a positional argument goes in the next release; "
        f"write --site {positional}",
        file=sys.stderr,
    )
    args.site = positional
    return True


def secrets_option(parser: Parser) -> None:
    parser.add_argument(
        "--secrets",
        help="the secrets file: L2 nodes' tokens, gitops layers' Flux git credentials (default: $TERRAVIXENS_SECRETS)",
    )


def backup_secrets_option(parser: Parser) -> None:
    """--secrets for the commands that read a cluster's offsite etcd backups (snapshot --list, restore-etcd, check):
    only etcd_backup.<cluster> is read from it. Its own dest: a command with `args.secrets` hands apply-time
    variables of every layer to Terraform (cli._invoke), which these commands never apply."""
    parser.add_argument(
        "--secrets",
        dest="backup_secrets",
        metavar="FILE",
        help="the secrets file holding etcd_backup.<cluster>: the offsite backups' bucket keys (and age identity) "
        "(default: $TERRAVIXENS_SECRETS)",
    )


def json_option(parser: Parser, what: str = "") -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print one JSON document{what} on stdout, nothing else there (docs/json-output.md)",
    )


def allow_reboot_option(parser: Parser) -> None:
    parser.add_argument(
        "--allow-reboot",
        action="append",
        default=[],
        metavar="NODE",
        help="let NODE's configuration change reboot it (repeatable)",
    )


def no_snapshot_option(parser: Parser, what: str) -> None:
    """--no-snapshot REASON, the same for every command that takes an etcd snapshot (ADR 0036)."""
    parser.add_argument(
        "--no-snapshot",
        type=no_snapshot,
        metavar="REASON",
        help=f"go on without the fresh etcd snapshot taken {what}, saying why (printed where the snapshot would be)",
    )


def talosconfig_option(parser: Parser) -> None:
    parser.add_argument(
        "--talosconfig",
        metavar="FILE",
        help="talosctl client configuration (default: the platform layer's talosconfig output, written 0600 to a "
        "private temporary folder and removed afterwards)",
    )


def talosctl_option(parser: Parser) -> None:
    parser.add_argument("--talosctl", default="talosctl", metavar="BIN", help="the talosctl binary")


def talosctl_options(parser: Parser, timeout: str, what: str) -> None:
    """--talosconfig, --talosctl and --timeout (each talosctl call's deadline, `timeout` by default)."""
    talosconfig_option(parser)
    talosctl_option(parser)
    parser.add_argument(
        "--timeout",
        type=duration,
        default=timeout,
        metavar="DURATION",
        help=f"deadline of each talosctl call{what}, e.g. 90s, 15m (default {timeout})",
    )


__all__ = [
    "SITE_HELP",
    "Definition",
    "allow_reboot_option",
    "backup_secrets_option",
    "batch",
    "duration",
    "json_option",
    "no_snapshot",
    "no_snapshot_option",
    "seconds",
    "secrets_option",
    "site_argument",
    "site_from_positional",
    "site_option",
    "talosconfig_option",
    "talosctl_option",
    "talosctl_options",
    "whole",
]
