"""The `terravixens` command: what cdktf lacks around synth (site validation first).

    terravixens validate [--site SITE]   check a site file; print every problem with file, field, value and fix
    terravixens stacks [--site SITE]     list the stacks (layers) the site synthesizes to, in apply order
    terravixens plan-guard PLAN     refuse a plan (`terraform show -json` output) that breaks the node promise
    terravixens upgrade CLUSTER     roll the site's Talos version and image out, one node at a time, gated on health
    terravixens show                the site at a glance: tables, JSON (--format json) or a mermaid graph
    terravixens deploy [LAYER…]     synth, plan, guard, confirm, back up, apply the saved plan — per layer, in order
                                    (control planes that leave: one per apply, snapshot and health between)
    terravixens destroy LAYER       typed confirmation, verified state backup, guarded destroy of one layer
    terravixens restore LAYER FILE  put a state backup back
    terravixens decommission CLUSTER   reset a cluster's nodes in order (workers, control planes, the last one)
    terravixens remove-dead-member CLUSTER NODE   remove an unreachable control plane from etcd, then its apply
    terravixens snapshot CLUSTER    a verified etcd snapshot, kept with retention (--list: the kept ones)
    terravixens restore-etcd CLUSTER --from FILE   Talos' etcd disaster recovery from a snapshot, guarded
    terravixens drift [LAYER…]      plan -detailed-exitcode per layer, then the Talos side; exit 2 on drift
    terravixens check CLUSTER       acceptance check of a running cluster; exit 2 when a check finds a problem
    terravixens review BASE         what a change does per stack and node, as Markdown for a pull request
    terravixens schema export       JSON Schemas of the site, spec and posture files
    terravixens spec validate PATH  check a spec file or folder (or --site: a site's standalone nodes and their specs)
    terravixens spec serve          serve each standalone node its resolved spec (auth by posture)
    terravixens spec get            on a node: fetch its spec from the server, verify it, write it (0600)
    terravixens spec push NODE      configure a node over SSH: the agent and its spec sent, its JSON result back
    terravixens spec handoff NODE   over SSH, a node fetches its own spec and converges; its JSON result back
    terravixens completion SHELL    a bash, zsh or fish completion script, from the command table
    terravixens --version           terravixens, cdktf, Terraform and provider versions

`--json` (validate, stacks, plan-guard, review, drift, check, snapshot --list, upgrade --dry-run) prints one
versioned document (`terravixens/<command>/v1`, docs/json-output.md) on stdout and nothing else there
(terravixens.output).

This file is a command table (COMMANDS: name → parser builder → handler, and the exit codes the command returns);
the work lives in terravixens.operations (one module each) and the modules the handlers name. A new command is one
entry in COMMANDS (docs/architecture.md). Its `--help` epilog and docs/commands.md#exit-codes are rendered from its
declared codes and the one table, terravixens.exitcodes, after its `Examples:` (declared in its entry too).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path
from typing import Any

from terravixens.config.loader import SITE_ENV, SiteError, load_site
from terravixens.exitcodes import Declared, ExitCode, MonitorExit, SpecGetExit, epilog

OK, REFUSED, BAD_INPUT, DECLINED = ExitCode.OK, ExitCode.REFUSED, ExitCode.BAD_INPUT, ExitCode.DECLINED
FAILED, BACKUP_FAILED, INTERRUPTED = ExitCode.FAILED, ExitCode.BACKUP_FAILED, ExitCode.INTERRUPTED
CHECK_FAILED = ExitCode.CHECK_FAILED
SITE_HELP = "site file (default: $TERRAVIXENS_SITE or sites/example.yaml)"


@dataclass(frozen=True)
class Command:
    """One `terravixens` command: `name` (two words for a subcommand: "spec get"), its one-line help, the function
    that adds its arguments, the handler that runs it and returns its exit code, and the codes it can return, each
    with what it means for this command ("" when the table says it all).

    `signals`: SIGTERM and SIGHUP behave like Ctrl-C (terravixens.runner.handle_signals: the external commands it
    started are ended with their process groups, then one line). False for a service that starts none and handles
    them itself (`spec serve`: SIGTERM is a graceful stop, then the process ends by that signal, as systemd expects;
    SIGHUP reloads its specs)."""

    name: str
    help: str
    build: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    codes: Declared
    signals: bool = True
    examples: tuple[str, ...] = ()

    def epilog(self) -> str:
        """`Examples:` (each a whole command line; tests/test_cli_surface.py parses every one), then the exit
        codes."""
        shown = ["Examples:", *[f"  {example}" for example in self.examples], ""] if self.examples else []
        return "\n".join([*shown, epilog(self.codes)])

    def returns(self, code: IntEnum) -> bool:
        return any(type(declared) is type(code) and declared == code for declared, _ in self.codes)


def codes(*entries: IntEnum | tuple[IntEnum, str]) -> Declared:
    return tuple(entry if isinstance(entry, tuple) else (entry, "") for entry in entries)


# ------------------------------------------------------------------------------------------------ site commands
def _with_site(
    handler: Callable[[argparse.Namespace, Any], int], bad_site: int = BAD_INPUT
) -> Callable[[argparse.Namespace], int]:
    """Loads the site named on the command line first; a bad site prints its problems and exits `bad_site`."""

    def run(args: argparse.Namespace) -> int:
        if not _site_from_positional(args):
            return bad_site
        try:
            site = load_site(args.site)
        except SiteError as error:
            print(error, file=sys.stderr)
            return bad_site
        return handler(args, site)

    return run


def _site_from_positional(args: argparse.Namespace) -> bool:
    """The site given as a positional argument (validate, stacks: deprecated, ADR 0040) becomes --site, with one
    line on stderr; False (nothing done) when both name different files."""
    positional = getattr(args, "site_positional", None)
    if positional is None:
        return True
    name = args.entry.name
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


def _render(args: argparse.Namespace, report: Any) -> int:
    """The one place a report meets a format (terravixens.output): its document with --json, else its text."""
    from terravixens.output import render

    return render(report, getattr(args, "json", False), sys.stdout, sys.stderr)


def _site_problems(args: argparse.Namespace, error: SiteError) -> int:
    """validate --json: a site that does not load is a document too (its problems), not only text."""
    from terravixens.operations.validate import ValidateReport

    return _render(args, ValidateReport(str(args.site or error.path), None, (error,)))


def _validate(args: argparse.Namespace) -> int:
    from terravixens.operations.validate import validate_report

    if not _site_from_positional(args):
        return BAD_INPUT
    try:
        site = load_site(args.site)
    except SiteError as error:
        return _site_problems(args, error)
    return _render(args, validate_report(site, args.site))


@_with_site
def _stacks(args: argparse.Namespace, site: Any) -> int:
    from terravixens.operations.stacks import stacks

    return _render(args, stacks(site))


@_with_site
def _plan_guard(args: argparse.Namespace, site: Any) -> int:
    from terravixens.operations.plan_guard import GuardOptions, plan_guard_report

    report = plan_guard_report(
        site,
        GuardOptions(
            plan=args.plan,
            layer=args.layer,
            allow_reboot=frozenset(args.allow_reboot),
            plan_log=args.plan_log,
            deployed_states=tuple(args.deployed_state),
            teardown=args.teardown,
            limit=args.max_size_mib * 1024 * 1024,
        ),
    )
    return _render(args, report)


@_with_site
def _upgrade(args: argparse.Namespace, site: Any) -> int:
    from terravixens.talosctl import Talosctl
    from terravixens.upgrade import LOCAL_TALOSCONFIG, command

    if args.cluster not in site.clusters:
        print(f"unknown cluster {args.cluster!r}: use one of {', '.join(sorted(site.clusters))}", file=sys.stderr)
        return BAD_INPUT
    talosctl = Talosctl(args.talosctl, args.talosconfig or LOCAL_TALOSCONFIG, args.timeout)
    # An interrupt (Ctrl-C, SIGTERM, SIGHUP) reaches main() annotated by the upgrade with what is done and not.
    return command(
        site,
        args.cluster,
        talosctl,
        kubernetes=args.kubernetes,
        dry_run=args.dry_run,
        worker_batch=args.worker_batch,
        force=args.force,
        no_snapshot=args.no_snapshot,
        talosconfig=args.talosconfig,
        terraform=lambda: _terraform({}),  # only built when the platform layer's talosconfig is read
        as_json=args.json,
    )


@_with_site
def _show(args: argparse.Namespace, site: Any) -> int:
    from terravixens.operations.show import show

    show(site, "json" if args.json else args.format, sys.stdout)
    return OK


def _show_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument(
        "--format",
        choices=("table", "json", "mermaid"),
        default="table",
        help="table (default), json (schema terravixens/show/v1) or mermaid (a graph)",
    )
    parser.add_argument("--json", action="store_true", help="the same as --format json (as every --json command)")


# --------------------------------------------------------------------------------------------------- operations
def _selected_layers(args: argparse.Namespace) -> list[str] | None:
    """The layers an operation was asked for (None: all of them)."""
    if getattr(args, "layer", None):
        return [args.layer]
    return getattr(args, "layers", None) or None


def _terraform(layer_env: Mapping[str, Mapping[str, str]]) -> Any:
    """The Terraform the operations run (a seam: tests/test_exit_codes.py gives its stand-in here)."""
    from terravixens.operations.terraform import Terraform

    return Terraform(layer_env=layer_env)


Operation = Callable[[argparse.Namespace, Any, Any, Any], int]


def _operation(command: Operation, monitor: bool = False) -> Callable[[argparse.Namespace], int]:
    """Loads the site, sets umask 077, runs the operation with a Console whose journal says what is done.

    An OperationError prints its message, then (when the operation had started) one line `stopped at <step>:
    done: …; not done: …`, and exits with its code; Ctrl-C (and SIGTERM/SIGHUP, which the runner turns into the
    same exception) prints `interrupted by SIGINT (… stopped with its process group) at …` (its journal,
    terravixens.operations.journal.interrupted_line) and exits INTERRUPTED. A monitor (`monitor`: drift) exits
    MonitorExit.ERROR for every stop and for a bad site, so that 2 only ever means drift.

    When the operation touches an L2 layer, each such layer's apply-time tokens come from the secrets file
    (--secrets or $TERRAVIXENS_SECRETS) and the specs' postures (terravixens.operations.standalone_env)."""

    def run(args: argparse.Namespace, site: Any) -> int:
        from terravixens.operations import OperationError
        from terravixens.operations.console import Console
        from terravixens.operations.files import private_process
        from terravixens.operations.journal import interrupted_line
        from terravixens.operations.standalone_env import standalone_layer_env
        from terravixens.operations.workspace import Workspace

        private_process()
        # --json: stdout holds the document only (terravixens.output); progress goes to stderr.
        console = Console(out=sys.stderr) if getattr(args, "json", False) else Console()
        name = args.entry.name
        try:
            # Only the commands that take --secrets plan or apply a layer with apply-time variables.
            selected = _selected_layers(args) if hasattr(args, "secrets") else []
            layer_env = standalone_layer_env(site, args.site, getattr(args, "secrets", None), selected)
            return command(args, Workspace(site), _terraform(layer_env), console)
        except OperationError as error:
            print(f"terravixens {name}: {error}", file=sys.stderr)
            line = console.journal.line(interrupted=False)
            if line:
                print(line, file=sys.stderr)
            return MonitorExit.ERROR if monitor else error.code
        except KeyboardInterrupt as error:
            print(f"terravixens {name}: {interrupted_line(error, console.journal)}", file=sys.stderr)
            return INTERRUPTED

    return _with_site(run, bad_site=MonitorExit.ERROR if monitor else BAD_INPUT)


def _check_options(args: argparse.Namespace, wait_option: str) -> Any:
    """The acceptance check's options, from `check`'s or `deploy --check`'s arguments (durations parsed here: a bad
    one is BAD_INPUT, or ERROR for the monitor, never argparse's 2)."""
    from terravixens.operations.acceptance import CheckOptions
    from terravixens.operations.check import parse_since, parse_wait

    return CheckOptions(
        talosconfig=getattr(args, "talosconfig", None),
        kubeconfig=getattr(args, "kubeconfig", None),
        since=parse_since(args.since) if getattr(args, "since", None) else None,
        tail=getattr(args, "tail", 300),
        wait=parse_wait(getattr(args, wait_option.lstrip("-").replace("-", "_")), wait_option),
        talosctl=args.talosctl,
        timeout=parse_wait(args.check_timeout, "--timeout") or 1,
    )


def _check(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations.check import CheckCommand, check
    from terravixens.operations.kube import Kubectl

    kubectl = Kubectl(args.kubectl) if args.kubectl else None
    if args.json:  # check() prints its document, and only that, on the console it is given: stdout
        from terravixens.operations.console import Console

        console = Console(journal=console.journal)
    return check(ws, args.cluster, tf, _check_options(args, "--wait"), console, CheckCommand(json=args.json), kubectl)


def _deploy(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations.deploy import DeployOptions, deploy
    from terravixens.operations.etcd import SnapshotPolicy
    from terravixens.operations.scale_in import ScaleInOptions

    return deploy(
        ws,
        None if args.all else args.layers,
        tf,
        DeployOptions(
            yes=args.yes,
            allow_reboot=frozenset(args.allow_reboot),
            lock_timeout=args.lock_timeout,
            save_plan_json=Path(args.save_plan_json) if args.save_plan_json else None,
            dry_run=args.dry_run,
            scale_in=ScaleInOptions(
                worker_batch=args.worker_batch,
                snapshot=SnapshotPolicy(skip_reason=args.no_snapshot),
                talosctl=args.talosctl,
                talosconfig=args.talosconfig,
                timeout=args.talosctl_timeout,
            ),
            check=_check_options(args, "--check-wait") if args.check else None,
        ),
        console,
    )


def _destroy(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations.destroy import DestroyOptions, destroy

    return destroy(ws, args.layer, tf, DestroyOptions(confirm=args.confirm), console)


def _restore(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations.restore import restore

    return restore(
        ws, args.layer, Path(args.backup), tf, confirm=args.confirm, any_lineage=args.any_lineage, console=console
    )


def _decommission(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations.decommission import DecommissionOptions, decommission
    from terravixens.operations.etcd import SnapshotPolicy
    from terravixens.talosctl import Talosctl

    return decommission(
        ws,
        args.cluster,
        tf,
        DecommissionOptions(
            confirm=args.confirm,
            delete_vms=args.delete_vms,
            destroy_secrets=args.destroy_secrets,
            yes=args.yes,
            snapshot=SnapshotPolicy(skip_reason=args.no_snapshot),
            talosctl=Talosctl(args.talosctl, timeout=args.timeout),
            talosconfig=args.talosconfig,
        ),
        console=console,
    )


def _remove_dead_member(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations.dead_member import DeadMemberOptions, remove_dead_member, snapshot_before_removal
    from terravixens.operations.etcd import SnapshotPolicy
    from terravixens.talosctl import Talosctl

    # Without --talosconfig the operation reads the platform layer's output after synth (a placeholder until then).
    talosctl = Talosctl(args.talosctl, args.talosconfig or "", args.timeout, probe_timeout=args.probe_timeout)
    return remove_dead_member(
        ws,
        args.cluster,
        args.node,
        tf,
        talosctl,
        console=console,
        options=DeadMemberOptions(
            confirm=args.confirm,
            force=args.force,
            probes=args.probes,
            probe_window=args.probe_window,
            before_irreversible=snapshot_before_removal(ws, SnapshotPolicy(skip_reason=args.no_snapshot)),
            talosconfig_from_layer=args.talosconfig is None,
        ),
    )


def _snapshot(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.etcd_snapshots import DEFAULT_KEEP
    from terravixens.operations import OperationError
    from terravixens.operations.snapshot import SnapshotOptions, snapshot_list, take_snapshot
    from terravixens.talosctl import Talosctl

    if args.list:
        if args.keep is not None:
            raise OperationError("--keep applies when a snapshot is taken; --list only lists", BAD_INPUT)
        return _render(args, snapshot_list(ws, args.cluster))
    if args.json:
        raise OperationError("--json goes with --list (a snapshot being taken prints its progress)", BAD_INPUT)
    options = SnapshotOptions(
        keep=DEFAULT_KEEP if args.keep is None else args.keep,
        talosconfig=args.talosconfig,
        talosctl=Talosctl(args.talosctl, timeout=args.timeout),
    )
    return take_snapshot(ws, args.cluster, tf, options, console)


def _restore_etcd(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations import OperationError
    from terravixens.operations.etcd import SnapshotPolicy
    from terravixens.operations.restore_etcd import RestoreOptions, restore_etcd
    from terravixens.talosctl import Talosctl

    if args.no_snapshot is not None and not args.force:
        raise OperationError(
            "--no-snapshot goes with --force: only an etcd that still answers is snapshotted before it is "
            "restored over; nothing was done",
            BAD_INPUT,
        )
    return restore_etcd(
        ws,
        args.cluster,
        tf,
        Talosctl(args.talosctl, timeout=args.timeout),
        RestoreOptions(
            source=Path(args.source),
            confirm=args.confirm,
            force=args.force,
            skip_hash_check=args.skip_hash_check,
            talosconfig=args.talosconfig,
            snapshot=SnapshotPolicy(skip_reason=args.no_snapshot),
            timeout=args.timeout,
            poll=args.poll,
        ),
        console,
    )


def _drift(args: argparse.Namespace, ws: Any, tf: Any, console: Any) -> int:
    from terravixens.operations.check import parse_wait
    from terravixens.operations.drift import TalosSide, drift_report
    from terravixens.talosctl import Talosctl

    timeout = parse_wait(args.timeout, "--timeout") or 1
    talos = TalosSide(not args.terraform_only, Talosctl(args.talosctl, timeout=timeout))
    return _render(args, drift_report(ws, args.layers, tf, console, talos=talos))


def _review(args: argparse.Namespace) -> int:
    from terravixens.operations import OperationError
    from terravixens.operations.files import require_new_file, write_new
    from terravixens.operations.review import review_dirs, review_ref

    try:
        if args.output:  # before two synths: an output that cannot be written costs nothing
            require_new_file(Path(args.output), "--output")
        if args.before or args.after:
            if not (args.before and args.after) or args.base:
                print("terravixens review: give BASE, or both --before and --after", file=sys.stderr)
                return BAD_INPUT
            result = review_dirs(Path(args.before), Path(args.after))
        else:
            if not args.base:
                print("terravixens review: give BASE (a git ref), or --before DIR --after DIR", file=sys.stderr)
                return BAD_INPUT
            result = review_ref(Path.cwd(), args.base, args.site or os.environ.get(SITE_ENV) or "sites/example.yaml")
        if args.output:
            write_new(Path(args.output), result.text + "\n", "--output", private=False)
    except OperationError as error:
        print(f"terravixens review: {error}", file=sys.stderr)
        return error.code
    return _render(args, replace(result, strict=args.strict))


# ------------------------------------------------------------------------------------------------- spec, schema
def _schema_export(args: argparse.Namespace) -> int:
    from terravixens.standalone.schemas import export

    for path in export(Path(args.out)):
        print(path)
    return OK


def _spec_validate(args: argparse.Namespace) -> int:
    from terravixens.standalone.validate import validate

    if (args.path is None) == (args.site is None):
        print("spec validate: give a spec file or folder, or --site SITE [--secrets FILE]", file=sys.stderr)
        return BAD_INPUT
    code, text = validate(
        args.path and Path(args.path), args.site and Path(args.site), args.secrets and Path(args.secrets)
    )
    print(text, file=sys.stderr if code else sys.stdout)
    return code


def _spec_serve(args: argparse.Namespace) -> int:
    from terravixens.config.loader import DEFAULT_SITE
    from terravixens.standalone.secrets import SECRETS_ENV

    try:
        from terravixens.specserver.server import ServeOptions, serve
    except ModuleNotFoundError as error:  # the `serve` extra (pyproject.toml) is optional: say how to add it
        missing = (error.name or "").partition(".")[0]
        if missing not in ("starlette", "uvicorn", "httptools"):
            raise
        print(f"spec serve: {missing} is not installed: pip install 'terravixens[serve]'", file=sys.stderr)
        return BAD_INPUT

    secrets = args.secrets or os.environ.get(SECRETS_ENV)
    if not secrets:
        print(f"spec serve: give the secrets file (--secrets FILE or ${SECRETS_ENV})", file=sys.stderr)
        return BAD_INPUT
    return serve(
        ServeOptions(
            site=Path(args.site or os.environ.get(SITE_ENV) or DEFAULT_SITE),
            secrets=Path(secrets),
            host=args.host,
            port=args.port,
            tls_cert=args.tls_cert and Path(args.tls_cert),
            tls_key=args.tls_key and Path(args.tls_key),
            watch_interval=args.watch_interval,
            header_timeout=args.header_timeout,
            max_connections_per_client=args.max_connections_per_client,
        )
    )


def _spec_target(args: argparse.Namespace) -> tuple[dict[str, Any], Any] | int:
    """The node's SSH target: --address, or the node's first address in the site file."""
    from terravixens.operations.spec_push import SshTarget
    from terravixens.standalone.catalog import CatalogError
    from terravixens.standalone.resolve import load_standalone
    from terravixens.standalone.secrets import SECRETS_ENV

    try:
        standalone = load_standalone(args.site, getattr(args, "secrets", None) or os.environ.get(SECRETS_ENV))
    except (SiteError, CatalogError) as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    node = standalone.nodes.get(args.node)
    if node is None:
        names = ", ".join(sorted(standalone.nodes))
        print(f"spec: {args.node!r} is not a standalone node of {args.site}: use one of {names}", file=sys.stderr)
        return BAD_INPUT
    host = args.address or node.placed.nics[0].address.split("/")[0]
    known = Path(args.known_hosts) if args.known_hosts else None
    identity = Path(args.identity) if args.identity else None
    target = SshTarget(host, args.port, args.user, identity, known, args.timeout)
    return standalone.documents.get(args.node) or {}, target


def _spec_push(args: argparse.Namespace) -> int:
    import json

    from terravixens.operations import spec_push

    found = _spec_target(args)
    if isinstance(found, int):
        return found
    document, target = found
    if args.handoff:
        outcome = spec_push.handoff(target, dry_run=args.dry_run)
    else:
        outcome = spec_push.push(target, document, dry_run=args.dry_run)
    verb = "handoff" if args.handoff else "push"
    if args.json and outcome.result is not None:
        print(json.dumps(outcome.result))
    else:
        print("\n".join(spec_push.lines(args.node, verb, outcome)))
    return OK if outcome.ok else FAILED


def _spec_handoff(args: argparse.Namespace) -> int:
    args.handoff = True
    return _spec_push(args)


def _spec_get(args: argparse.Namespace) -> int:
    from terravixens.specclient.get import GetOptions, run

    return run(
        GetOptions(
            env_file=args.env_file and Path(args.env_file),
            out=Path(args.out),
            budget=args.max_time,
            attempt_timeout=args.attempt_timeout,
        )
    )


def _completion(args: argparse.Namespace) -> int:
    from terravixens.completion import script

    print(script(args.shell, _words(parser())), end="")
    return OK


def _words(top: argparse.ArgumentParser, name: str = "terravixens", help: str = "") -> Any:
    """The command line's words for terravixens.completion, read from the parser built from COMMANDS."""
    from terravixens.completion import words

    options = [option for action in top._actions for option in action.option_strings if option.startswith("--")]
    children = [
        _words(sub, word, next((c.help or "" for c in action._choices_actions if c.dest == word), ""))
        for action in top._actions
        if isinstance(action, argparse._SubParsersAction)
        for word, sub in action.choices.items()
    ]
    return words(name, help, options, children)


class _Version(argparse.Action):
    """`--version`: every version a bug report needs (terravixens.version), then exit 0, whatever is missing."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        from terravixens.version import versions

        print("\n".join(versions().lines()), flush=True)
        parser.exit()


# ---------------------------------------------------------------------------------------------------- arguments
def _duration(text: str) -> int:
    from terravixens.talosctl import parse_duration

    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _seconds(minimum: float, maximum: float = 86_400.0) -> Callable[[str], float]:
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


def _whole(minimum: int, what: str, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number of `what`, at least `minimum` (`why` says why that minimum)."""

    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {what}: give a whole number, {minimum} or more{f' ({why})' if why else ''}"
            )
        return int(text)

    return parse


_batch = _whole(1, "batch size of workers")
_probes = _whole(2, "number of probes", "a single probe cannot tell a dead node from a reboot")
_keep = _whole(1, "number of snapshots to keep", "the new one is always kept")


def _no_snapshot(text: str) -> str:
    from terravixens.operations.etcd import no_snapshot_reason

    try:
        return no_snapshot_reason(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _no_snapshot_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str) -> None:
    """--no-snapshot REASON, the same for every command that takes an etcd snapshot (ADR 0036)."""
    parser.add_argument(
        "--no-snapshot",
        type=_no_snapshot,
        metavar="REASON",
        help=f"go on without the fresh etcd snapshot taken {what}, saying why (printed where the snapshot would be)",
    )


def _talosctl_options(parser: argparse.ArgumentParser, timeout: str, what: str) -> None:
    parser.add_argument(
        "--talosconfig",
        metavar="FILE",
        help="talosctl client configuration (default: the platform layer's talosconfig output, written 0600 to a "
        "private temporary folder and removed afterwards)",
    )
    parser.add_argument("--talosctl", default="talosctl", metavar="BIN", help="the talosctl binary")
    parser.add_argument(
        "--timeout",
        type=_duration,
        default=timeout,
        metavar="DURATION",
        help=f"deadline of each talosctl call{what}, e.g. 90s, 15m (default {timeout})",
    )


def _allow_reboot_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-reboot",
        action="append",
        default=[],
        metavar="NODE",
        help="let NODE's configuration change reboot it (repeatable)",
    )


def _site_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", help=SITE_HELP)


def _secrets_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secrets",
        help="the secrets file: L2 nodes' tokens, gitops layers' Flux git credentials (default: $TERRAVIXENS_SECRETS)",
    )


def _site_argument(parser: argparse.ArgumentParser) -> None:
    """--site, and the positional SITE it replaces (accepted for one release, with a note: ADR 0040)."""
    _site_option(parser)
    parser.add_argument(
        "site_positional",
        nargs="?",
        metavar="SITE",
        help="deprecated: write --site SITE (accepted until the next release)",
    )


def _json_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "") -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print one JSON document{what} on stdout, nothing else there (docs/json-output.md)",
    )


def _validate_args(parser: argparse.ArgumentParser) -> None:
    _site_argument(parser)
    _json_option(parser, " (terravixens/validate/v1: counts, or every problem)")


def _stacks_args(parser: argparse.ArgumentParser) -> None:
    _site_argument(parser)
    _json_option(parser, " (terravixens/stacks/v1: each stack's level, kind, cluster and predecessor)")


def _plan_guard_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", help="output of `terraform show -json PLANFILE` ('-' for standard input)")
    parser.add_argument(
        "--site",
        help="site file: roles, and what its nodes want from L0 (default: $TERRAVIXENS_SITE or sites/example.yaml)",
    )
    parser.add_argument("--layer", help="the layer the plan is of (platform-<cluster>): roles of that cluster only")
    _allow_reboot_option(parser)
    parser.add_argument(
        "--plan-log",
        help="`terraform plan -json` output of the same plan (tells the guard which reboot checks could not run)",
    )
    parser.add_argument(
        "--deployed-state",
        action="append",
        default=[],
        metavar="STATE",
        help="a platform layer's `terraform state pull` (what its VMs use; repeatable)",
    )
    parser.add_argument(
        "--teardown",
        action="store_true",
        help="the plan is a `plan -destroy`: its deletions are the request (nodes leave), and "
        "what the site's nodes want from L0 does not count",
    )
    parser.add_argument("--max-size-mib", type=int, default=512, help="refuse larger plan files (default 512)")
    _json_option(parser, " (terravixens/plan-guard/v1: the verdict and every violation)")


def _upgrade_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster")
    _site_option(parser)
    parser.add_argument(
        "--talosconfig",
        help="talosctl client configuration (default: ./talosconfig if there is one, else the platform layer's "
        "talosconfig output, read from the cdktf.out/stacks/platform-CLUSTER a deploy left here)",
    )
    parser.add_argument("--talosctl", default="talosctl", help="the talosctl binary (matching the target version)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="read what each node runs (talosctl version, get extensions) and print exactly what the run would do: "
        "which nodes are upgraded or re-imaged and why, which are skipped, in order and batches; change nothing",
    )
    parser.add_argument(
        "--kubernetes",
        action="store_true",
        help="upgrade Kubernetes to the site's kubernetes_version (talosctl upgrade-k8s), then health",
    )
    parser.add_argument(
        "--worker-batch",
        type=_batch,
        default=1,
        metavar="N",
        help="upgrade workers N at a time, each batch gated on health (control planes: always one)",
    )
    parser.add_argument(
        "--timeout",
        type=_duration,
        default="15m",
        help="deadline of each talosctl call, e.g. 90s, 15m, 1h (default 15m)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a downgrade (a node newer than talos_version), skipping a Talos minor, or re-imaging a node "
        "not booted from an Image Factory image",
    )
    _no_snapshot_option(parser, "before each control plane's upgrade")
    _json_option(parser, " with --dry-run (terravixens/upgrade-dry-run/v1: each node's action, the units in order)")


def _deploy_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("layers", nargs="*", metavar="LAYER", help="layers to deploy, in apply order (default: all)")
    parser.add_argument("--all", action="store_true", help="every layer of the site (the default without LAYER)")
    parser.add_argument("--yes", action="store_true", help="apply without asking (the guard still runs)")
    _allow_reboot_option(parser)
    parser.add_argument(
        "--save-plan-json",
        metavar="PATH",
        help="also write the plan's JSON to this new file (0600; it holds secrets; never overwritten)",
    )
    parser.add_argument("--lock-timeout", default="0s", help="wait this long for a state lock (e.g. 60s)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="plan, guard and show what would run (a scale-in: its steps), apply nothing",
    )
    _secrets_option(parser)
    scale_in = parser.add_argument_group(
        "scale-in",
        "a platform layer whose plan takes control planes out of etcd runs as steps: new nodes first, then one "
        "control plane per apply, each with an etcd snapshot, talosctl health and the etcd members read back "
        "(ADR 0037)",
    )
    scale_in.add_argument(
        "--worker-batch",
        type=_batch,
        default=None,
        metavar="N",
        help="workers that leave go N per apply, each batch health-checked (default: all in one apply)",
    )
    _no_snapshot_option(scale_in, "before each scale-in step that changes etcd")
    scale_in.add_argument(
        "--talosconfig",
        help="talosctl client configuration (default: the platform layer's talosconfig output, 0600, removed after)",
    )
    scale_in.add_argument(
        "--talosctl", default="talosctl", help="the talosctl binary (the scale-in steps, and --check)"
    )
    scale_in.add_argument(
        "--talosctl-timeout",
        type=_duration,
        default="10m",
        metavar="DURATION",
        help="deadline of each talosctl call (health waits up to it), e.g. 90s, 10m (default 10m)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="after each cluster's platform and gitops layers: `terravixens check CLUSTER`; its problems exit 6",
    )
    parser.add_argument(
        "--check-wait",
        default="5m",
        metavar="DURATION",
        help="with --check: keep checking (every 10s) while something fails, up to this long (default 5m; 0: once)",
    )
    parser.add_argument(
        "--check-timeout",
        default="60s",
        metavar="DURATION",
        help="with --check: deadline of each talosctl call, and how long `talosctl health` waits (default 60s)",
    )


def _check_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("cluster")
    _json_option(parser, " (terravixens/check/v1: the verdict and each check's problems)")
    parser.add_argument(
        "--since",
        metavar="DURATION|TIME",
        help="the log check's window: a duration back from now (30m) or a UTC time (2026-01-10T10:02:00Z); "
        "default: the last apply (the newest state backup of the cluster's layers)",
    )
    parser.add_argument(
        "--wait",
        default="0",
        metavar="DURATION",
        help="keep checking (every 10s) while something fails, up to this long (default 0: once)",
    )
    parser.add_argument("--talosconfig", metavar="FILE", help="default: the platform layer's talosconfig output")
    parser.add_argument("--kubeconfig", metavar="FILE", help="default: the platform layer's kubeconfig output")
    parser.add_argument("--talosctl", default="talosctl", help="the talosctl binary")
    parser.add_argument("--kubectl", help="the kubectl binary (default: $KUBECTL or kubectl)")
    parser.add_argument(
        "--timeout",
        dest="check_timeout",
        default="60s",
        metavar="DURATION",
        help="deadline of each talosctl call, and how long `talosctl health` waits (default 60s); kubectl's: "
        "$TERRAVIXENS_KUBECTL_TIMEOUT",
    )
    parser.add_argument("--tail", type=int, default=300, metavar="N", help="lines read per log and node (default 300)")


def _destroy_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("layer")
    parser.add_argument("--confirm", metavar="SITE/LAYER", help="the typed confirmation, for unattended runs")
    _secrets_option(parser)


def _restore_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("layer")
    parser.add_argument("backup", help="a file under state-backups/ (or any `terraform state pull` output)")
    parser.add_argument("--confirm", metavar="SITE/LAYER")
    parser.add_argument("--any-lineage", action="store_true", help="accept a backup of another state lineage")


def _decommission_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("cluster")
    parser.add_argument("--confirm", metavar="SITE/CLUSTER", help="the typed confirmation, for unattended runs")
    parser.add_argument("--yes", action="store_true", help="do not ask before each step")
    parser.add_argument(
        "--delete-vms", action="store_true", help="also delete the VMs (default: kept, in maintenance mode)"
    )
    parser.add_argument(
        "--destroy-secrets",
        action="store_true",
        help="last: destroy the machine secrets (the cluster's identity) for good",
    )
    _no_snapshot_option(parser, "before the first reset")
    _talosctl_options(parser, "5m", " (the etcd snapshot)")


def _dead_member_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("cluster")
    parser.add_argument("node")
    parser.add_argument(
        "--talosconfig",
        metavar="FILE",
        help="talosctl client configuration (default: the platform layer's talosconfig output, written 0600 to a "
        "private temporary folder and removed afterwards)",
    )
    parser.add_argument("--talosctl", default="talosctl", metavar="BIN", help="the talosctl binary")
    parser.add_argument("--confirm", metavar="SITE/CLUSTER/NODE", help="the typed confirmation, for unattended runs")
    _no_snapshot_option(parser, "right before the member's removal")
    parser.add_argument(
        "--probes",
        type=_probes,
        default=4,
        metavar="N",
        help="probe NODE (talosctl version) N times over the window; one answer refuses (default 4)",
    )
    parser.add_argument(
        "--probe-window",
        type=_duration,
        default="60s",
        metavar="DURATION",
        help="the period NODE must stay silent, e.g. 60s, 5m (default 60s)",
    )
    parser.add_argument(
        "--probe-timeout",
        type=_duration,
        default="10s",
        metavar="DURATION",
        help="deadline of each probe (default 10s)",
    )
    parser.add_argument(
        "--timeout",
        type=_duration,
        default="60s",
        metavar="DURATION",
        help="deadline of each other talosctl call (default 60s)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="proceed even though the node answers `talosctl version` "
        "(a live node whose etcd is broken); still confirmed",
    )


def _snapshot_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("cluster")
    parser.add_argument(
        "--list", action="store_true", help="list the kept snapshots (time, node, reason, size, verified); runs nothing"
    )
    _json_option(parser, " with --list (terravixens/snapshot-list/v1)")
    parser.add_argument(
        "--keep",
        type=_keep,
        metavar="N",
        help="retention: keep the newest N verified snapshots of the cluster (default 10; unverified ones are never "
        "removed)",
    )
    _talosctl_options(parser, "5m", " (the snapshot's stream)")


def _restore_etcd_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("cluster")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="FILE",
        help="the snapshot (etcd-snapshots/..., or any `talosctl etcd snapshot` file); verified first",
    )
    parser.add_argument(
        "--skip-hash-check",
        action="store_true",
        help="FILE is a `db` copied out of an etcd data directory, without etcd's digest: restored with talosctl "
        "bootstrap --recover-skip-hash-check (nothing proves it is intact)",
    )
    parser.add_argument("--confirm", metavar="SITE/CLUSTER", help="the typed confirmation, for unattended runs")
    parser.add_argument(
        "--force",
        action="store_true",
        help="restore even though etcd answers (every write since FILE is lost; a fresh snapshot of it is taken first)",
    )
    _no_snapshot_option(parser, "with --force, before the resets")
    _talosctl_options(parser, "15m", ", and of the wait for etcd to be Preparing")
    parser.add_argument(
        "--poll",
        type=_duration,
        default="5s",
        metavar="DURATION",
        help="time between two `talosctl service etcd` while waiting for Preparing (default 5s)",
    )


def _drift_args(parser: argparse.ArgumentParser) -> None:
    _site_option(parser)
    parser.add_argument("layers", nargs="*", metavar="LAYER")
    _secrets_option(parser)
    parser.add_argument(
        "--terraform-only",
        action="store_true",
        help="only what Terraform's providers read back: skip the Talos side (versions, images, etcd members, "
        "Kubernetes Nodes)",
    )
    parser.add_argument("--talosctl", default="talosctl", help="the talosctl binary (Talos side)")
    parser.add_argument(
        "--timeout", default="60s", metavar="DURATION", help="deadline of each talosctl call (default 60s)"
    )
    _json_option(parser, " (terravixens/drift/v1: each layer's changes and Talos side; progress on stderr)")


def _review_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", nargs="?", help="git ref to compare the working tree with (e.g. origin/main)")
    parser.add_argument(
        "--site", help="site file, relative to the repository (default: $TERRAVIXENS_SITE or sites/example.yaml)"
    )
    parser.add_argument("--before", help="compare two cdktf.out directories instead: the old one")
    parser.add_argument("--after", help="the new cdktf.out directory")
    parser.add_argument("--output", help="also write the Markdown to this new file (never overwritten)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when an address of an unnamed node changes")
    _json_option(parser, " (terravixens/review/v1: every changed address, and the Markdown)")


def _completion_args(parser: argparse.ArgumentParser) -> None:
    from terravixens.completion import SHELLS

    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def _schema_export_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="json-schemas", help="folder to write into (default: json-schemas)")


def _spec_validate_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="a spec file, a specs folder, or a site file (same as --site)")
    parser.add_argument("--site", help="check the site's standalone nodes against its specs folder instead")
    parser.add_argument("--secrets", help="with --site: also check ssh keys and tokens in this secrets file")


def _spec_serve_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", help="site file (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    parser.add_argument("--secrets", help="secrets file, mode 0600 (default: $TERRAVIXENS_SECRETS)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8443, help="port (default 8443; 0 picks a free one)")
    parser.add_argument("--tls-cert", help="PEM certificate (chain): serve https")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--watch-interval",
        type=_seconds(0.0),
        default=2.0,
        help="seconds between checks for changed files (0: reload on SIGHUP only)",
    )
    parser.add_argument(
        "--header-timeout",
        type=_seconds(0.1, 600.0),
        default=10.0,
        help="seconds a client has to send its request headers (default 10)",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=_whole(1, "number of connections"),
        default=16,
        help="open connections one client address may hold; more are closed at once (default 16)",
    )


def _spec_get_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env-file", help="default: $TERRAVIXENS_NODE_ENV or /etc/terravixens/node.env")
    parser.add_argument("--out", default="/var/lib/terravixens/spec.json", help="where the spec is written (0600)")
    parser.add_argument(
        "--max-time", type=_seconds(0.1), default=120.0, help="give up after this many seconds (default 120)"
    )
    parser.add_argument(
        "--attempt-timeout",
        type=_seconds(0.1),
        default=10.0,
        help="seconds per attempt, wall clock: connect, TLS and the whole answer (default 10)",
    )


def _spec_push_args(parser: argparse.ArgumentParser, secrets: bool = True) -> None:
    from terravixens.standalone.secrets import SECRETS_ENV

    parser.add_argument("node", help="the standalone node's name")
    parser.add_argument("--site", required=True, help="the site file")
    if secrets:
        parser.add_argument("--secrets", help=f"the secrets file (default ${SECRETS_ENV}): the users' ssh keys")
    parser.add_argument("--address", help="where to reach the node (default: its first address in the site file)")
    parser.add_argument("--port", type=int, default=22, help="its SSH port (default 22)")
    parser.add_argument("--user", default="root", help="the SSH user (default root)")
    parser.add_argument("--identity", help="the SSH private key (default: ssh's own)")
    parser.add_argument("--known-hosts", help="a known_hosts file (default: ssh's own; unknown host keys are refused)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for each SSH call (default 900)")
    parser.add_argument("--dry-run", action="store_true", help="the agent prints what it would change")
    parser.add_argument("--json", action="store_true", help="print the agent's JSON result only")
    parser.set_defaults(handoff=False)


def _spec_handoff_args(parser: argparse.ArgumentParser) -> None:
    _spec_push_args(parser, secrets=False)


# ------------------------------------------------------------------------------------------------ command table
# What an operation that synthesizes, plans and applies can return (deploy, destroy, restore, decommission).
SYNTH_RULE = "a safety rule stopped synth (its messages printed)"
AGENT_FAILED = (
    "ssh or the agent failed, or a section failed on the node (the last line says which; the others are applied)"
)

COMMANDS: tuple[Command, ...] = (
    Command(
        "validate",
        "check a site file and print every problem",
        _validate_args,
        _validate,
        codes(OK, (BAD_INPUT, "the site file (or a standalone spec) has problems: every one printed"), INTERRUPTED),
        examples=(
            "terravixens validate --site sites/example.yaml",
            "terravixens validate --site sites/example.yaml --json",
        ),
    ),
    Command(
        "stacks",
        "list the stacks of a site, in apply order",
        _stacks_args,
        _stacks,
        codes(OK, BAD_INPUT, INTERRUPTED),
        examples=(
            "terravixens stacks --site sites/example.yaml",
            "terravixens stacks --json",
        ),
    ),
    Command(
        "plan-guard",
        "refuse a plan that replaces a node, loses quorum or secrets",
        _plan_guard_args,
        _plan_guard,
        codes(
            OK,
            (REFUSED, "the plan breaks a promise: one line per problem and why"),
            (BAD_INPUT, "not a plan (or a state, log or site that cannot be read)"),
            INTERRUPTED,
        ),
        examples=(
            "terraform show -json plan.tfplan | terravixens plan-guard - --layer platform-prod",
            "terravixens plan-guard plan.json --layer platform-prod --allow-reboot cp-a --plan-log plan.log --json",
        ),
    ),
    Command(
        "upgrade",
        "rolling Talos upgrade and image roll-out, one node at a time, gated on health",
        _upgrade_args,
        _upgrade,
        codes(
            (
                OK,
                (
                    "every node on the target version and schematic (read back), cluster healthy; with --dry-run: the "
                    "plan is printed"
                ),
            ),
            (
                REFUSED,
                (
                    "a downgrade, a skipped Talos minor, or a node not booted from an Image Factory image, without "
                    "--force: no node touched"
                ),
            ),
            (BAD_INPUT, "site file, unknown cluster, bad option, no talosconfig"),
            (
                FAILED,
                (
                    "a talosctl call failed, hung or is missing, a node is not on the target version and "
                    "schematic after its upgrade (rolled back), a version talosctl printed cannot be understood, "
                    "or the cluster is unhealthy: the last line says where, what is done and what is not "
                    "touched; run it again once fixed (--dry-run: a node could not be read)"
                ),
            ),
            (
                BACKUP_FAILED,
                (
                    "no verified etcd snapshot before a control plane's upgrade (without --no-snapshot REASON): "
                    "stopped before that node"
                ),
            ),
            (INTERRUPTED, "an upgrade Talos already started goes on inside the node; run it again"),
        ),
        examples=(
            "terravixens upgrade prod --dry-run",
            "terravixens upgrade prod --dry-run --json",
            "terravixens upgrade prod --worker-batch 2 --kubernetes",
        ),
    ),
    Command(
        "show",
        "the site at a glance: hypervisors, clusters, nodes, the L2 tree, layers",
        _show_args,
        _show,
        codes(OK, (BAD_INPUT, "the site file has problems: every one printed, with its file and line"), INTERRUPTED),
        examples=(
            "terravixens show",
            "terravixens show --site sites/standalone.yaml --format mermaid",
            "terravixens show --json",
        ),
    ),
    Command(
        "deploy",
        "synth, plan, guard, confirm, back up and apply, per layer",
        _deploy_args,
        _operation(_deploy),
        codes(
            (OK, "applied, or no changes, or --dry-run (nothing applied)"),
            (
                REFUSED,
                (
                    f"the plan guard refused a layer's plan or a scale-in step's, a step's plan is not the step, or "
                    f"{SYNTH_RULE}; that step and later layers untouched"
                ),
            ),
            (
                BAD_INPUT,
                (
                    "site file, unknown layer, secrets file, --save-plan-json names an existing file, or a scale-in "
                    "without a talosconfig"
                ),
            ),
            DECLINED,
            (
                FAILED,
                (
                    "terraform failed (the state before it is in the backup printed) or is missing; or in a scale-in, "
                    "talosctl health or the etcd members before or after a step are not what it expects: the last line "
                    "says which steps are done; run it again once fixed, it resumes; or --check could not read the "
                    "cluster after its apply"
                ),
            ),
            (
                BACKUP_FAILED,
                (
                    "a state backup, or the etcd snapshot before a scale-in step, could not be taken and verified: "
                    "that step applied nothing"
                ),
            ),
            (CHECK_FAILED, "--check found problems after the apply (one line each, with what to do)"),
            INTERRUPTED,
        ),
        examples=(
            "terravixens deploy --dry-run",
            "terravixens deploy hypervisors platform-prod --yes",
            "terravixens deploy platform-prod --check",
        ),
    ),
    Command(
        "destroy",
        "destroy one layer, after a verified state backup",
        _destroy_args,
        _operation(_destroy),
        codes(
            (OK, "destroyed, or nothing to destroy"),
            (
                REFUSED,
                (
                    f"the guard or prevent_destroy refused (a platform layer is decommissioned), a nested "
                    f"host's layer still has guests, or {SYNTH_RULE}"
                ),
            ),
            (BAD_INPUT, "site file, unknown layer"),
            (DECLINED, "the typed SITE/LAYER was not given"),
            FAILED,
            BACKUP_FAILED,
            INTERRUPTED,
        ),
        examples=(
            "terravixens destroy gitops-prod",
            "terravixens destroy gitops-prod --confirm homelab/gitops-prod",
        ),
    ),
    Command(
        "restore",
        "put a state backup back (the current state is backed up)",
        _restore_args,
        _operation(_restore),
        codes(
            (OK, "the backup is the layer's state; the replaced one is backed up"),
            (REFUSED, SYNTH_RULE),
            (BAD_INPUT, "not a state, or another lineage without --any-lineage"),
            (DECLINED, "the typed SITE/LAYER was not given"),
            (FAILED, "terraform init or state push failed"),
            BACKUP_FAILED,
            INTERRUPTED,
        ),
        examples=("terravixens restore platform-prod state-backups/homelab/platform-prod/20260110T100200Z.tfstate",),
    ),
    Command(
        "decommission",
        "reset a cluster's nodes in order; secrets last",
        _decommission_args,
        _operation(_decommission),
        codes(
            (OK, "every node reset (VMs and secrets as asked)"),
            (
                REFUSED,
                (
                    f"the gitops layer still has resources, the cluster is not converged, the guard "
                    f"refused a step, or {SYNTH_RULE}"
                ),
            ),
            (BAD_INPUT, "site file, unknown cluster"),
            (DECLINED, "the typed SITE/CLUSTER or a step's yes"),
            FAILED,
            (
                BACKUP_FAILED,
                (
                    "no verified etcd snapshot before the first reset (nothing was changed; --no-snapshot REASON goes "
                    "on without), or a state backup failed"
                ),
            ),
            INTERRUPTED,
        ),
        examples=(
            "terravixens decommission prod",
            "terravixens decommission prod --delete-vms --confirm homelab/prod --yes",
        ),
    ),
    Command(
        "remove-dead-member",
        "remove an unreachable control plane from etcd",
        _dead_member_args,
        _operation(_remove_dead_member),
        codes(
            (OK, "the member is removed and its apply forgotten; take the node out of the site next"),
            (
                REFUSED,
                (
                    f"the node answered a probe (remove it the normal way), a probe failed for another "
                    f"reason than silence, no control plane lists etcd members (quorum lost), or "
                    f"{SYNTH_RULE}"
                ),
            ),
            (BAD_INPUT, "site file, unknown cluster, not a control plane"),
            (DECLINED, "the typed SITE/CLUSTER/NODE was not given"),
            (
                FAILED,
                (
                    "a talosctl, kubectl or terraform call failed, hung or is missing (the message says what "
                    "is done and what is not)"
                ),
            ),
            (
                BACKUP_FAILED,
                (
                    "the state backup, or the etcd snapshot right before the removal (through another control plane), "
                    "failed: etcd untouched; --no-snapshot REASON goes on without the snapshot"
                ),
            ),
            INTERRUPTED,
        ),
        examples=(
            "terravixens remove-dead-member prod cp-c",
            "terravixens remove-dead-member prod cp-c --probes 6 --probe-window 2m",
        ),
    ),
    Command(
        "snapshot",
        "take a verified etcd snapshot (or --list the kept ones)",
        _snapshot_args,
        _operation(_snapshot),
        codes(
            (OK, "the snapshot is kept (its path, verification and what retention removed printed), or the list"),
            (REFUSED, SYNTH_RULE),
            (BAD_INPUT, "site file, unknown cluster, bad option, no talosconfig output (give --talosconfig)"),
            (FAILED, "synth or terraform init (to read the talosconfig output) failed"),
            (
                BACKUP_FAILED,
                "no control plane gave a snapshot that verifies (each one's reason printed); nothing was kept",
            ),
            INTERRUPTED,
        ),
        examples=(
            "terravixens snapshot prod",
            "terravixens snapshot prod --list --json",
            "terravixens snapshot prod --keep 20 --talosconfig ./talosconfig",
        ),
    ),
    Command(
        "restore-etcd",
        "restore etcd from a snapshot: reset control planes, bootstrap",
        _restore_etcd_args,
        _operation(_restore_etcd),
        codes(
            (OK, "etcd restored on the bootstrap node, every control plane joined, talosctl health passed"),
            (
                REFUSED,
                (
                    "etcd answers (a control plane lists its members) and no --force: restoring would lose every "
                    f"write since the snapshot; or {SYNTH_RULE}; nothing was done"
                ),
            ),
            (
                BAD_INPUT,
                (
                    "site file, unknown cluster, FILE missing, not a verified snapshot, another cluster's, or without "
                    "etcd's digest and no --skip-hash-check; nothing was done"
                ),
            ),
            (DECLINED, "the typed SITE/CLUSTER was not given; nothing was done"),
            (
                FAILED,
                (
                    "a reset, the wait for Preparing, the bootstrap or health failed or hung: the last line says which "
                    "control planes are reset; run it again once fixed"
                ),
            ),
            (BACKUP_FAILED, "with --force: no fresh snapshot of the etcd that answers; nothing was done"),
            INTERRUPTED,
        ),
        examples=("terravixens restore-etcd prod --from etcd-snapshots/homelab/prod/FILE.snapshot",),
    ),
    Command(
        "drift",
        "plan each layer; exit 2 when something drifted",
        _drift_args,
        _operation(_drift, monitor=True),
        codes(
            MonitorExit.IN_SYNC,
            (
                MonitorExit.ERROR,
                (
                    "a bad site file, an unknown layer, terraform failing, or a safety rule stopping synth; or a "
                    "Talos-side reading (talosctl, kubectl) that could not be made and no drift found"
                ),
            ),
            (
                MonitorExit.FOUND,
                (
                    "a layer's plan would change something, or the Talos side differs from the site (version, "
                    "schematic, etcd members, Kubernetes Nodes); found wins over a reading that could not be made"
                ),
            ),
            INTERRUPTED,
        ),
        examples=(
            "terravixens drift",
            "terravixens drift platform-prod --terraform-only --json",
        ),
    ),
    Command(
        "check",
        "acceptance check: Talos, Nodes, Cilium, Flux, logs, certificates",
        _check_args,
        _operation(_check, monitor=True),
        codes(
            (MonitorExit.IN_SYNC, "every check passed"),
            (
                MonitorExit.ERROR,
                (
                    "a check could not look (no talosconfig or kubeconfig, talosctl or kubectl missing, failing or "
                    "unanswered) and none found a problem; or a bad site, option or cluster name"
                ),
            ),
            (MonitorExit.FOUND, "a check found a problem: one line each, with what to do (found wins)"),
            INTERRUPTED,
        ),
        examples=(
            "terravixens check prod",
            "terravixens check prod --wait 5m --json",
        ),
    ),
    Command(
        "review",
        "per stack and node, what a change does (Markdown for a PR)",
        _review_args,
        _review,
        codes(
            (OK, "the Markdown is printed (and written to --output)"),
            (
                REFUSED,
                (
                    "with --strict: an address of a node the change does not name changes; or a safety "
                    "rule stopped a synth"
                ),
            ),
            (BAD_INPUT, "no BASE, unknown ref, a synth that fails, or --output names an existing file"),
            INTERRUPTED,
        ),
        examples=(
            "terravixens review origin/main",
            "terravixens review --before old/cdktf.out --after cdktf.out --json",
        ),
    ),
    Command(
        "schema export",
        "write site, spec and posture JSON Schemas",
        _schema_export_args,
        _schema_export,
        codes(OK, INTERRUPTED),
        examples=("terravixens schema export --out json-schemas",),
    ),
    Command(
        "spec validate",
        "check a spec file or folder, or a site's standalone setup",
        _spec_validate_args,
        _spec_validate,
        codes(OK, (BAD_INPUT, "every problem printed"), INTERRUPTED),
        examples=(
            "terravixens spec validate specs/",
            "terravixens spec validate --site sites/example.yaml --secrets secrets.yaml",
        ),
    ),
    Command(
        "spec serve",
        "serve each standalone node its resolved spec",
        _spec_serve_args,
        _spec_serve,
        codes(
            (BAD_INPUT, "site, specs, secrets, TLS files or address unusable: it does not start"),
            (
                INTERRUPTED,
                (
                    "stopped with Ctrl-C, its normal end (SIGTERM: a graceful stop, then the process "
                    "ends by that signal, as systemd expects)"
                ),
            ),
        ),
        signals=False,
        examples=("terravixens spec serve --secrets secrets.yaml --tls-cert server.pem --tls-key server.key",),
    ),
    Command(
        "spec get",
        "on a node: fetch, verify and write its spec",
        _spec_get_args,
        _spec_get,
        codes(*SpecGetExit),
        examples=("terravixens spec get --env-file /etc/terravixens/node.env",),
    ),
    Command(
        "completion",
        "print a bash, zsh or fish completion script",
        _completion_args,
        _completion,
        codes(OK, INTERRUPTED),
        examples=(
            "terravixens completion bash > ~/.local/share/bash-completion/completions/terravixens",
            "terravixens completion zsh > ~/.zfunc/terravixens.zsh",
            "terravixens completion fish > ~/.config/fish/completions/terravixens.fish",
        ),
    ),
    Command(
        "spec push",
        "configure a node over SSH: send the agent and its spec, collect the JSON result",
        _spec_push_args,
        _spec_push,
        codes(OK, (BAD_INPUT, "site, specs, secrets or node name unusable: nothing sent"), (FAILED, AGENT_FAILED)),
        examples=(
            "terravixens spec push dns1 --site sites/standalone.yaml --secrets secrets.yaml",
            "terravixens spec push dns1 --site sites/standalone.yaml --dry-run",
        ),
    ),
    Command(
        "spec handoff",
        "trigger a node's own fetch and converge over SSH, collect the JSON result",
        _spec_handoff_args,
        _spec_handoff,
        codes(OK, (BAD_INPUT, "site or node name unusable: nothing sent"), (FAILED, AGENT_FAILED)),
        examples=("terravixens spec handoff dns1 --site sites/standalone.yaml --json",),
    ),
)
GROUPS = {
    "schema": "JSON Schemas of the files terravixens reads",
    "spec": "standalone nodes' specs: validate, serve, get",
}


def command(name: str) -> Command:
    return next(entry for entry in COMMANDS if entry.name == name)


def parser() -> argparse.ArgumentParser:
    """The whole command line, built from COMMANDS."""
    top = argparse.ArgumentParser(prog="terravixens", description=(__doc__ or "").split("\n")[0])
    top.add_argument(
        "--version", action=_Version, help="print the terravixens, cdktf, Terraform and provider versions, then exit"
    )
    commands = top.add_subparsers(dest="command", required=True)
    groups: dict[str, Any] = {}
    for entry in COMMANDS:
        words = entry.name.split()
        where = commands
        if len(words) == 2:
            if words[0] not in groups:
                group = commands.add_parser(words[0], help=GROUPS[words[0]])
                groups[words[0]] = group.add_subparsers(dest=f"{words[0]}_command", required=True)
            where = groups[words[0]]
        sub = where.add_parser(
            words[-1],
            help=entry.help,
            description=entry.help,
            epilog=entry.epilog(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        entry.build(sub)
        sub.set_defaults(entry=entry)
    return top


def main(argv: list[str] | None = None) -> int:
    # A terminal or CI log that cannot show a character gets an escape, never a UnicodeEncodeError traceback.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    args = parser().parse_args(argv)
    from terravixens.nodejs import jsii_environment

    # Before any synth starts jsii: the project's Node.js 22, quiet (no end-of-life banner, no DEP0044).
    os.environ.update(jsii_environment(os.environ, Path.cwd()))
    entry: Command = args.entry
    if not entry.returns(INTERRUPTED):
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
            return int(INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
