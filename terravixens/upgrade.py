"""Rolling Talos upgrades that cannot make things worse: gated on cluster health, bounded in time, resumable.

Terraform has no notion of "one at a time", so after a `talos_version` bump (ADR 0009: the new installer image is
already in every node's configuration, no VM was replaced) the operating system is upgraded here (ADR 0015):

1. `talosctl health` over the whole cluster must pass before anything is touched: a cluster that is already
   unhealthy never gets one more node rebooted;
2. every node's running version is read first: an unreachable node stops the run, and a node newer than the
   target (a downgrade) or more than one minor behind it (1.11 -> 1.13: Talos upgrades one minor at a time,
   ADR 0023) refuses it unless forced — before any node is touched;
3. control planes one at a time (by name), then workers in batches of `worker_batch` (by name, default 1), each
   with `talosctl upgrade --wait`; after each node or batch the health gate must pass again. Nodes already on the
   target are skipped, and a health check follows skipped nodes before the next upgrade (and at the end), so a
   stopped run is resumed by running it again;
4. every talosctl call has a deadline; a failed, hung or missing talosctl ends the run with
   "stopped at X: why; done: …; not touched: …" — never a traceback.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.exitcodes import ExitCode
from terravixens.roles import Role
from terravixens.talos.image import installer_image
from terravixens.talosctl import Call, Talosctl

SERVER_TAG = re.compile(r"Server:.*?Tag:\s*(v\S+)", re.S)
RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-(\S+))?$")
# Exit codes of `terravixens upgrade`: the one table (terravixens.exitcodes). The EXIT_* names are aliases kept for
# code written before it.
EXIT_OK, EXIT_STOPPED, EXIT_INPUT, EXIT_REFUSED = ExitCode.OK, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.REFUSED
Log = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    node: str
    role: Role
    address: str
    image: str


@dataclass(frozen=True)
class Outcome:
    """upgraded/skipped/done in the order they happened; not_touched: nodes this run never acted on."""

    upgraded: list[str]
    skipped: list[str]
    stopped_at: str | None = None
    reason: str = ""
    done: list[str] = field(default_factory=list)
    not_touched: list[str] = field(default_factory=list)
    refused: bool = False

    @property
    def ok(self) -> bool:
        return self.stopped_at is None and not self.refused

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.REFUSED if self.refused else ExitCode.FAILED

    def summary(self) -> str:
        if self.refused:
            return f"refused: {self.reason}; nothing touched"
        if self.ok:
            return f"upgraded: {_names(self.upgraded)}; already current: {_names(self.skipped)}"
        return (f"stopped at {self.stopped_at}: {self.reason}; done: {_names(self.done)}; "
                f"not touched: {_names(self.not_touched)}")


def upgrade_plan(site: Site, cluster_name: str) -> list[Step]:
    """Control planes first, then workers, each group by name: never by position in the site file."""
    cluster = site.clusters[cluster_name]
    placed = placed_nodes(site, cluster_name)
    return [Step(node.name, node.role, node.address, installer_image(node.hypervisor.talos_image, cluster.talos_version))
            for role in Role for node in placed.values() if node.role is role]


def release(version: str) -> tuple:
    """Orders Talos versions: v1.12.0-beta.1 < v1.12.0 < v1.12.1."""
    found = RELEASE.match(version)
    if not found:
        raise ValueError(f"{version!r} is not a Talos version like v1.11.6")
    major, minor, patch, pre = found.groups()
    return int(major), int(minor), int(patch), (1, "") if pre is None else (0, pre)


def skips_a_minor(running: str, target: str) -> bool:
    """v1.11.6 -> v1.13.0 skips 1.12; v1.11.6 -> v1.12.7 and v1.12.0-beta.1 -> v1.13.0 do not."""
    (major, minor), (to_major, to_minor) = release(running)[:2], release(target)[:2]
    return (to_major, to_minor) > (major, minor + 1) if to_major == major else to_major > major


def _names(nodes: list[str]) -> str:
    return ", ".join(nodes) or "none"


def _health(talosctl: Talosctl, steps: list[Step]) -> Call:
    return talosctl.health([s.address for s in steps if s.role == Role.CONTROLPLANE],
                           [s.address for s in steps if s.role == Role.WORKER])


def _groups(steps: list[Step], current: dict[str, str], target: str,
            worker_batch: int) -> Iterator[tuple[str, list[Step]]]:
    """("skip", [step]) for a node on the target, ("upgrade", [steps]) for the next node or batch: each control
    plane alone, workers `worker_batch` at a time, both in name order."""
    batch: list[Step] = []
    for step in steps:
        if current[step.node] == target:
            yield "skip", [step]
        elif step.role == Role.CONTROLPLANE:
            yield "upgrade", [step]
        else:
            batch.append(step)
            if len(batch) == worker_batch:
                yield "upgrade", batch
                batch = []
    if batch:
        yield "upgrade", batch


def rolling_upgrade(site: Site, cluster_name: str, talosctl: Talosctl, *, worker_batch: int = 1,
                    force: bool = False, target: str | None = None, log: Log = print) -> Outcome:
    target = target or site.clusters[cluster_name].talos_version
    steps = upgrade_plan(site, cluster_name)
    upgraded: list[str] = []
    skipped: list[str] = []
    done: list[str] = []

    def stop(at: list[Step], reason: str, touched: bool) -> Outcome:
        at_names = [s.node for s in at]
        left = [s.node for s in steps if s.node not in done and (not touched or s.node not in at_names)]
        outcome = Outcome(upgraded, skipped, ", ".join(at_names), reason, done, left)
        log(outcome.summary())
        return outcome

    before = _health(talosctl, steps)
    if not before.ok:
        return stop(steps[:1], f"health check before the first node failed ({before.reason})", False)
    log("cluster healthy before the first node")

    current: dict[str, str] = {}
    for step in steps:
        answer = talosctl.version(step.address)
        found = SERVER_TAG.search(answer.stdout) if answer.ok else None
        if found is None:
            why = answer.reason or "no server version in its answer"
            return stop([step], f"cannot read its Talos version ({why})", False)
        current[step.node] = found.group(1)
    newer = [s for s in steps if release(current[s.node]) > release(target)]
    if newer and not force:
        running = ", ".join(f"{s.node} runs {current[s.node]}" for s in newer)
        outcome = Outcome([], [], None, f"{running}, newer than the target {target}: that is a downgrade. Set "
                                        f"talos_version to the version the nodes run, or pass --force to downgrade",
                          [], [s.node for s in steps], refused=True)
        log(outcome.summary())
        return outcome
    behind = [s for s in steps if skips_a_minor(current[s.node], target)]
    if behind and not force:
        running = ", ".join(f"{s.node} runs {current[s.node]}" for s in behind)
        outcome = Outcome([], [], None, f"{running}, more than one minor behind the target {target}: Talos upgrades "
                                        f"one minor at a time. Set talos_version to the newest patch of the next "
                                        f"minor, run the upgrade, then go on; or pass --force",
                          [], [s.node for s in steps], refused=True)
        log(outcome.summary())
        return outcome

    unchecked_skips: list[str] = []
    for kind, group in _groups(steps, current, target, worker_batch):
        names = ", ".join(s.node for s in group)
        if kind == "skip":
            [step] = group
            skipped.append(step.node)
            done.append(step.node)
            unchecked_skips.append(step.node)
            log(f"{step.node} ({step.role}, {step.address}): already {target}")
            continue
        if unchecked_skips:
            gate = _health(talosctl, steps)
            if not gate.ok:
                return stop(group, f"health check after skipping {_names(unchecked_skips)} failed "
                                   f"({gate.reason})", False)
            unchecked_skips = []
        for step in group:
            log(f"{step.node} ({step.role}, {step.address}): {current[step.node]} -> {target}")
        with ThreadPoolExecutor(max_workers=len(group)) as pool:
            answers = list(pool.map(lambda s: talosctl.upgrade(s.address, s.image), group))
        for step, answer in zip(group, answers):
            if answer.ok:
                upgraded.append(step.node)
                done.append(step.node)
        failed = [(step, answer) for step, answer in zip(group, answers) if not answer.ok]
        if failed:
            why = "; ".join(f"on {step.node}: {answer.reason}" for step, answer in failed)
            return stop([step for step, _ in failed], f"talosctl upgrade failed ({why})", True)
        gate = _health(talosctl, steps)
        if not gate.ok:
            return stop(group, f"health check after upgrading {names} failed ({gate.reason})", True)
        log(f"{names}: upgraded, cluster healthy")
    if unchecked_skips:
        gate = _health(talosctl, steps)
        if not gate.ok:
            return stop(steps[-1:], f"health check after skipping {_names(unchecked_skips)} failed "
                                    f"({gate.reason})", True)
    outcome = Outcome(upgraded, skipped, done=done)
    log(outcome.summary())
    return outcome


def kubernetes_upgrade(site: Site, cluster_name: str, talosctl: Talosctl, log: Log = print) -> Outcome:
    """`talosctl upgrade-k8s` to the site's kubernetes_version, between two health gates.

    upgrade-k8s rolls the control-plane components and kubelets node by node and updates each machine
    configuration, so the platform stack's apply that follows finds nothing left to change on the nodes; applying
    a new kubernetes_version through Terraform alone would restart every node's components at once (ADR 0009).
    It resumes where it stopped, so a failed run is repeated after the cause is fixed.
    """
    steps = upgrade_plan(site, cluster_name)
    first = next(s for s in steps if s.role == Role.CONTROLPLANE)
    target = site.clusters[cluster_name].kubernetes_version.removeprefix("v")
    everyone = [s.node for s in steps]

    def stop(reason: str, touched: bool) -> Outcome:
        outcome = Outcome([], [], first.node, reason, [], [] if touched else everyone)
        log(outcome.summary())
        return outcome

    before = _health(talosctl, steps)
    if not before.ok:
        return stop(f"health check before upgrade-k8s failed ({before.reason})", False)
    log(f"cluster healthy; upgrade-k8s to {target} through {first.node} ({first.address})")
    answer = talosctl.upgrade_k8s(first.address, target)
    if not answer.ok:
        return stop(f"talosctl upgrade-k8s failed ({answer.reason}); components may be partly upgraded: fix the "
                    f"cause and run it again", True)
    gate = _health(talosctl, steps)
    if not gate.ok:
        return stop(f"health check after upgrade-k8s failed ({gate.reason})", True)
    outcome = Outcome(everyone, [], done=everyone)
    log(f"kubernetes {target} on {_names(everyone)}, cluster healthy")
    return outcome


# ---------------------------------------------------------------------------------------------------------- dry run
def describe_rolling(site: Site, cluster_name: str, worker_batch: int = 1) -> list[str]:
    """What a rolling upgrade does, without contacting anything (which nodes are current is only known then)."""
    steps = upgrade_plan(site, cluster_name)
    target = site.clusters[cluster_name].talos_version
    lines = ["0. talosctl health: the cluster must be healthy before the first node"]
    everyone = {s.node: "" for s in steps}
    groups = list(_groups(steps, everyone, target, worker_batch))
    for number, (_, group) in enumerate(groups, 1):
        entries = [f"{s.node} ({s.role}, {s.address}) -> {s.image}" for s in group]
        lines.append(f"{number}. {entries[0]}")
        lines += [f"   {entry}" for entry in entries[1:]]
        lines[-1] += (", together" if len(group) > 1 else "") + ", then talosctl health"
    lines.append(f"nodes already on {target} are skipped (talosctl health follows them); a node newer than "
                 f"{target}, or more than one minor behind it, refuses the run unless --force")
    return lines


def describe_kubernetes(site: Site, cluster_name: str) -> list[str]:
    """What `upgrade --kubernetes` does, without contacting anything."""
    steps = upgrade_plan(site, cluster_name)
    first = next(s for s in steps if s.role == Role.CONTROLPLANE)
    target = site.clusters[cluster_name].kubernetes_version.removeprefix("v")
    control_planes = [s.node for s in steps if s.role == Role.CONTROLPLANE]
    workers = [s.node for s in steps if s.role == Role.WORKER]
    return [
        "0. talosctl health: the cluster must be healthy first",
        f"1. talosctl upgrade-k8s --to {target} through {first.node} ({first.role}, {first.address}): "
        f"kube-apiserver, kube-controller-manager and kube-scheduler on {_names(control_planes)} one node at a "
        f"time, then the kubelet of every node ({_names(control_planes + workers)}), each machine configuration "
        f"updated",
        f"2. talosctl health over {_names(control_planes)} (control planes) and {_names(workers)} (workers)",
        "for the cluster's own view of each change: talosctl upgrade-k8s --dry-run (contacts the cluster)",
    ]


def command(site: Site, cluster_name: str, talosctl: Talosctl, *, kubernetes: bool = False, dry_run: bool = False,
            worker_batch: int = 1, force: bool = False, log: Log = print) -> int:
    """`terravixens upgrade`: the dry-run text or the upgrade itself; returns the exit code."""
    if dry_run:
        for line in (describe_kubernetes(site, cluster_name) if kubernetes
                     else describe_rolling(site, cluster_name, worker_batch)):
            log(line)
        return ExitCode.OK
    if kubernetes:
        return kubernetes_upgrade(site, cluster_name, talosctl, log=log).exit_code
    return rolling_upgrade(site, cluster_name, talosctl, worker_batch=worker_batch, force=force, log=log).exit_code
