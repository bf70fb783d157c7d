"""The rolling plan of a Talos upgrade or image roll-out, as values (ADR 0015, ADR 0038): pure, no I/O.

`upgrade_plan` lists the cluster's nodes in the order they roll (control planes first, then workers, each group by
name) with each one's target installer image (its hypervisor's talos_image at the cluster's talos_version). Given
what each node runs (`Running`: read by terravixens.operations.upgrade with `talosctl version` and `talosctl get
extensions`), a `Decision` says whether it is upgraded (its version, its schematic or both differ) or skipped;
`refusal` says why a run must not start (a downgrade, a skipped minor, a node not booted from an Image Factory
image); `schedule` orders the decisions into units (each control plane alone, workers in batches, a health check
after skipped nodes); `unit_lines` is how the dry run prints a unit and how the run announces it — the same lines,
compared in tests/test_upgrade.py with what the run then calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.roles import Role
from terravixens.talos.image import installer_image, schematic_id
from terravixens.talos_versions import TalosVersion, parse_version

HEALTH_FIRST = "0. talosctl health: the cluster must be healthy before the first node"
SHORT = 12  # schematic ids are shown by their first 12 hex digits (the image references carry all 64)


@dataclass(frozen=True)
class Step:
    node: str
    role: Role
    address: str
    image: str
    schematic: str = ""
    extensions: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.node} ({self.role}, {self.address})"


def upgrade_plan(site: Site, cluster_name: str) -> list[Step]:
    """Control planes first, then workers, each group by name: never by position in the site file. Each node's
    target image is its hypervisor's (talos_image: the schematic) at the cluster's talos_version."""
    cluster = site.clusters[cluster_name]
    placed = placed_nodes(site, cluster_name)
    return [
        Step(
            node.name,
            node.role,
            node.address,
            installer_image(node.hypervisor.talos_image, cluster.talos_version),
            schematic_id(node.hypervisor.talos_image),
            tuple(sorted(node.hypervisor.talos_image.extensions)),
        )
        for role in Role
        for node in placed.values()
        if node.role is role
    ]


def release(version: str) -> tuple[Any, ...]:
    """Orders Talos versions: v1.12.0-beta.1 < v1.12.0 < v1.12.1; ValueError for what is not one."""
    parsed = parse_version(version)
    if isinstance(parsed, str):
        raise ValueError(parsed)
    return parsed.key


def skips_a_minor(running: str | TalosVersion, target: str | TalosVersion) -> bool:
    """v1.11.6 -> v1.13.0 skips 1.12; v1.11.6 -> v1.12.7 and v1.12.0-beta.1 -> v1.13.0 do not."""
    (major, minor), (to_major, to_minor) = [
        (v.major, v.minor) if isinstance(v, TalosVersion) else release(v)[:2] for v in (running, target)
    ]
    return (to_major, to_minor) > (major, minor + 1) if to_major == major else to_major > major


def short(schematic_id: str | None) -> str:
    """A schematic id as the lines show it: its first 12 hex digits, or why there is none."""
    return schematic_id[:SHORT] if schematic_id else "none (not an Image Factory image)"


@dataclass(frozen=True)
class Running:
    """What a node runs: its version and the schematic id of the image it booted (None: not a factory image)."""

    version: TalosVersion
    schematic: str | None

    def describe(self) -> str:
        return f"{self.version}, schematic {short(self.schematic)}"


def on_target(running: Running, target: TalosVersion, step: Step) -> bool:
    return running.version.same(target) and running.schematic == step.schematic


def not_on_target(step: Step, before: Running, after: Running, target: TalosVersion) -> str:
    """Why a node that `talosctl upgrade --wait` reported done is not on the target."""
    rolled_back = (
        "Talos rolled back to its previous image (A/B fallback after a failed boot); look at its console or "
        "`talosctl dmesg`, fix the cause and run the same command again"
    )
    if not after.version.same(target):
        if after.version.same(before.version):
            return f"{step.node} still runs {after.version} after talosctl upgrade --wait returned: {rolled_back}"
        return f"{step.node} runs {after.version} after its upgrade, not the target {target}"
    if after.schematic == before.schematic and before.schematic != step.schematic:
        return (
            f"{step.node} still runs schematic {short(after.schematic)} (not {short(step.schematic)}) after "
            f"talosctl upgrade --wait returned: {rolled_back}"
        )
    booted = after.schematic or "none (not an Image Factory image)"
    return (
        f"{step.node} runs {after.version} but booted schematic {booted}, not {step.schematic}: it is not the "
        f"installer image {step.image}"
    )


def listed(nodes: list[str]) -> str:
    """Node names as the lines say them: `cp-a, cp-b`, or `none`."""
    return ", ".join(nodes) or "none"


# ---------------------------------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class Decision:
    """What the run does with one node, from what it runs: upgrade it (its version, its schematic or both differ from
    the target) or skip it (already current)."""

    step: Step
    running: Running
    target: TalosVersion

    @property
    def version_changes(self) -> bool:
        return not self.running.version.same(self.target)

    @property
    def schematic_changes(self) -> bool:
        return self.running.schematic != self.step.schematic

    @property
    def current(self) -> bool:
        return not (self.version_changes or self.schematic_changes)

    def why(self) -> str:
        was, to = short(self.running.schematic), short(self.step.schematic)
        if self.current:
            return f"already current ({self.target}, schematic {to}): skipped"
        if not self.schematic_changes:
            return f"{self.running.version} -> {self.target} (version change; schematic {to} kept)"
        if not self.version_changes:
            return f"re-image at {self.target} (schematic change: {was} -> {to})"
        return f"{self.running.version} -> {self.target} (version and schematic change: {was} -> {to})"


@dataclass(frozen=True)
class Unit:
    """One numbered line (or, for a batch, one line per node under one number) of the plan, run as a whole:
    `skip` a current node, `health` after skipped nodes (`after`), `upgrade` one control plane (after its etcd
    snapshot) or one batch of workers, then read back and the health gate."""

    kind: str
    decisions: tuple[Decision, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def steps(self) -> list[Step]:
        return [d.step for d in self.decisions]

    @property
    def names(self) -> str:
        return ", ".join(d.step.node for d in self.decisions)


def schedule(decisions: list[Decision], worker_batch: int) -> list[Unit]:
    """The units in the order they run: each control plane alone, workers `worker_batch` at a time (a current
    worker takes no slot), both in name order; a health check after skipped nodes before the next upgrade and at the
    end (a node that broke between two runs is caught before another is rebooted)."""
    units: list[Unit] = []
    batch: list[Decision] = []
    skipped: list[str] = []

    def upgrade(group: list[Decision]) -> None:
        if skipped:
            units.append(Unit("health", after=tuple(skipped)))
            skipped.clear()
        units.append(Unit("upgrade", tuple(group)))

    for decision in decisions:
        if decision.current:
            units.append(Unit("skip", (decision,)))
            skipped.append(decision.step.node)
        elif decision.step.role == Role.CONTROLPLANE:
            upgrade([decision])
        else:
            batch.append(decision)
            if len(batch) == worker_batch:
                upgrade(batch)
                batch = []
    if batch:
        upgrade(batch)
    if skipped:
        units.append(Unit("health", after=tuple(skipped)))
    return units


def unit_lines(number: int, unit: Unit, snapshot: str | None) -> list[str]:
    """The plan's line(s) of one unit, as --dry-run prints them and as the run prints them when it starts the unit.
    `snapshot`: what is done about etcd before a control plane's upgrade (None: nothing is said)."""
    if unit.kind == "health":
        return [f"{number}. talosctl health after the skipped {listed(list(unit.after))}"]
    lines = [f"{number}. {d.step.label}: {d.why()}" for d in unit.decisions]
    if unit.kind == "skip":
        return lines
    actions = ["talosctl upgrade", "read back (version and schematic)", "talosctl health"]
    if unit.steps[0].role == Role.CONTROLPLANE and snapshot is not None:
        actions.insert(0, snapshot)
    together = f"{unit.names} together: " if len(unit.decisions) > 1 else ""
    lines[-1] += f" — {together}{', '.join(actions)}"
    return lines


def target_lines(steps: list[Step], target: TalosVersion) -> list[str]:
    """Which installer image each node gets (one line per image: hypervisors may carry different schematics)."""
    images: dict[str, list[Step]] = {}
    for step in steps:
        images.setdefault(step.image, []).append(step)
    lines = []
    for image, group in images.items():
        extensions = ", ".join(group[0].extensions) or "none"
        lines.append(
            f"target {target} for {listed([s.node for s in group])}: {image} (schematic "
            f"{short(group[0].schematic)}, extensions: {extensions})"
        )
    return lines


def refusal(steps: list[Step], current: dict[str, Running], target: TalosVersion) -> str | None:
    """Why the run refuses to start (unless forced), or None: a downgrade, a skipped minor, a node whose image is
    not an Image Factory one (it lists no `schematic` extension: what it runs cannot be compared with the site's)."""
    newer = [s for s in steps if current[s.node].version.key > target.key]
    if newer:
        running_text = ", ".join(f"{s.node} runs {current[s.node].version}" for s in newer)
        return (
            f"{running_text}, newer than the target {target}: that is a downgrade. Set talos_version to "
            f"the version the nodes run, or pass --force to downgrade"
        )
    behind = [s for s in steps if skips_a_minor(current[s.node].version, target)]
    if behind:
        running_text = ", ".join(f"{s.node} runs {current[s.node].version}" for s in behind)
        return (
            f"{running_text}, more than one minor behind the target {target}: Talos upgrades one minor at "
            f"a time. Set talos_version to the newest patch of the next minor, run the upgrade, then go "
            f"on; or pass --force"
        )
    foreign = [s for s in steps if current[s.node].schematic is None]
    if foreign:
        return (
            f"{listed([s.node for s in foreign])} booted an image that is not an Image Factory one (talosctl get "
            f"extensions lists no `schematic` extension): what it runs cannot be compared with the site's image. "
            f"Look at it (talosctl -n {foreign[0].address} get extensions); to replace it with the site's image, "
            f"pass --force (re-imaged with {foreign[0].image})"
        )
    return None


def describe_kubernetes(site: Site, cluster_name: str) -> list[str]:
    """What `upgrade --kubernetes` does, without contacting anything."""
    steps = upgrade_plan(site, cluster_name)
    first = next(s for s in steps if s.role == Role.CONTROLPLANE)
    target = site.clusters[cluster_name].kubernetes_version.removeprefix("v")
    control_planes = [s.node for s in steps if s.role == Role.CONTROLPLANE]
    workers = [s.node for s in steps if s.role == Role.WORKER]
    return [
        "0. talosctl health: the cluster must be healthy first",
        (
            f"1. talosctl upgrade-k8s --to {target} through {first.node} ({first.role}, {first.address}): "
            f"kube-apiserver, kube-controller-manager and kube-scheduler on {listed(control_planes)} one node at a "
            f"time, then the kubelet of every node ({listed(control_planes + workers)}), each machine configuration "
            f"updated"
        ),
        f"2. talosctl health over {listed(control_planes)} (control planes) and {listed(workers)} (workers)",
        "for the cluster's own view of each change: talosctl upgrade-k8s --dry-run (contacts the cluster)",
    ]


__all__ = [
    "HEALTH_FIRST",
    "SHORT",
    "Decision",
    "Running",
    "Step",
    "Unit",
    "describe_kubernetes",
    "listed",
    "not_on_target",
    "on_target",
    "refusal",
    "release",
    "schedule",
    "short",
    "skips_a_minor",
    "target_lines",
    "unit_lines",
    "upgrade_plan",
]
