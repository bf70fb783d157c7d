"""`terravixens decommission CLUSTER`: tear a running cluster down in the order that keeps etcd sane.

0. etcd snapshot: before anything changes (so before the first reset), a fresh, verified etcd snapshot through a
   control plane still to be reset (terravixens.operations.etcd.fresh_snapshot; those already reset are tried last),
   or the operator's --no-snapshot reason said in its place; none is a BACKUP_FAILED stop with nothing changed. One
   for the whole teardown: it is the cluster as it ran, the one state worth restoring (docs/adr/0036). A re-run takes
   a new one before it goes on; none when no control plane is left to reset.
1. prepare: re-synth the platform layer with decommission settings and apply the in-place change of every node's
   `on_destroy` (reboot into maintenance mode after the reset; the last control plane non-graceful). The talos
   provider reads `on_destroy` from the state at destroy time, so this apply must come first. Nothing resets here.
2. workers: `plan -destroy -target=<each worker's apply>` — gracefully reset (cordon, drain), then their Kubernetes
   Node objects are deleted (they outlive a Talos reset).
3. control planes but the last, one per apply (each leaves etcd gracefully), Node objects deleted after each.
4. the last control plane (the bootstrap node): non-graceful (there is no member left to hand over to); its
   bootstrap and kubeconfig records go with it. The nodes are now in maintenance mode.
5. with --delete-vms: the VMs and what is left but the secrets.
6. with --destroy-secrets, last and only when no node apply is left in the state: a synth with prevent_destroy
   lifted on the machine secrets (nowhere else is it ever lifted), and their destroy.

Every step is planned, guarded, backed up and applied like a deploy; the guard waives PG003 only for step 4 and
PG004 only for step 6. The gitops layer must be destroyed first (`terravixens destroy gitops-CLUSTER`).

talosctl (the snapshot) gets the operator's talosconfig, or the platform layer's output written privately for the
snapshot and removed afterwards.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace

from terravixens.arguments import Definition, no_snapshot_option, site_option, talosctl_options
from terravixens.catalogue import MACHINE_SECRETS, NODE_APPLY, VMS
from terravixens.decommission_settings import Decommission
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.guard.plan import Plan
from terravixens.logical_ids import cluster_id
from terravixens.operations import summary
from terravixens.operations.backup import pull_state
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy, fresh_snapshot, talosconfig_file
from terravixens.operations.files import remove_quietly
from terravixens.operations.kube import Kubectl, delete_nodes, kubeconfig_of
from terravixens.operations.outcome import OperationError
from terravixens.operations.steps import (
    apply_address,
    apply_saved,
    confirm,
    guard_context,
    judge,
    make_plan,
    state_addresses,
    typed_confirmation,
)
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl

RESETS = "the resets"  # in the journal until the state says which nodes are left to reset


SNAPSHOT = "etcd snapshot"


@dataclass(frozen=True)
class DecommissionOptions:
    """`snapshot`: the policy of the snapshot before the first reset (--no-snapshot REASON skips it); `talosctl`: the
    binary and deadline of its calls; `talosconfig`: the operator's file (None: the platform layer's output)."""

    confirm: str | None = None
    delete_vms: bool = False
    destroy_secrets: bool = False
    yes: bool = False
    snapshot: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    talosctl: Talosctl = field(default_factory=lambda: Talosctl(timeout=5 * 60))
    talosconfig: str | None = None


def not_only_on_destroy(plan: Plan) -> list[str]:
    """Addresses the prepare step would change beyond the node applies' `on_destroy`: a cluster that is not
    converged is deployed first, so that decommission never applies anything else."""
    verb = summary.verb
    return sorted(
        change.address
        for change in plan.changes
        if verb(change) not in ("no-op", "read")
        and not (
            change.type == NODE_APPLY
            and verb(change) == "update"
            and set(summary.changed_attributes(change)) <= {"on_destroy"}
        )
    )


def run_step(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    layer: str,
    title: str,
    args: list[str],
    waived: frozenset[str],
    options: DecommissionOptions,
    prepare: bool = False,
) -> bool:
    console.step(layer, "step", title)
    planned = make_plan(ws, tf, console, layer, *args)
    planned.extra_waived = waived
    try:
        if not planned.changed:
            console.step(layer, "plan", "nothing to do")
            return False
        unexpected = not_only_on_destroy(planned.plan) if prepare else []
        if unexpected:
            raise OperationError(
                f"{layer} is not converged: the plan would also change {', '.join(unexpected[:5])}; "
                f"deploy it first (terravixens deploy {layer}), then decommission",
                ExitCode.REFUSED,
            )
        judge(
            console, planned, guard_context(ws, tf, console, ws.layer(layer), planned, frozenset(), "-destroy" in args)
        )
        console.step(layer, "summary", summary.counts(planned.plan))
        for line in summary.lines(planned.plan):
            console.say(line)
        confirm(console, layer, f"{title}: apply to", options.yes)
        apply_saved(ws, tf, console, planned, "decommission")
    finally:
        remove_quietly(planned.path)
    return True


def decommission(
    ws: Workspace,
    cluster_name: str,
    tf: Terraform,
    options: DecommissionOptions,
    kubectl: Kubectl | None = None,
    console: Console | None = None,
) -> int:
    console = console or Console()
    kubectl = kubectl or Kubectl()
    if cluster_name not in ws.site.clusters:
        raise OperationError(
            f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}", ExitCode.BAD_INPUT
        )
    cluster = ws.site.clusters[cluster_name]
    layer, gitops = ws.platform_layer(cluster_name).name, ws.gitops_layer(cluster_name).name
    typed_confirmation(
        console,
        f"{ws.site.site}/{cluster_name}",
        options.confirm,
        f"This resets every node of cluster {cluster_name} of site {ws.site.site}",
    )
    last = cluster.bootstrap

    journal = console.journal
    journal.expect(
        "synth",
        "checks",
        SNAPSHOT,
        "prepare",
        RESETS,
        *(["delete the VMs"] if options.delete_vms else []),
        *(["destroy the machine secrets"] if options.destroy_secrets else []),
    )
    ws.decommission = {cluster_name: Decommission(non_graceful=frozenset({last}))}
    with journal.unit("synth"):
        console.step("site", "synth", f"{ws.site.site} with decommission settings for {cluster_name}")
        ws.synth()
    with journal.unit("checks"):  # the gitops layer is gone; what the state still holds
        for name in (gitops, layer):
            tf.init(ws.stack_dir(name), name)
        if state_addresses(tf, ws, gitops):
            raise OperationError(
                f"{gitops} still has resources: destroy it first (terravixens destroy {gitops}); nothing was changed",
                ExitCode.REFUSED,
            )
        in_state = set(state_addresses(tf, ws, layer))
        kubeconfig = kubeconfig_of(tf, ws.stack_dir(layer))

    try:
        _teardown(ws, tf, console, cluster_name, options, kubectl, kubeconfig, in_state)
    finally:
        ws.decommission = {}
        ws.synth()  # cdktf.out never keeps a decommission synth (above all one with prevent_destroy lifted)
    _, state = pull_state(tf, ws.stack_dir(layer), layer)
    console.say(f"decommissioned {cluster_name}: {len((state or {}).get('resources') or [])} resources left in {layer}")
    return ExitCode.OK


def _snapshot(
    ws: Workspace, tf: Terraform, console: Console, cluster_name: str, options: DecommissionOptions, in_state: set[str]
) -> str:
    """The snapshot before the first reset (step 0), through a control plane still to be reset; what to note."""
    cluster = ws.site.clusters[cluster_name]
    reset = [name for name in sorted(cluster.control_planes) if apply_address(name) not in in_state]
    if len(reset) == len(cluster.control_planes):
        console.step(ws.platform_layer(cluster_name).name, "snapshot", "none: every control plane is already reset")
        return "none: no control plane left"
    if options.snapshot.skip_reason is not None:  # the reason is said; no talosconfig is needed
        fresh_snapshot(ws, cluster_name, options.talosctl, console, "decommission", options.snapshot)
        return "skipped (--no-snapshot)"
    with talosconfig_file(ws, tf, cluster_name, options.talosconfig) as talosconfig:
        taken = fresh_snapshot(
            ws,
            cluster_name,
            replace(options.talosctl, talosconfig=talosconfig),
            console,
            "decommission",
            options.snapshot,
            avoid=reset,
        )
    return str(taken.snapshot.path.relative_to(ws.root)) if taken else "skipped (--no-snapshot)"


def _teardown(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    cluster_name: str,
    options: DecommissionOptions,
    kubectl: Kubectl,
    kubeconfig: str | None,
    in_state: set[str],
) -> None:
    cluster = ws.site.clusters[cluster_name]
    layer = ws.platform_layer(cluster_name).name
    last = cluster.bootstrap
    others = [name for name in sorted(cluster.control_planes) if name != last and apply_address(name) in in_state]
    hostnames = {name: node.hostname or name for name, (_, node) in cluster.nodes().items()}
    workers = [name for name in sorted(cluster.workers) if apply_address(name) in in_state]
    journal = console.journal
    journal.replace(
        RESETS,
        *([f"reset workers {', '.join(workers)}"] if workers else []),
        *(f"reset control plane {name}" for name in others),
        *([f"reset the last control plane {last}"] if apply_address(last) in in_state else []),
    )
    with journal.unit(SNAPSHOT) as snapshot:
        snapshot.note = _snapshot(ws, tf, console, cluster_name, options, in_state)

    def step(
        unit: str, title: str, args: list[str], waived: frozenset[str] = frozenset(), prepare: bool = False
    ) -> None:
        with journal.unit(unit) as done:
            if not run_step(ws, tf, console, layer, title, args, waived, options, prepare=prepare):
                done.note = "nothing to do"

    # A first run plans the whole layer: anything but on_destroy changing means a cluster that is not converged. A
    # re-run (some applies already reset and gone from the state, the site still naming their nodes) targets the applies
    # left: an untargeted plan would create the reset ones again, which is not convergence missing but progress.
    remaining = [apply_address(name) for name in sorted(cluster.nodes()) if apply_address(name) in in_state]
    rerun = len(remaining) < len(cluster.nodes())
    if rerun and not remaining:
        with journal.unit("prepare") as done:
            done.note = "nothing to do: every node is already reset"
    else:
        step(
            "prepare",
            "prepare the resets (on_destroy: reboot into maintenance mode, last control plane non-graceful)"
            + (f"; a re-run: only the {len(remaining)} node applies left" if rerun else ""),
            [f"-target={address}" for address in remaining] if rerun else [],
            prepare=True,
        )
    if workers:
        step(
            f"reset workers {', '.join(workers)}",
            f"reset workers {', '.join(workers)}",
            ["-destroy", *(f"-target={apply_address(n)}" for n in workers)],
        )
        delete_nodes(kubectl, kubeconfig, [hostnames[n] for n in workers], console, layer)
    for name in others:
        step(
            f"reset control plane {name}",
            f"reset control plane {name} (leaves etcd)",
            ["-destroy", f"-target={apply_address(name)}"],
        )
        delete_nodes(kubectl, kubeconfig, [hostnames[name]], console, layer)
    if apply_address(last) in in_state:
        step(
            f"reset the last control plane {last}",
            f"reset the last control plane {last} (non-graceful)",
            ["-destroy", f"-target={apply_address(last)}"],
            frozenset({"PG003"}),
        )

    remaining = state_addresses(tf, ws, layer)
    secrets = f"{MACHINE_SECRETS}.{cluster_id('secrets')}"
    if options.delete_vms:
        targets = [a for a in remaining if a != secrets and not a.startswith("data.")]
        with journal.unit("delete the VMs") as done:
            if targets:
                if not run_step(
                    ws,
                    tf,
                    console,
                    layer,
                    "delete the VMs and the cluster records",
                    ["-destroy", *(f"-target={a}" for a in targets)],
                    frozenset(),
                    options,
                ):
                    done.note = "nothing to do"
            else:
                done.note = "none left"
    else:
        vms = [a for a in remaining if a.split(".", 1)[0] in VMS]
        console.step(layer, "vms", f"kept in maintenance mode: {', '.join(vms) or 'none'} (--delete-vms deletes them)")
    if options.destroy_secrets:
        with journal.unit("destroy the machine secrets") as done:
            left = [a for a in state_addresses(tf, ws, layer) if a.startswith(NODE_APPLY + ".")]
            if left:
                raise OperationError(
                    f"machine secrets kept: node applies are still in the state ({', '.join(left)})", ExitCode.REFUSED
                )
            if secrets in state_addresses(tf, ws, layer):
                ws.decommission = {cluster_name: Decommission(non_graceful=frozenset({last}), release_secrets=True)}
                ws.synth()
                if not run_step(
                    ws,
                    tf,
                    console,
                    layer,
                    "destroy the machine secrets (the cluster's identity, for good)",
                    ["-destroy", f"-target={secrets}"],
                    frozenset({"PG004"}),
                    options,
                ):
                    done.note = "nothing to do"
            else:
                done.note = "already gone"
    else:
        console.step(layer, "secrets", "kept (prevent_destroy); --destroy-secrets removes them, last")


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
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
    no_snapshot_option(parser, "before the first reset")
    talosctl_options(parser, "5m", " (the etcd snapshot)")


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    options = DecommissionOptions(
        confirm=args.confirm,
        delete_vms=args.delete_vms,
        destroy_secrets=args.destroy_secrets,
        yes=args.yes,
        snapshot=SnapshotPolicy(skip_reason=args.no_snapshot),
        talosctl=Talosctl(args.talosctl, timeout=args.timeout),
        talosconfig=args.talosconfig,
    )
    return decommission(ws, args.cluster, tf, options, console=console)


DECOMMISSION = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "every node reset (VMs and secrets as asked)"),
        (
            ExitCode.REFUSED,
            (
                f"the gitops layer still has resources, the cluster is not converged, the guard "
                f"refused a step, or {SYNTH_RULE}"
            ),
        ),
        (ExitCode.BAD_INPUT, "site file, unknown cluster"),
        (ExitCode.DECLINED, "the typed SITE/CLUSTER or a step's yes"),
        ExitCode.FAILED,
        (
            ExitCode.BACKUP_FAILED,
            (
                "no verified etcd snapshot before the first reset (nothing was changed; --no-snapshot REASON goes "
                "on without), or a state backup failed"
            ),
        ),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens decommission prod",
        "terravixens decommission prod --delete-vms --confirm homelab/prod --yes",
    ),
)


__all__ = [
    "DECOMMISSION",
    "DecommissionOptions",
    "apply_address",
    "arguments",
    "command",
    "decommission",
    "state_addresses",
]
