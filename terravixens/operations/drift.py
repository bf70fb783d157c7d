"""`terravixens drift [LAYER…]`: does what runs still match the site? Per layer, `terraform plan
-detailed-exitcode` (read-only: `-lock=false`, the saved plan deleted at once), then a summary per layer and per
node of what the plan would change, the addresses that were changed outside Terraform (refresh saw it) listed
first. Exit codes are a monitor's (MonitorExit): 0 in sync, 2 drift, 1 error.

The Talos side (after each platform layer's plan; `--terraform-only` skips it): what providers never read back —
per node the running Talos version and the schematic of the image it booted, against the site's; etcd's members
against the site's control planes; the Kubernetes Nodes against the site's nodes (terravixens.operations.observe).
A platform layer without a talosconfig output has no cluster yet: "not deployed", nothing to compare, not an error.
A reading that cannot be made is said and makes the run "could not tell" (1) — unless drift was found elsewhere:
found wins (2), the lines say both. See docs/adr/0039-acceptance-check-and-talos-drift.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from terravixens.arguments import Definition, json_option, secrets_option, site_option
from terravixens.exitcodes import ExitCode, MonitorExit, codes
from terravixens.layers import PLATFORM
from terravixens.operations import summary
from terravixens.operations.acceptance import parse_wait
from terravixens.operations.console import Console
from terravixens.operations.files import remove_quietly
from terravixens.operations.kube import Kubectl
from terravixens.operations.observe import (
    KubeNode,
    KubeReader,
    Members,
    RunningImage,
    SiteNode,
    Unread,
    cluster_access,
    read_images,
    read_members,
    site_nodes,
)
from terravixens.operations.steps import make_plan
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.output import render
from terravixens.roles import Role
from terravixens.talos_versions import parse_version
from terravixens.talosctl import Talosctl

TALOS_TIMEOUT = 60


@dataclass(frozen=True)
class TalosSide:
    """The Talos side of drift: `enabled` (False: `--terraform-only`), the talosctl binary and the deadline of each
    of its calls, and kubectl (default: $KUBECTL or kubectl, $TERRAVIXENS_KUBECTL_TIMEOUT)."""

    enabled: bool = True
    talosctl: Talosctl = field(default_factory=lambda: Talosctl(timeout=TALOS_TIMEOUT))
    kubectl: Kubectl | None = None


@dataclass
class TalosDrift:
    """What the Talos side of one cluster found: each difference (a line for the operator), each reading that could
    not be made."""

    differences: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    deployed: bool = True


def outside_changes(messages: list[dict[str, Any]]) -> list[str]:
    """'address (what)' for each `resource_drift` message of the plan log: changed outside Terraform."""
    found = []
    for message in messages:
        if message.get("type") == "resource_drift":
            change = message.get("change") or {}
            resource = change.get("resource") or {}
            found.append(f"{resource.get('addr', '?')} ({change.get('action', 'changed')})")
    return sorted(set(found))


@dataclass
class LayerDrift:
    """What drift found in one layer: whether its plan would change anything (`planned`: resources or outputs), the
    resources it would change (address, what it would do), those changed outside Terraform, and the Talos side of
    a platform layer (None: not read)."""

    layer: str
    planned: bool = False
    changes: list[tuple[str, str]] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    talos: TalosDrift | None = None

    @property
    def status(self) -> str:
        if self.planned or (self.talos and self.talos.differences):
            return "drift"
        return "could not tell" if self.talos and self.talos.unread else "in sync"


@dataclass
class DriftReport:
    """A drift run's verdict per layer (terravixens.output renders it: the summary line, or the
    `terravixens/drift/v1` document). Found wins over a reading that could not be made."""

    site: str
    layers: list[LayerDrift] = field(default_factory=list)
    command: str = "drift"

    @property
    def drifted(self) -> list[str]:
        return [found.layer for found in self.layers if found.status == "drift"]

    @property
    def unknown(self) -> list[str]:
        return [f"{found.layer} (talos)" for found in self.layers if found.talos and found.talos.unread]

    @property
    def exit_code(self) -> int:
        if self.drifted:
            return MonitorExit.FOUND
        return MonitorExit.ERROR if self.unknown else MonitorExit.IN_SYNC

    def lines(self) -> list[str]:
        could_not = f"could not tell: {', '.join(self.unknown)}" if self.unknown else ""
        if self.drifted:
            return [f"drift in: {', '.join(self.drifted)}" + (f"; {could_not}" if could_not else "")]
        return [could_not or "no drift"]

    def notes(self) -> list[str]:
        return []

    def body(self) -> dict[str, Any]:
        result = {MonitorExit.FOUND: "drift", MonitorExit.ERROR: "could not tell", MonitorExit.IN_SYNC: "in sync"}
        return {
            "site": self.site,
            "result": result[MonitorExit(self.exit_code)],
            "exit_code": int(self.exit_code),
            "layers": [
                {
                    "layer": found.layer,
                    "status": found.status,
                    "plan_changes": found.planned,
                    "changes": [{"address": address, "action": action} for address, action in found.changes],
                    "changed_outside_terraform": found.outside,
                    "talos": None
                    if found.talos is None
                    else {
                        "deployed": found.talos.deployed,
                        "differences": found.talos.differences,
                        "could_not_read": found.talos.unread,
                    },
                }
                for found in self.layers
            ],
        }


def drift(
    ws: Workspace,
    layers: Sequence[str] | None,
    tf: Terraform,
    console: Console | None = None,
    synth: bool = True,
    talos: TalosSide | None = None,
) -> int:
    """drift_report, then its summary line on the console; returns the monitor's exit code."""
    console = console or Console()
    report = drift_report(ws, layers, tf, console, synth, talos)
    for line in report.lines():
        console.say(line)
    return report.exit_code


def drift_report(
    ws: Workspace,
    layers: Sequence[str] | None,
    tf: Terraform,
    console: Console | None = None,
    synth: bool = True,
    talos: TalosSide | None = None,
) -> DriftReport:
    """Plans each layer read-only (then the Talos side of platform layers), printing progress and what would change
    on the console; the verdict is the returned value."""
    console = console or Console()
    talos = talos or TalosSide()
    selected = ws.layers(layers)
    journal = console.journal
    journal.expect(*(["synth"] if synth else []), *(layer.name for layer in selected))
    if synth:
        with journal.unit("synth"):
            console.step("site", "synth", ws.site.site)
            ws.synth()
    report = DriftReport(ws.site.site)
    for layer in selected:
        with journal.unit(layer.name) as unit:
            found = _drift_layer(ws, tf, console, layer.name)
            if talos.enabled and layer.kind.name == PLATFORM and layer.cluster is not None:  # its Talos machines
                found.talos = talos_drift(ws, tf, console, layer.cluster, talos)
            report.layers.append(found)
            unit.note = found.status
    return report


def _drift_layer(ws: Workspace, tf: Terraform, console: Console, layer: str) -> LayerDrift:
    """Plans `layer` read-only and prints what would change."""
    workdir = ws.stack_dir(layer)
    tf.init(workdir, layer)
    planned = make_plan(ws, tf, console, layer, "-lock=false")
    remove_quietly(planned.path)
    # Refresh reports every attribute the provider reads back differently (computed ones too); what matters is
    # what the plan would change, so only those addresses are listed as changed outside Terraform.
    changing = {c.address: summary.verb(c) for c in planned.plan.changes if summary.verb(c) not in ("no-op", "read")}
    outside = [
        line
        for line in outside_changes(planned.log.messages if planned.log else [])
        if line.split(" ", 1)[0] in changing
    ]
    if not planned.changed:
        console.step(layer, "drift", "in sync")
        return LayerDrift(layer)
    console.step(
        layer,
        "drift",
        summary.counts(planned.plan) + (f"; changed outside Terraform: {len(outside)}" if outside else ""),
    )
    for line in outside:
        console.say(f"  outside Terraform: {line}")
    for line in summary.lines(planned.plan):
        console.say(line)
    return LayerDrift(layer, True, sorted(changing.items()), outside)


# ------------------------------------------------------------------------------------------------- Talos side
def talos_drift(ws: Workspace, tf: Terraform, console: Console, cluster_name: str, talos: TalosSide) -> TalosDrift:
    """Reads the running cluster (talosctl, kubectl: read-only) and prints how it differs from the site."""
    layer = ws.platform_layer(cluster_name).name
    console.journal.saw(layer, "talos")
    nodes = site_nodes(ws.site, cluster_name)
    with cluster_access(ws, tf, cluster_name) as access:
        if not access.deployed:
            console.step(layer, "talos", f"not deployed: {access.talos_missing}; nothing to compare")
            return TalosDrift(deployed=False)
        found = TalosDrift()
        if access.talosconfig is None:
            found.unread.append(access.talos_missing)
            images: dict[str, RunningImage | Unread] = {}
            listed: Members | Unread = Unread("talosctl", access.talos_missing)
        else:
            talosctl = replace(talos.talosctl, talosconfig=access.talosconfig)
            images = read_images(talosctl, nodes)
            listed = read_members(talosctl, [n for n in nodes if n.role is Role.CONTROLPLANE])
        kube_nodes = KubeReader(talos.kubectl or Kubectl(), access.kubeconfig, access.kube_missing).nodes()
    target = ws.site.clusters[cluster_name].talos_version
    for node in nodes:
        found.differences += _image_differences(node, images.get(node.name), target, cluster_name, found.unread)
    if isinstance(listed, Unread):
        found.unread.append(str(listed))
    else:
        found.differences += _member_differences(nodes, listed, cluster_name)
    if isinstance(kube_nodes, Unread):
        found.unread.append(str(kube_nodes))
    else:
        found.differences += _kube_differences(nodes, kube_nodes)
    found.unread = list(dict.fromkeys(found.unread))
    read = f"{len(nodes)} nodes, etcd members, Kubernetes Nodes"
    if found.differences:
        count = len(found.differences)
        console.step(layer, "talos", f"{count} difference{'s' if count != 1 else ''} ({read})")
    elif found.unread:
        console.step(layer, "talos", f"could not tell ({read})")
    else:
        console.step(layer, "talos", f"in sync ({read})")
    for line in found.differences:
        console.say(f"  {line}")
    for line in found.unread:
        console.say(f"  could not read: {line}")
    return found


def _image_differences(
    node: SiteNode, running: RunningImage | Unread | None, target: str, cluster_name: str, unread: list[str]
) -> list[str]:
    if running is None:
        return []
    if isinstance(running, Unread):
        unread.append(f"{node.name} ({node.address}): {running}")
        return []
    found = []
    wanted, seen = parse_version(target), parse_version(running.version)
    if isinstance(seen, str) or isinstance(wanted, str) or not seen.same(wanted):
        found.append(
            f"node {node.name}: runs Talos {running.version}, the site says {target} "
            f"(terravixens upgrade {cluster_name})"
        )
    if running.schematic != node.schematic:
        booted = f"schematic {running.schematic[:12]}…" if running.schematic else "no Image Factory schematic"
        found.append(
            f"node {node.name}: booted {booted}, the site's image is schematic {node.schematic[:12]}… "
            f"(terravixens upgrade {cluster_name} re-images it)"
        )
    return found


def _member_differences(nodes: Sequence[SiteNode], listed: Members, cluster_name: str) -> list[str]:
    control_planes = {n.hostname: n for n in nodes if n.role is Role.CONTROLPLANE}
    found = []
    by_name = {member.hostname: member for member in listed.members}
    through = listed.through.address
    for member in sorted(listed.members, key=lambda m: m.hostname):
        node = control_planes.get(member.hostname)
        if node is None:
            found.append(
                f"etcd: member {member.hostname} ({member.id}, {member.peer_urls}) is not a control plane of the "
                f"site: if its machine is gone, take a snapshot first (terravixens snapshot {cluster_name}), then "
                f"`talosctl -n {through} etcd remove-member {member.id}`"
            )
        elif f"//{node.address}:" not in member.peer_urls:
            found.append(
                f"etcd: member {member.hostname} advertises {member.peer_urls}, the site's address of "
                f"{node.name} is {node.address}"
            )
        elif member.learner:
            found.append(
                f"etcd: member {member.hostname} is still a learner (not yet voting): "
                f"`talosctl -n {node.address} service etcd`"
            )
    for hostname, node in sorted(control_planes.items()):
        if hostname not in by_name:
            found.append(
                f"etcd: control plane {node.name} ({node.address}) is not a member (as seen through "
                f"{listed.through.name}): `talosctl -n {node.address} service etcd`; if it was removed "
                f"(remove-dead-member), its replacement joins on its next deploy"
            )
    return found


def _kube_differences(nodes: Sequence[SiteNode], kube_nodes: list[KubeNode]) -> list[str]:
    site = {n.hostname: n for n in nodes}
    running = {n.name for n in kube_nodes}
    found = [
        f"kubernetes: no Node {hostname} (site node {node.name}): `talosctl -n {node.address} logs kubelet`"
        for hostname, node in sorted(site.items())
        if hostname not in running
    ]
    found += [
        f"kubernetes: Node {name} is not a node of the site: once its machine is gone, `kubectl delete node {name}`"
        for name in sorted(running - set(site))
    ]
    return found


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("layers", nargs="*", metavar="LAYER")
    secrets_option(parser)
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
    json_option(parser, " (terravixens/drift/v1: each layer's changes and Talos side; progress on stderr)")


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    # --timeout is parsed here, not by argparse: a bad one is ERROR (1), never 2, which means drift (MonitorExit).
    timeout = parse_wait(args.timeout, "--timeout") or 1
    talos = TalosSide(not args.terraform_only, Talosctl(args.talosctl, timeout=timeout))
    return render(drift_report(ws, args.layers, tf, console, talos=talos), args.json)


DRIFT = Definition(
    arguments,
    command,
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
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens drift",
        "terravixens drift platform-prod --terraform-only --json",
    ),
)


__all__ = [
    "DRIFT",
    "DriftReport",
    "LayerDrift",
    "TalosDrift",
    "TalosSide",
    "arguments",
    "command",
    "drift",
    "drift_report",
    "outside_changes",
    "talos_drift",
]
