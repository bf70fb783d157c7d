"""The `terravixens` command: what cdktf lacks around synth (site validation first).

    terravixens validate [SITE]     check a site file; print every problem with file, field, value and fix
    terravixens stacks [SITE]       list the stacks (layers) the site synthesizes to, in apply order
    terravixens plan-guard PLAN     refuse a plan (`terraform show -json` output) that breaks the node promise
    terravixens upgrade CLUSTER     rolling Talos upgrade to the site's talos_version, one node at a time, gated on health
    terravixens deploy [LAYER…]     synth, plan, guard, confirm, back up, apply the saved plan — per layer, in order
    terravixens destroy LAYER       typed confirmation, verified state backup, guarded destroy of one layer
    terravixens restore LAYER FILE  put a state backup back
    terravixens decommission CLUSTER   reset a cluster's nodes in order (workers, control planes, the last one)
    terravixens remove-dead-member CLUSTER NODE   remove an unreachable control plane from etcd, then its apply
    terravixens drift [LAYER…]      plan -detailed-exitcode per layer; exit 2 on drift
    terravixens review BASE         what a change does per stack and node, as Markdown for a pull request
    terravixens schema export       JSON Schemas of the site, spec and posture files
    terravixens spec validate PATH  check a spec file or folder (or --site: a site's standalone nodes and their specs)
    terravixens spec serve          serve each standalone node its resolved spec (auth by posture)
    terravixens spec get            on a node: fetch its spec from the server, verify it, write it (0600)

Operations live in terravixens.operations (one module each); this file only parses and dispatches.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from terravixens.config.loader import SITE_ENV, SiteError, load_site


def _with_site(command, bad_site: int = 2):
    """Loads the site named on the command line; a bad site prints its problems and exits `bad_site`."""
    def run(args: argparse.Namespace) -> int:
        try:
            site = load_site(args.site)
        except SiteError as error:
            print(error, file=sys.stderr)
            return bad_site
        return command(args, site)
    return run


@_with_site
def _validate(args: argparse.Namespace, site) -> int:
    from terravixens.operations.validate import validate

    return validate(site, args.site, sys.stdout, sys.stderr)


@_with_site
def _stacks(args: argparse.Namespace, site) -> int:
    from terravixens.layers import stack_names

    print("\n".join(stack_names(site)))
    return 0


@_with_site
def _plan_guard(args: argparse.Namespace, site) -> int:
    from terravixens.operations.plan_guard import GuardOptions, plan_guard

    return plan_guard(site, GuardOptions(
        plan=args.plan, layer=args.layer, allow_reboot=frozenset(args.allow_reboot), plan_log=args.plan_log,
        deployed_states=tuple(args.deployed_state), teardown=args.teardown, limit=args.max_size_mib * 1024 * 1024,
    ), sys.stderr, sys.stdout)


def _selected_layers(args: argparse.Namespace) -> list[str] | None:
    """The layers an operation was asked for (None: all of them)."""
    if getattr(args, "layer", None):
        return [args.layer]
    return getattr(args, "layers", None) or None


def _operation(command, stopped: int | None = None):
    """Loads the site, sets umask 077, runs the operation; an OperationError prints its message and exits with its code
    (or with `stopped`, for every stop and a bad site, when the operation's exit codes say so).

    When the operation touches an L2 layer, each such layer's apply-time tokens come from the secrets file
    (--secrets or $TERRAVIXENS_SECRETS) and the specs' postures (terravixens.operations.standalone_env)."""
    def run(args: argparse.Namespace, site) -> int:
        from terravixens.operations import OperationError
        from terravixens.operations.files import private_process
        from terravixens.operations.standalone_env import standalone_layer_env
        from terravixens.operations.terraform import Terraform
        from terravixens.operations.workspace import Workspace

        private_process()
        try:
            # Only the commands that take --secrets plan or apply a layer with apply-time variables.
            selected = _selected_layers(args) if hasattr(args, "secrets") else []
            layer_env = standalone_layer_env(site, args.site, getattr(args, "secrets", None), selected)
            return command(args, Workspace(site), Terraform(layer_env=layer_env))
        except OperationError as error:
            print(f"terravixens {args.command}: {error}", file=sys.stderr)
            return error.code if stopped is None else stopped
    return _with_site(run, bad_site=2 if stopped is None else stopped)


@_operation
def _deploy(args: argparse.Namespace, ws, tf) -> int:
    from terravixens.operations.deploy import DeployOptions, deploy

    return deploy(ws, None if args.all else args.layers, tf, DeployOptions(
        yes=args.yes, allow_reboot=frozenset(args.allow_reboot), lock_timeout=args.lock_timeout,
        save_plan_json=Path(args.save_plan_json) if args.save_plan_json else None))


@_operation
def _destroy(args: argparse.Namespace, ws, tf) -> int:
    from terravixens.operations.destroy import DestroyOptions, destroy

    return destroy(ws, args.layer, tf, DestroyOptions(confirm=args.confirm))


@_operation
def _restore(args: argparse.Namespace, ws, tf) -> int:
    from terravixens.operations.restore import restore

    return restore(ws, args.layer, Path(args.backup), tf, confirm=args.confirm, any_lineage=args.any_lineage)


@_operation
def _decommission(args: argparse.Namespace, ws, tf) -> int:
    from terravixens.operations.decommission import DecommissionOptions, decommission

    return decommission(ws, args.cluster, tf, DecommissionOptions(
        confirm=args.confirm, delete_vms=args.delete_vms, destroy_secrets=args.destroy_secrets, yes=args.yes))


@_operation
def _remove_dead_member(args: argparse.Namespace, ws, tf) -> int:
    from terravixens.operations.dead_member import DeadMemberOptions, remove_dead_member
    from terravixens.talosctl import Talosctl

    talosctl = Talosctl(args.talosctl, args.talosconfig, args.timeout, probe_timeout=args.probe_timeout)
    return remove_dead_member(ws, args.cluster, args.node, tf, talosctl, options=DeadMemberOptions(
        confirm=args.confirm, force=args.force, probes=args.probes, probe_window=args.probe_window))


def _drift_layers(args: argparse.Namespace, ws, tf) -> int:
    from terravixens.operations.drift import drift

    return drift(ws, args.layers, tf)


# Exit 0 in sync, 2 drift, 1 anything else (terravixens.operations.drift.ERROR): a bad site or an unknown layer (2 for
# the other operations) or a Terraform failure (4) must not read as drift to a monitor that alerts on 2.
_drift = _operation(_drift_layers, stopped=1)


def _review(args: argparse.Namespace) -> int:
    from terravixens.operations import OperationError
    from terravixens.operations.review import review_dirs, review_ref

    try:
        if args.before or args.after:
            if not (args.before and args.after) or args.base:
                print("terravixens review: give BASE, or both --before and --after", file=sys.stderr)
                return 2
            result = review_dirs(Path(args.before), Path(args.after))
        else:
            if not args.base:
                print("terravixens review: give BASE (a git ref), or --before DIR --after DIR", file=sys.stderr)
                return 2
            result = review_ref(Path.cwd(), args.base, args.site or os.environ.get(SITE_ENV) or "sites/example.yaml")
    except OperationError as error:
        print(f"terravixens review: {error}", file=sys.stderr)
        return error.code
    if args.output:
        Path(args.output).write_text(result.text + "\n")
    print(result.text)
    return 1 if args.strict and result.flagged else 0


@_with_site
def _upgrade(args: argparse.Namespace, site) -> int:
    from terravixens.talosctl import Talosctl
    from terravixens.upgrade import EXIT_INPUT, command

    if args.cluster not in site.clusters:
        print(f"unknown cluster {args.cluster!r}: use one of {', '.join(sorted(site.clusters))}", file=sys.stderr)
        return EXIT_INPUT
    talosctl = Talosctl(args.talosctl, args.talosconfig, args.timeout)
    return command(site, args.cluster, talosctl, kubernetes=args.kubernetes, dry_run=args.dry_run,
                   worker_batch=args.worker_batch, force=args.force)


def _duration(text: str) -> int:
    from terravixens.talosctl import parse_duration

    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _batch(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a batch size: give a whole number of workers, 1 or more")
    return int(text)


def _probes(text: str) -> int:
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of probes: give a whole number, 2 or more (a "
                                         f"single probe cannot tell a dead node from a reboot)")
    return int(text)


def _schema_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from terravixens.standalone.schemas import export

    for path in export(Path(args.out)):
        print(path)
    return 0


def _spec_validate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from terravixens.standalone.validate import validate

    if (args.path is None) == (args.site is None):
        print("spec validate: give a spec file or folder, or --site SITE [--secrets FILE]", file=sys.stderr)
        return 2
    code, text = validate(args.path and Path(args.path), args.site and Path(args.site),
                          args.secrets and Path(args.secrets))
    print(text, file=sys.stderr if code else sys.stdout)
    return code


def _spec_serve(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from terravixens.config.loader import DEFAULT_SITE, SITE_ENV
    from terravixens.specserver.server import ServeOptions, serve
    from terravixens.standalone.secrets import SECRETS_ENV

    secrets = args.secrets or os.environ.get(SECRETS_ENV)
    if not secrets:
        print(f"spec serve: give the secrets file (--secrets FILE or ${SECRETS_ENV})", file=sys.stderr)
        return 2
    return serve(ServeOptions(
        site=Path(args.site or os.environ.get(SITE_ENV) or DEFAULT_SITE), secrets=Path(secrets), host=args.host,
        port=args.port, tls_cert=args.tls_cert and Path(args.tls_cert), tls_key=args.tls_key and Path(args.tls_key),
        watch_interval=args.watch_interval, header_timeout=args.header_timeout))


def _spec_get(args: argparse.Namespace) -> int:
    from pathlib import Path

    from terravixens.specclient.get import GetOptions, run

    return run(GetOptions(env_file=args.env_file and Path(args.env_file), out=Path(args.out),
                          budget=args.max_time, attempt_timeout=args.attempt_timeout))


def _secrets_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--secrets", help="the secrets file: L2 nodes' tokens, gitops layers' Flux git credentials "
                                           "(default: $TERRAVIXENS_SECRETS)")


def _add_spec_commands(commands) -> None:
    schema = commands.add_parser("schema", help="JSON Schemas of the files terravixens reads")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True)
    export = schema_commands.add_parser("export", help="write site, spec and posture JSON Schemas")
    export.add_argument("--out", default="json-schemas", help="folder to write into (default: json-schemas)")
    export.set_defaults(run=_schema_export)
    spec = commands.add_parser("spec", help="standalone nodes' specs: validate, serve, get")
    spec_commands = spec.add_subparsers(dest="spec_command", required=True)
    validate = spec_commands.add_parser("validate", help="check a spec file or folder, or a site's standalone setup")
    validate.add_argument("path", nargs="?", help="a spec file, a specs folder, or a site file (same as --site)")
    validate.add_argument("--site", help="check the site's standalone nodes against its specs folder instead")
    validate.add_argument("--secrets", help="with --site: also check ssh keys and tokens in this secrets file")
    validate.set_defaults(run=_spec_validate)
    serve = spec_commands.add_parser("serve", help="serve each standalone node its resolved spec")
    serve.add_argument("--site", help="site file (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    serve.add_argument("--secrets", help="secrets file, mode 0600 (default: $TERRAVIXENS_SECRETS)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8443, help="port (default 8443; 0 picks a free one)")
    serve.add_argument("--tls-cert", help="PEM certificate (chain): serve https")
    serve.add_argument("--tls-key", help="PEM private key of --tls-cert")
    serve.add_argument("--watch-interval", type=float, default=2.0,
                       help="seconds between checks for changed files (0: reload on SIGHUP only)")
    serve.add_argument("--header-timeout", type=float, default=10.0,
                       help="seconds a client has to send its request headers (default 10)")
    serve.set_defaults(run=_spec_serve)
    get = spec_commands.add_parser("get", help="on a node: fetch, verify and write its spec")
    get.add_argument("--env-file", help="default: $TERRAVIXENS_NODE_ENV or /etc/terravixens/node.env")
    get.add_argument("--out", default="/var/lib/terravixens/spec.json", help="where the spec is written (0600)")
    get.add_argument("--max-time", type=float, default=120.0, help="give up after this many seconds (default 120)")
    get.add_argument("--attempt-timeout", type=float, default=10.0, help="seconds per attempt (default 10)")
    get.set_defaults(run=_spec_get)


def main(argv: list[str] | None = None) -> int:
    # A terminal or CI log that cannot show a character gets an escape, never a UnicodeEncodeError traceback.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = argparse.ArgumentParser(prog="terravixens", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a site file and print every problem")
    validate.add_argument("site", nargs="?", help="site file (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    validate.set_defaults(run=_validate)
    stacks = commands.add_parser("stacks", help="list the stacks of a site, in apply order")
    stacks.add_argument("site", nargs="?")
    stacks.set_defaults(run=_stacks)
    guard = commands.add_parser("plan-guard", help="refuse a plan that replaces a node, loses quorum or secrets")
    guard.add_argument("plan", help="output of `terraform show -json PLANFILE` ('-' for standard input)")
    guard.add_argument("--site", help="site file: roles, and what its nodes want from L0 (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    guard.add_argument("--layer", help="the layer the plan is of (platform-<cluster>): roles of that cluster only")
    guard.add_argument("--allow-reboot", action="append", default=[], metavar="NODE",
                       help="let NODE's configuration change reboot it (repeatable)")
    guard.add_argument("--plan-log", help="`terraform plan -json` output of the same plan (tells the guard which "
                                          "reboot checks could not run)")
    guard.add_argument("--deployed-state", action="append", default=[], metavar="STATE",
                       help="a platform layer's `terraform state pull` (what its VMs use; repeatable)")
    guard.add_argument("--teardown", action="store_true",
                       help="the plan is a `plan -destroy`: its deletions are the request (nodes leave), and "
                            "what the site's nodes want from L0 does not count")
    guard.add_argument("--max-size-mib", type=int, default=512, help="refuse larger plan files (default 512)")
    guard.set_defaults(run=_plan_guard)
    upgrade = commands.add_parser(
        "upgrade", help="rolling Talos upgrade, one node at a time, gated on health",
        epilog="exit codes: 0 done and healthy; 1 stopped (a talosctl call failed, hung or is missing, a node is "
               "not on the target version and image after its upgrade (rolled back), a version talosctl printed "
               "cannot be understood, or the cluster is unhealthy: the last line says where, what is done and what "
               "is not touched; run it again once fixed); 2 bad input; 3 refused (a downgrade or a skipped Talos "
               "minor, without --force); 130 interrupted (Ctrl-C, SIGTERM, SIGHUP: talosctl stopped, one line says "
               "where)")
    upgrade.add_argument("cluster")
    upgrade.add_argument("--site", help="site file (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    upgrade.add_argument("--talosconfig", default="talosconfig", help="talosctl client configuration (platform output)")
    upgrade.add_argument("--talosctl", default="talosctl", help="the talosctl binary (matching the target version)")
    upgrade.add_argument("--dry-run", action="store_true", help="print the order and the images, touch nothing")
    upgrade.add_argument("--kubernetes", action="store_true",
                         help="upgrade Kubernetes to the site's kubernetes_version (talosctl upgrade-k8s), then health")
    upgrade.add_argument("--worker-batch", type=_batch, default=1, metavar="N",
                         help="upgrade workers N at a time, each batch gated on health (control planes: always one)")
    upgrade.add_argument("--timeout", type=_duration, default="15m",
                         help="deadline of each talosctl call, e.g. 90s, 15m, 1h (default 15m)")
    upgrade.add_argument("--force", action="store_true",
                         help="allow a downgrade (a node newer than talos_version) or skipping a Talos minor")
    upgrade.set_defaults(run=_upgrade)

    def with_site(command: argparse.ArgumentParser) -> argparse.ArgumentParser:
        command.add_argument("--site", help="site file (default: $TERRAVIXENS_SITE or sites/example.yaml)")
        return command

    deploy = with_site(commands.add_parser("deploy", help="synth, plan, guard, confirm, back up and apply, per layer"))
    deploy.add_argument("layers", nargs="*", metavar="LAYER", help="layers to deploy, in apply order (default: all)")
    deploy.add_argument("--all", action="store_true", help="every layer of the site (the default without LAYER)")
    deploy.add_argument("--yes", action="store_true", help="apply without asking (the guard still runs)")
    deploy.add_argument("--allow-reboot", action="append", default=[], metavar="NODE",
                        help="let NODE's configuration change reboot it (repeatable)")
    deploy.add_argument("--save-plan-json", metavar="PATH", help="also write the plan's JSON (0600; it holds secrets)")
    deploy.add_argument("--lock-timeout", default="0s", help="wait this long for a state lock (e.g. 60s)")
    _secrets_option(deploy)
    deploy.set_defaults(run=_deploy)
    destroy = with_site(commands.add_parser("destroy", help="destroy one layer, after a verified state backup"))
    destroy.add_argument("layer")
    destroy.add_argument("--confirm", metavar="SITE/LAYER", help="the typed confirmation, for unattended runs")
    _secrets_option(destroy)
    destroy.set_defaults(run=_destroy)
    restore = with_site(commands.add_parser("restore", help="put a state backup back (the current state is backed up)"))
    restore.add_argument("layer")
    restore.add_argument("backup", help="a file under state-backups/ (or any `terraform state pull` output)")
    restore.add_argument("--confirm", metavar="SITE/LAYER")
    restore.add_argument("--any-lineage", action="store_true", help="accept a backup of another state lineage")
    restore.set_defaults(run=_restore)
    decommission = with_site(commands.add_parser("decommission", help="reset a cluster's nodes in order; secrets last"))
    decommission.add_argument("cluster")
    decommission.add_argument("--confirm", metavar="SITE/CLUSTER", help="the typed confirmation, for unattended runs")
    decommission.add_argument("--yes", action="store_true", help="do not ask before each step")
    decommission.add_argument("--delete-vms", action="store_true", help="also delete the VMs (default: kept, in maintenance mode)")
    decommission.add_argument("--destroy-secrets", action="store_true",
                              help="last: destroy the machine secrets (the cluster's identity) for good")
    decommission.set_defaults(run=_decommission)
    dead = with_site(commands.add_parser(
        "remove-dead-member", help="remove an unreachable control plane from etcd",
        epilog="asks for SITE/CLUSTER/NODE (or --confirm), probes NODE over the window, checks Terraform's state "
               "step, then removes the etcd member. exit codes: 0 done; 1 refused (NODE answered a probe, a probe "
               "failed for another reason than silence, or no control plane lists the etcd members); 2 bad input; "
               "3 not confirmed; 4 a talosctl, kubectl or terraform call failed, hung or is missing (the message "
               "says what is done and what is not); 5 the state backup failed; 130 interrupted"))
    dead.add_argument("cluster")
    dead.add_argument("node")
    dead.add_argument("--talosconfig", default="talosconfig", help="talosctl client configuration (platform output)")
    dead.add_argument("--talosctl", default="talosctl")
    dead.add_argument("--confirm", metavar="SITE/CLUSTER/NODE", help="the typed confirmation, for unattended runs")
    dead.add_argument("--probes", type=_probes, default=4, metavar="N",
                      help="probe NODE (talosctl version) N times over the window; one answer refuses (default 4)")
    dead.add_argument("--probe-window", type=_duration, default="60s", metavar="DURATION",
                      help="the period NODE must stay silent, e.g. 60s, 5m (default 60s)")
    dead.add_argument("--probe-timeout", type=_duration, default="10s", metavar="DURATION",
                      help="deadline of each probe (default 10s)")
    dead.add_argument("--timeout", type=_duration, default="60s", metavar="DURATION",
                      help="deadline of each other talosctl call (default 60s)")
    dead.add_argument("--force", action="store_true", help="proceed even though the node answers `talosctl version` "
                                                           "(a live node whose etcd is broken); still confirmed")
    dead.set_defaults(run=_remove_dead_member)
    drift = with_site(commands.add_parser("drift", help="plan each layer; exit 2 when something drifted"))
    drift.add_argument("layers", nargs="*", metavar="LAYER")
    _secrets_option(drift)
    drift.set_defaults(run=_drift)
    review = commands.add_parser("review", help="per stack and node, what a change does (Markdown for a PR)")
    review.add_argument("base", nargs="?", help="git ref to compare the working tree with (e.g. origin/main)")
    review.add_argument("--site", help="site file, relative to the repository (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    review.add_argument("--before", help="compare two cdktf.out directories instead: the old one")
    review.add_argument("--after", help="the new cdktf.out directory")
    review.add_argument("--output", help="also write the Markdown to this file")
    review.add_argument("--strict", action="store_true", help="exit 1 when an address of an unnamed node changes")
    review.set_defaults(run=_review)
    _add_spec_commands(commands)
    args = parser.parse_args(argv)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """The one place signals are handled: SIGTERM and SIGHUP behave like Ctrl-C (terravixens.runner): the external
    commands running are ended with their process groups, then one line says where it stopped; exit 130."""
    from terravixens.runner import handle_signals, interrupted_line

    with handle_signals():
        try:
            return args.run(args)
        except KeyboardInterrupt as error:
            with contextlib.suppress(OSError):  # a SIGHUP may have taken the terminal with it
                print(f"terravixens {args.command}: {interrupted_line(error)}", file=sys.stderr, flush=True)
            return 130  # ExitCode.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
