"""Rolling Talos upgrades: one node at a time, gated on cluster health.

Terraform has no notion of "one at a time", so after a `talos_version` bump (ADR 0009: the new installer image is
already in every node's configuration, no VM was replaced) the operating system is upgraded here:
control planes first (by name), then workers, each with `talosctl upgrade --wait`, and after each node
`talosctl health` over the whole cluster must pass before the next node starts. A node already on the target
version is skipped, so a stopped upgrade can simply be run again.
"""
from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.roles import Role
from terravixens.talos.image import installer_image

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]
SERVER_TAG = re.compile(r"Server:.*?Tag:\s*(v\S+)", re.S)


@dataclass(frozen=True)
class Step:
    node: str
    role: Role
    address: str
    image: str


@dataclass(frozen=True)
class Outcome:
    upgraded: list[str]
    skipped: list[str]
    stopped_at: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.stopped_at is None


def upgrade_plan(site: Site, cluster_name: str) -> list[Step]:
    """Control planes first, then workers, each group by name: never by position in the site file."""
    cluster = site.clusters[cluster_name]
    placed = placed_nodes(site, cluster_name)
    return [Step(node.name, node.role, node.address, installer_image(node.hypervisor.talos_image, cluster.talos_version))
            for role in Role for node in placed.values() if node.role is role]


def kubernetes_upgrade(site: Site, cluster_name: str, talosconfig: str, talosctl: str = "talosctl",
                       run: Runner | None = None, log: Callable[[str], None] = print) -> Outcome:
    """`talosctl upgrade-k8s` to the site's kubernetes_version, then the health gate.

    upgrade-k8s rolls the control-plane components and kubelets node by node and updates each machine
    configuration, so the platform stack's apply that follows finds nothing left to change on the nodes; applying
    a new kubernetes_version through Terraform alone would restart every node's components at once (ADR 0009).
    """
    run = run or _default_runner
    steps = upgrade_plan(site, cluster_name)
    first = next(s for s in steps if s.role == "controlplane")
    target = site.clusters[cluster_name].kubernetes_version.removeprefix("v")
    base = [talosctl, "--talosconfig", talosconfig, "--nodes", first.address]
    log(f"upgrade-k8s to {target} through {first.node} ({first.address})")
    result = run([*base, "upgrade-k8s", "--to", target])
    if result.returncode != 0:
        reason = f"talosctl upgrade-k8s failed ({(result.stderr or result.stdout).strip()[:200]})"
        log(f"stopped: {reason}")
        return Outcome([], [], first.node, reason)
    gate = run(_health_command(talosctl, talosconfig, steps))
    if gate.returncode != 0:
        reason = f"the cluster is not healthy after upgrade-k8s ({(gate.stderr or gate.stdout).strip()[:200]})"
        log(f"stopped: {reason}")
        return Outcome([s.node for s in steps], [], first.node, reason)
    return Outcome([s.node for s in steps], [])


def _health_command(talosctl: str, talosconfig: str, steps: list[Step]) -> list[str]:
    control_planes = ",".join(s.address for s in steps if s.role == "controlplane")
    workers = ",".join(s.address for s in steps if s.role == "worker")
    return [talosctl, "--talosconfig", talosconfig, "--nodes", steps[0].address, "health", "--control-plane-nodes",
            control_planes, "--wait-timeout", "10m"] + (["--worker-nodes", workers] if workers else [])


def _default_runner(command: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=3600)


def rolling_upgrade(site: Site, cluster_name: str, talosconfig: str, target: str | None = None,
                    talosctl: str = "talosctl", run: Runner = _default_runner,
                    log: Callable[[str], None] = print) -> Outcome:
    target = target or site.clusters[cluster_name].talos_version
    steps = upgrade_plan(site, cluster_name)
    base = [talosctl, "--talosconfig", talosconfig]
    health = _health_command(talosctl, talosconfig, steps)
    upgraded, skipped = [], []

    def stop(step: Step, reason: str) -> Outcome:
        left = [s.node for s in steps[steps.index(step) + 1:]]
        log(f"stopped at {step.node}: {reason}; not touched: {', '.join(left) or 'none'}")
        return Outcome(upgraded, skipped, step.node, reason)

    for step in steps:
        version = run([*base, "--nodes", step.address, "version"])
        found = SERVER_TAG.search(version.stdout or "")
        if version.returncode != 0 or not found:
            return stop(step, f"cannot read its Talos version ({(version.stderr or version.stdout).strip()[:200]})")
        if found.group(1) == target:
            skipped.append(step.node)
            log(f"{step.node} ({step.role}, {step.address}): already {target}")
            continue
        log(f"{step.node} ({step.role}, {step.address}): {found.group(1)} -> {target}")
        result = run([*base, "--nodes", step.address, "upgrade", "--image", step.image, "--wait", "--timeout", "15m"])
        if result.returncode != 0:
            return stop(step, f"talosctl upgrade failed ({(result.stderr or result.stdout).strip()[:200]})")
        upgraded.append(step.node)
        gate = run(health)
        if gate.returncode != 0:
            return stop(step, f"the cluster is not healthy after upgrading it ({(gate.stderr or gate.stdout).strip()[:200]})")
        log(f"{step.node}: upgraded, cluster healthy")
    return Outcome(upgraded, skipped)
