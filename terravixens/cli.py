"""The `terravixens` command: what cdktf lacks around synth (site validation first).

    terravixens validate [SITE]     check a site file; print every problem with file, field, value and fix
    terravixens stacks [SITE]       list the stacks (layers) the site synthesizes to, in apply order
    terravixens plan-guard PLAN     refuse a plan (`terraform show -json` output) that breaks the node promise
    terravixens upgrade CLUSTER     rolling Talos upgrade to the site's talos_version, one node at a time, gated on health
    terravixens schema export       JSON Schemas of the site, spec and posture files
    terravixens spec validate PATH  check a spec file or folder (or --site: a site's standalone nodes and their specs)
    terravixens spec serve          serve each standalone node its resolved spec (auth by posture)
    terravixens spec get            on a node: fetch its spec from the server, verify it, write it (0600)
"""
from __future__ import annotations

import argparse
import sys

from terravixens.config.loader import SiteError, load_site

RULE_FAILURE_MARK = "Encountered Annotations with level \"ERROR\""


def synth_main(outdir: str | None = None) -> int:
    """Used by main.py (cdktf synth). Returns a process exit code; prints problems without a traceback."""
    try:
        site = load_site()
    except SiteError as error:
        print(error, file=sys.stderr)
        return 2
    from terravixens.stacks import build_app

    try:
        build_app(site, outdir).synth()
    except RuntimeError as error:
        text = str(error)
        if RULE_FAILURE_MARK not in text:
            raise
        print("terravixens: synth stopped by safety rules:\n" + text.split(RULE_FAILURE_MARK, 1)[1].strip(": \n"),
              file=sys.stderr)
        return 1
    return 0


def _with_site(command):
    """Loads the site named on the command line; a bad site prints its problems and exits 2."""
    def run(args: argparse.Namespace) -> int:
        try:
            site = load_site(args.site)
        except SiteError as error:
            print(error, file=sys.stderr)
            return 2
        return command(args, site)
    return run


@_with_site
def _validate(args: argparse.Namespace, site) -> int:
    nodes = sum(len(cluster.nodes()) for cluster in site.clusters.values())
    standalone = ""
    if site.standalone.nodes:
        from terravixens.standalone.validate import validate_site_specs

        problems = validate_site_specs(args.site)
        if problems:
            print(problems, file=sys.stderr)
            return 2
        standalone = f", {len(site.standalone.nodes)} standalone nodes"
    print(f"{args.site or 'site'}: ok — site {site.site!r}, {len(site.hypervisors)} hypervisors, "
          f"{len(site.clusters)} clusters, {nodes} nodes{standalone}")
    return 0


@_with_site
def _stacks(args: argparse.Namespace, site) -> int:
    from terravixens.layers import stack_names

    print("\n".join(stack_names(site)))
    return 0


def _plan_guard(args: argparse.Namespace) -> int:
    from terravixens.guard import check_plan_file
    from terravixens.inputs import InputError

    try:
        violations = check_plan_file(args.plan, limit=args.max_size_mib * 1024 * 1024)
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    for violation in violations:
        print(violation, file=sys.stderr)
    if violations:
        print(f"{args.plan}: refused, {len(violations)} problem{'s' if len(violations) != 1 else ''}", file=sys.stderr)
        return 1
    print(f"{args.plan}: ok — no node replaced, at most one control plane leaves, secrets and bootstrap kept")
    return 0


@_with_site
def _upgrade(args: argparse.Namespace, site) -> int:
    from terravixens.upgrade import kubernetes_upgrade, rolling_upgrade, upgrade_plan

    if args.cluster not in site.clusters:
        print(f"unknown cluster {args.cluster!r}: use one of {', '.join(sorted(site.clusters))}", file=sys.stderr)
        return 2
    if args.dry_run:
        for number, step in enumerate(upgrade_plan(site, args.cluster), 1):
            print(f"{number}. {step.node} ({step.role}, {step.address}) -> {step.image}, then talosctl health")
        return 0
    if args.kubernetes:
        outcome = kubernetes_upgrade(site, args.cluster, args.talosconfig, talosctl=args.talosctl)
        print(f"kubernetes {'upgraded' if outcome.ok else 'upgrade stopped'}")
        return 0 if outcome.ok else 1
    outcome = rolling_upgrade(site, args.cluster, args.talosconfig, talosctl=args.talosctl)
    print(f"upgraded: {', '.join(outcome.upgraded) or 'none'}; already current: {', '.join(outcome.skipped) or 'none'}")
    return 0 if outcome.ok else 1


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
    guard.add_argument("--max-size-mib", type=int, default=512, help="refuse larger plan files (default 512)")
    guard.set_defaults(run=_plan_guard)
    upgrade = commands.add_parser("upgrade", help="rolling Talos upgrade, one node at a time, gated on health")
    upgrade.add_argument("cluster")
    upgrade.add_argument("--site", help="site file (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    upgrade.add_argument("--talosconfig", default="talosconfig", help="talosctl client configuration (platform output)")
    upgrade.add_argument("--talosctl", default="talosctl", help="the talosctl binary (matching the target version)")
    upgrade.add_argument("--dry-run", action="store_true", help="print the order and the images, touch nothing")
    upgrade.add_argument("--kubernetes", action="store_true",
                         help="upgrade Kubernetes to the site's kubernetes_version (talosctl upgrade-k8s), then health")
    upgrade.set_defaults(run=_upgrade)
    _add_spec_commands(commands)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
