"""Exit codes of every `terravixens` command: the one table (ADR 0020).

A code means the same thing whichever command returns it, so a script or a CI job can act on it without knowing the
command: 1 is always "a safety check refused, nothing done", 4 always "an external step failed, stopped". Each
command declares the codes it can return in its module (terravixens.arguments.Definition); its `--help` epilog and
the exit-code section of docs/commands.md are rendered from this module and that declaration
(tests/test_exit_codes.py fails when the docs and the table disagree).

Read-only monitors (`drift`, `check`) speak `terraform plan -detailed-exitcode` instead (MonitorExit): 2 must always
mean "found", so every error is 1 there; when something was found and something else could not be read, found wins
(the lines say both). The node-side `spec get` keeps its own table (SpecGetExit): it runs on guests
from a timer, and its codes say which side to fix (network, credentials, server, disk).

Standard library only: the node client imports it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from enum import IntEnum


class ExitCode(IntEnum):
    """What every operation and command returns."""

    OK = 0
    REFUSED = 1
    BAD_INPUT = 2
    DECLINED = 3
    FAILED = 4
    BACKUP_FAILED = 5
    CHECK_FAILED = 6
    INTERRUPTED = 130


class MonitorExit(IntEnum):
    """Read-only monitors (drift, check): Terraform's -detailed-exitcode, so that 2 always means something was found."""

    IN_SYNC = 0
    ERROR = 1
    FOUND = 2


class SpecGetExit(IntEnum):
    """`terravixens spec get`, on a node: which side to fix."""

    OK = 0
    USAGE = 2
    UNREACHABLE = 3
    REFUSED = 4
    UNKNOWN = 5
    UNVERIFIED = 6
    UNWRITABLE = 7


# IntEnum members of different tables compare (and hash) equal as numbers: meanings are keyed by table, then name.
MEANING: dict[type[IntEnum], dict[str, str]] = {
    ExitCode: {
        "OK": "done, or nothing to do",
        "REFUSED": "a safety check refused (plan guard, synth rule, upgrade precondition): nothing done",
        "BAD_INPUT": "a site file, plan, backup, argument or output path cannot be used: nothing done",
        "DECLINED": "not confirmed (or no terminal and no --confirm/--yes): nothing done",
        "FAILED": "an external step failed, hung or is missing (terraform, talosctl, kubectl), or the cluster went "
        "unhealthy mid-run: stopped; the last line says what is done and what is not",
        "BACKUP_FAILED": "a state backup or an etcd snapshot could not be taken or verified: nothing done",
        "CHECK_FAILED": "done, then the acceptance check found problems (`deploy --check`): what was applied stays "
        "applied; the check's lines say what to fix",
        "INTERRUPTED": "interrupted (Ctrl-C, SIGTERM, SIGHUP): children stopped; the last line says what is done and "
        "what is not",
    },
    MonitorExit: {
        "IN_SYNC": "nothing found: in sync (drift), every check passed (check)",
        "ERROR": "could not tell: bad input, a refused or failed step, a reading that could not be made (never read as "
        "found)",
        "FOUND": "found: drift (the plan, or the running cluster, differs from the site) or a check's problem; what "
        "could not be read is said too",
    },
    SpecGetExit: {
        "OK": "the spec was fetched, verified and written",
        "USAGE": "the environment file or the options are unusable (nothing was sent)",
        "UNREACHABLE": "the server could not be reached, or kept failing (5xx, 429), within --max-time",
        "REFUSED": "the server refused the credentials (401 or 403)",
        "UNKNOWN": "the server does not know this identity (404)",
        "UNVERIFIED": "the answer could not be verified: TLS certificate, not JSON, wrong schema_version or identity, "
        "other status",
        "UNWRITABLE": "the spec could not be written",
    },
}


def meaning(code: IntEnum) -> str:
    """What `code` means, from its own table."""
    return MEANING[type(code)][code.name]


# A command's declaration: each code it can return, with what it means for that command ("" when the table says it).
Declared = Sequence[tuple[IntEnum, str]]
TABLES: tuple[type[IntEnum], ...] = (ExitCode, MonitorExit, SpecGetExit)
# What REFUSED means for every operation that synthesizes first (deploy, destroy, restore, decommission, …).
SYNTH_RULE = "a safety rule stopped synth (its messages printed)"


def codes(*entries: IntEnum | tuple[IntEnum, str]) -> Declared:
    """A command's declaration, written as its codes, each alone or with what it means for that command."""
    return tuple(entry if isinstance(entry, tuple) else (entry, "") for entry in entries)


def epilog(codes: Declared, width: int = 100) -> str:
    """The `--help` epilog of a command: each code it returns, its name and meaning from the table, and what it
    means for this command."""
    lines = ["exit codes (docs/commands.md#exit-codes):"]
    for code, note in codes:
        text = meaning(code) + (f" — here: {note}" if note else "")
        lines += textwrap.wrap(
            text,
            width,
            initial_indent=f"  {int(code):<4}{code.name:<15}",
            subsequent_indent=" " * 21,
            break_on_hyphens=False,
        )
    return "\n".join(lines)


def markdown(commands: Sequence[tuple[str, Declared]]) -> str:
    """The exit-code section of docs/commands.md: the tables, then every command's codes (tests/test_exit_codes.py
    compares it with the docs)."""
    titles = {
        ExitCode: "Every command but `drift`, `check` and `spec get` (also `cdktf synth`: 0, 1, 2):",
        MonitorExit: "`drift` and `check` are monitors (`terraform plan -detailed-exitcode`): 2 always means "
        "something was found, so every error is 1 (an interrupted run is 130):",
        SpecGetExit: "`spec get` runs on the nodes, from a timer; its codes say which side to fix:",
    }
    out: list[str] = []
    for table in TABLES:
        out += [titles[table], "", "| code | name | meaning |", "|---|---|---|"]
        out += [f"| {int(code)} | `{code.name}` | {meaning(code)} |" for code in table]
        out.append("")
    out += [
        "Per command (what a code means for it, where it says more than the table):",
        "",
        "| command | exit codes | for this command |",
        "|---|---|---|",
    ]
    for name, codes in commands:
        notes = "; ".join(f"{int(code)}: {note}" for code, note in codes if note)
        out.append(f"| `{name}` | {', '.join(str(int(code)) for code, _ in codes)} | {notes} |")
    return "\n".join(out)


__all__ = [
    "MEANING",
    "SYNTH_RULE",
    "TABLES",
    "Declared",
    "ExitCode",
    "MonitorExit",
    "SpecGetExit",
    "codes",
    "epilog",
    "markdown",
    "meaning",
]
