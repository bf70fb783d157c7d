"""The `terravixens` command: what cdktf lacks around synth (site validation first).

    terravixens validate [SITE]     check a site file; print every problem with file, field, value and fix
    terravixens stacks [SITE]       list the stacks (layers) the site synthesizes to, in apply order
    terravixens plan-guard PLAN     refuse a plan (`terraform show -json` output) that breaks the node promise
    terravixens upgrade CLUSTER     rolling Talos upgrade to the site's talos_version, one node at a time, gated on health
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
    print(f"{args.site or 'site'}: ok — site {site.site!r}, {len(site.hypervisors)} hypervisors, "
          f"{len(site.clusters)} clusters, {nodes} nodes")
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
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
