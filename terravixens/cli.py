"""The `terravixens` command: what cdktf lacks around synth (site validation first).

This module is the command table, the parser built from it and `main`. A command lives in one module: under
terravixens/operations/ (the operations, ADR 0020) or terravixens/commands/ (the others), or terravixens.completion;
that module declares its arguments, its run function, the exit codes it returns and its examples (one
terravixens.arguments.Definition). Its entry in COMMANDS says its name, its one-line help, where its Definition is
(`"module:NAME"`, imported when the command runs, its `--help` is printed or the docs are rendered) and what the
one wrapper (`_invoke`) gives its run function. A new command is its module and one entry here
(docs/architecture.md); its `--help` epilog and docs/commands.md#exit-codes are rendered from its declared codes
and the one table, terravixens.exitcodes; completion reads the parser.

`--json` (validate, stacks, plan-guard, review, drift, check, snapshot --list, upgrade --dry-run) prints one
versioned document (`terravixens/<command>/v1`, docs/json-output.md) on stdout and nothing else there
(terravixens.output).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from pathlib import Path
from typing import TYPE_CHECKING

from terravixens.arguments import Definition, site_from_positional
from terravixens.config.loader import SiteError, load_site
from terravixens.exitcodes import Declared, ExitCode, MonitorExit, epilog

if TYPE_CHECKING:
    from terravixens.operations.terraform import Terraform


class Gives(Enum):
    """What the one wrapper (`_invoke`) gives a command's run function besides its arguments."""

    ARGUMENTS = "its arguments only: `run(args)`"
    SITE = "the site file, loaded: `run(args, site)`"
    OPERATION = "an operation's workspace, Terraform and console (umask 077): `run(args, ws, tf, console)`"


@dataclass(frozen=True)
class Command:
    """One `terravixens` command: `name` (two words for a subcommand: "spec get"), its one-line help, `definition`
    (`"module:NAME"` of its terravixens.arguments.Definition: arguments, run function, exit codes, examples), and
    what its run function is given (`gives`).

    `signals`: SIGTERM and SIGHUP behave like Ctrl-C (terravixens.runner.handle_signals: the external commands it
    started are ended with their process groups, then one line). False for a service that starts none and handles
    them itself (`spec serve`: SIGTERM is a graceful stop, then the process ends by that signal, as systemd expects;
    SIGHUP reloads its specs)."""

    name: str
    help: str
    definition: str
    gives: Gives = Gives.ARGUMENTS
    signals: bool = True

    @functools.cached_property
    def declared(self) -> Definition:
        """The command's Definition, imported now (the command runs, or its help or docs are rendered)."""
        module, _, name = self.definition.partition(":")
        found = getattr(importlib.import_module(module), name)
        if not isinstance(found, Definition):
            raise TypeError(f"{self.definition} is not a terravixens.arguments.Definition")
        return found

    @property
    def codes(self) -> Declared:
        return self.declared.codes

    @property
    def examples(self) -> tuple[str, ...]:
        return self.declared.examples

    def epilog(self) -> str:
        """`Examples:` (each a whole command line; tests/test_cli_surface.py parses every one), then the exit
        codes."""
        shown = ["Examples:", *[f"  {example}" for example in self.examples], ""] if self.examples else []
        return "\n".join([*shown, epilog(self.codes)])

    def returns(self, code: IntEnum) -> bool:
        return any(type(declared) is type(code) and declared == code for declared, _ in self.codes)

    def run(self, args: argparse.Namespace) -> int:
        return _invoke(self, args)


ARGUMENTS, SITE, OPERATION = Gives.ARGUMENTS, Gives.SITE, Gives.OPERATION
OPERATIONS = "terravixens.operations"
COMMANDS: tuple[Command, ...] = (
    Command("validate", "check a site file and print every problem", f"{OPERATIONS}.validate:VALIDATE"),
    Command("stacks", "list the stacks of a site, in apply order", f"{OPERATIONS}.stacks:STACKS", SITE),
    Command(
        "plan-guard",
        "refuse a plan that replaces a node, loses quorum or secrets",
        f"{OPERATIONS}.plan_guard:PLAN_GUARD",
        SITE,
    ),
    Command(
        "upgrade",
        "rolling Talos upgrade and image roll-out, one node at a time, gated on health",
        f"{OPERATIONS}.upgrade:UPGRADE",
        OPERATION,
    ),
    Command(
        "show",
        "the site at a glance: hypervisors, clusters, nodes, the L2 tree, layers",
        f"{OPERATIONS}.show:SHOW",
        SITE,
    ),
    Command(
        "deploy", "synth, plan, guard, confirm, back up and apply, per layer", f"{OPERATIONS}.deploy:DEPLOY", OPERATION
    ),
    Command("destroy", "destroy one layer, after a verified state backup", f"{OPERATIONS}.destroy:DESTROY", OPERATION),
    Command(
        "restore",
        "put a state backup back (the current state is backed up)",
        f"{OPERATIONS}.restore:RESTORE",
        OPERATION,
    ),
    Command(
        "decommission",
        "reset a cluster's nodes in order; secrets last",
        f"{OPERATIONS}.decommission:DECOMMISSION",
        OPERATION,
    ),
    Command(
        "remove-dead-member",
        "remove an unreachable control plane from etcd",
        f"{OPERATIONS}.dead_member:REMOVE_DEAD_MEMBER",
        OPERATION,
    ),
    Command(
        "maintain",
        "empty a hypervisor for its maintenance (drain, shut down), or --done to bring it back",
        f"{OPERATIONS}.maintain:MAINTAIN",
        OPERATION,
    ),
    Command(
        "renew-credentials",
        "a new admin kubeconfig (and talosconfig in its last month), nothing else changed",
        f"{OPERATIONS}.renew_credentials:RENEW_CREDENTIALS",
        OPERATION,
    ),
    Command(
        "snapshot",
        "take a verified etcd snapshot (or --list the kept ones)",
        f"{OPERATIONS}.snapshot:SNAPSHOT",
        OPERATION,
    ),
    Command(
        "restore-etcd",
        "restore etcd from a snapshot: reset control planes, bootstrap",
        f"{OPERATIONS}.restore_etcd:RESTORE_ETCD",
        OPERATION,
    ),
    Command("drift", "plan each layer; exit 2 when something drifted", f"{OPERATIONS}.drift:DRIFT", OPERATION),
    Command(
        "check",
        "acceptance check: Talos, Nodes, Cilium, Flux, logs, certificates",
        f"{OPERATIONS}.check:CHECK",
        OPERATION,
    ),
    Command("review", "per stack and node, what a change does (Markdown for a PR)", f"{OPERATIONS}.review:REVIEW"),
    Command(
        "schema export",
        "write site, spec and posture JSON Schemas",
        "terravixens.commands.schema_export:SCHEMA_EXPORT",
    ),
    Command(
        "spec validate",
        "check a spec file or folder, or a site's standalone setup",
        "terravixens.commands.spec_validate:SPEC_VALIDATE",
    ),
    Command(
        "spec serve",
        "serve each standalone node its resolved spec",
        "terravixens.commands.spec_serve:SPEC_SERVE",
        signals=False,
    ),
    Command("spec get", "on a node: fetch, verify and write its spec", "terravixens.commands.spec_get:SPEC_GET"),
    Command("completion", "print a bash, zsh or fish completion script", "terravixens.completion:COMPLETION"),
    Command(
        "spec push",
        "configure a node over SSH: send the agent and its spec, collect the JSON result",
        f"{OPERATIONS}.spec_push:SPEC_PUSH",
    ),
    Command(
        "spec handoff",
        "trigger a node's own fetch and converge over SSH, collect the JSON result",
        f"{OPERATIONS}.spec_push:SPEC_HANDOFF",
    ),
)
# A group's help is this, then its subcommands (from COMMANDS: a new one is listed without touching this).
GROUPS = {
    "schema": "JSON Schemas of the files terravixens reads",
    "spec": "standalone nodes' specs",
}


def command(name: str) -> Command:
    return next(entry for entry in COMMANDS if entry.name == name)


# ------------------------------------------------------------------------------------------------- the wrapper
def _terraform(layer_env: Mapping[str, Mapping[str, str]]) -> Terraform:
    """The Terraform the operations run (a seam: tests/test_exit_codes.py gives its stand-in here)."""
    from terravixens.operations.terraform import Terraform

    return Terraform(layer_env=layer_env)


def _selected_layers(args: argparse.Namespace) -> list[str] | None:
    """The layers an operation was asked for (None: all of them)."""
    if getattr(args, "layer", None):
        return [args.layer]
    return getattr(args, "layers", None) or None


def _invoke(entry: Command, args: argparse.Namespace) -> int:
    """The one wrapper every command runs in. It gives the run function what the entry says (`gives`): the site,
    loaded first (a bad one prints its problems and exits BAD_INPUT), or for an operation: umask 077, a Console whose
    journal says what is done, the workspace, and the Terraform with the apply-time variables of the layers it
    touches (from the secrets file, --secrets or $TERRAVIXENS_SECRETS, when it takes one:
    terravixens.operations.standalone_env).

    An OperationError prints `terravixens <command>: <message>`, then (when the operation had started) one line
    `stopped at <step>: done: …; not done: …`, and exits with its code; in an operation, Ctrl-C (and SIGTERM/SIGHUP,
    which the runner turns into the same exception) prints `interrupted by SIGINT (… stopped with its process group)
    at …` (its journal: terravixens.operations.journal.interrupted_line) and exits INTERRUPTED. A monitor (a command
    that returns MonitorExit: drift, check) exits MonitorExit.ERROR for every stop and for a bad site, so that 2
    only ever means found."""
    from terravixens.operations import OperationError
    from terravixens.operations.console import Console

    run = entry.declared.run
    monitor = entry.returns(MonitorExit.ERROR)
    bad = MonitorExit.ERROR if monitor else ExitCode.BAD_INPUT
    console: Console | None = None
    try:
        if entry.gives is ARGUMENTS:
            return run(args)
        if not site_from_positional(args, entry.name):
            return bad
        try:
            site = load_site(args.site)
        except SiteError as error:
            print(error, file=sys.stderr)
            return bad
        if entry.gives is SITE:
            return run(args, site)
        from terravixens.operations.files import private_process
        from terravixens.operations.standalone_env import layer_env
        from terravixens.operations.workspace import Workspace

        private_process()
        # --json: stdout holds the document only (terravixens.output); progress goes to stderr.
        console = Console(out=sys.stderr) if getattr(args, "json", False) else Console()
        # Only the commands that take --secrets plan or apply a layer with apply-time variables.
        selected = _selected_layers(args) if hasattr(args, "secrets") else []
        ws = Workspace(site)
        env = layer_env(site, args.site, getattr(args, "secrets", None), selected, ws.site_layers)
        return run(args, ws, _terraform(env), console)
    except OperationError as error:
        print(f"terravixens {entry.name}: {error}", file=sys.stderr)
        line = console.journal.line(interrupted=False) if console is not None else None
        if line:
            print(line, file=sys.stderr)
        return MonitorExit.ERROR if monitor else error.code
    except KeyboardInterrupt as error:
        if console is None:
            raise  # main() says it: nothing of an operation's had started
        from terravixens.operations.journal import interrupted_line

        print(f"terravixens {entry.name}: {interrupted_line(error, console.journal)}", file=sys.stderr)
        return ExitCode.INTERRUPTED


# -------------------------------------------------------------------------------------------------- the parser
def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, built from COMMANDS. `only`: the one command whose arguments (and epilog) are added,
    so that running a command imports its module and no other (None: every command, for completion and tests)."""
    top = argparse.ArgumentParser(prog="terravixens", description=(__doc__ or "").split("\n")[0])
    top.add_argument(
        "--version", action=_Version, help="print the terravixens, cdktf, Terraform and provider versions, then exit"
    )
    top.set_defaults(command_line=parser)  # what `completion` reads the whole command line from
    commands = top.add_subparsers(dest="command", required=True)
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for entry in COMMANDS:
        words = entry.name.split()
        where = commands
        if len(words) == 2:
            if words[0] not in groups:
                under = [e.name.split()[1] for e in COMMANDS if e.name.split()[0] == words[0]]
                group = commands.add_parser(words[0], help=f"{GROUPS[words[0]]}: {', '.join(under)}")
                groups[words[0]] = group.add_subparsers(dest=f"{words[0]}_command", required=True)
            where = groups[words[0]]
        sub = where.add_parser(
            words[-1], help=entry.help, description=entry.help, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        if only is None or only == entry.name:
            sub.epilog = entry.epilog()
            entry.declared.arguments(sub)
        sub.set_defaults(entry=entry)
    return top


def _named(argv: Sequence[str]) -> str:
    """The command `argv` runs ("" when it names none: `--help`, a group alone, a typo for argparse to refuse)."""
    return next((e.name for e in COMMANDS if list(argv[: len(e.name.split())]) == e.name.split()), "")


class _Version(argparse.Action):
    """`--version`: every version a bug report needs (terravixens.version), then exit 0, whatever is missing."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        from terravixens.version import versions

        print("\n".join(versions().lines()), flush=True)
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    # A terminal or CI log that cannot show a character gets an escape, never a UnicodeEncodeError traceback.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    argv = sys.argv[1:] if argv is None else argv
    args = parser(only=_named(argv)).parse_args(argv)
    from terravixens.nodejs import jsii_environment

    # Before any synth starts jsii: the project's Node.js 22, quiet (no end-of-life banner, no DEP0044).
    os.environ.update(jsii_environment(os.environ, Path.cwd()))
    entry: Command = args.entry
    if not entry.returns(ExitCode.INTERRUPTED):
        return int(entry.run(args))
    from terravixens.runner import handle_signals, interrupted_line

    # The one place signals are handled: SIGTERM and SIGHUP behave like Ctrl-C (terravixens.runner): the external
    # commands running are ended with their process groups, then one line says where it stopped.
    with handle_signals() if entry.signals else contextlib.nullcontext():
        try:
            return int(entry.run(args))  # a plain number for the shell and for callers: codes print as 0, 2…
        except KeyboardInterrupt as error:
            with contextlib.suppress(OSError):  # a SIGHUP may have taken the terminal with it
                print(f"terravixens {entry.name}: {interrupted_line(error)}", file=sys.stderr, flush=True)
            return int(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
