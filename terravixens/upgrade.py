"""Rolling Talos upgrades and image roll-outs that cannot make things worse: gated on cluster health, backed up,
bounded in time, resumable, and planned exactly as they run.

Terraform has no notion of "one at a time", so after a `talos_version` bump or a changed Talos image (extensions,
kernel arguments: a new Image Factory schematic; ADR 0009: the new installer image is already in every node's
configuration, no VM was replaced) the running nodes are re-imaged here (ADR 0015, ADR 0038):

1. `talosctl health` over the whole cluster must pass before anything is touched: a cluster that is already
   unhealthy never gets one more node rebooted;
2. what every node runs is read (see below): an unreachable node stops the run; a node newer than the target (a
   downgrade), more than one minor behind it (1.11 -> 1.13: Talos upgrades one minor at a time, ADR 0023), or not
   booted from an Image Factory image (no schematic: what it runs cannot be compared) refuses it unless forced —
   before any node is touched;
3. each node whose version OR schematic differs from the site's (its hypervisor's talos_image, the cluster's
   talos_version) is upgraded — re-imaged at the same version when only the schematic changed; nodes on the target
   (version and schematic) are skipped, and a health check follows skipped nodes before the next upgrade (and at the
   end), so a stopped run is resumed by running it again;
4. control planes one at a time (by name), each after a fresh verified etcd snapshot through another control plane
   (terravixens.operations.etcd.fresh_snapshot; none: BACKUP_FAILED, unless --no-snapshot REASON), then workers in
   batches of `worker_batch` (by name, default 1), each with `talosctl upgrade --wait`; after each node or batch,
   what each node runs is read back and must be the target — a node that came back on its old version or schematic
   (Talos' A/B fallback after a failed boot) stops the run, named — then the health gate must pass again;
5. every talosctl call has a deadline; a failed, hung or missing talosctl ends the run with
   "stopped at X: why; done: …; not touched: …" — never a traceback. An interrupt (Ctrl-C, SIGTERM, SIGHUP)
   stops talosctl and says the same in one line.

The plan (step 3 and 4: which node, why, in which unit, in which order) is a value computed from what the nodes run:
`--dry-run` reads the nodes (read-only calls: `talosctl version`, `talosctl get extensions`) and prints it, and the
run prints each numbered line of the same plan as it starts that unit — the two are compared in the tests.

What a node runs is read with `talosctl version` (the server's Tag) and `talosctl get extensions` (the Image
Factory's `schematic` extension: its version is the schematic id of the image the node booted — the running image,
where machine.install.image only says what a future install would use). Whatever Tag talosctl prints is either
understood as a release (`v1.11.6`, `1.11.6`, `v1.12.0-beta.1`, `v1.11.6+custom`) or stops the run naming the node
(`v1.11`: no patch, so not comparable with the target; anything else).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.exitcodes import ExitCode
from terravixens.layers import platform_stack_name
from terravixens.operations.outcome import OperationError
from terravixens.roles import Role
from terravixens.runner import annotate
from terravixens.talos.image import installer_image, schematic_id
from terravixens.talos_versions import TalosVersion, parse_version
from terravixens.talosctl import Call, Talosctl, schematic, server_tag

# Exit codes of `terravixens upgrade`: the one table (terravixens.exitcodes). The EXIT_* names are aliases kept for
# code written before it.
EXIT_OK, EXIT_STOPPED, EXIT_INPUT, EXIT_REFUSED = ExitCode.OK, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.REFUSED
Log = Callable[[str], None]
RESUME = (
    "an upgrade Talos already started goes on inside the node: run the same command again to check health and resume"
)
HEALTH_FIRST = "0. talosctl health: the cluster must be healthy before the first node"
# The talosctl client configuration upgrade used before it could read the platform layer's: still taken when present.
LOCAL_TALOSCONFIG = "talosconfig"
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


@dataclass(frozen=True)
class Outcome:
    """upgraded/skipped/done in the order they happened; not_touched: nodes this run never acted on. `code`: the exit
    code of a stop (FAILED, or BACKUP_FAILED when no etcd snapshot could be taken before a control plane)."""

    upgraded: list[str]
    skipped: list[str]
    stopped_at: str | None = None
    reason: str = ""
    done: list[str] = field(default_factory=list)
    not_touched: list[str] = field(default_factory=list)
    refused: bool = False
    code: ExitCode = ExitCode.FAILED

    @property
    def ok(self) -> bool:
        return self.stopped_at is None and not self.refused

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.REFUSED if self.refused else self.code

    def summary(self) -> str:
        if self.refused:
            return f"refused: {self.reason}; nothing touched"
        if self.ok:
            return f"upgraded: {_names(self.upgraded)}; already current: {_names(self.skipped)}"
        return (
            f"stopped at {self.stopped_at}: {self.reason}; done: {_names(self.done)}; "
            f"not touched: {_names(self.not_touched)}"
        )


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


def read_running(talosctl: Talosctl, step: Step) -> Running | str:
    """`talosctl version` then `talosctl get extensions` of one node; why not, as a value."""
    answer = talosctl.version(step.address)
    if not answer.ok:
        return f"cannot read its Talos version ({answer.reason})"
    tag = server_tag(answer.stdout)
    if tag is None:
        return "cannot read its Talos version (no server Tag in the answer of talosctl version)"
    version = parse_version(tag)
    if isinstance(version, str):
        return f"cannot understand its Talos version: {version}"
    extensions = talosctl.extensions(step.address)
    if not extensions.ok:
        return f"cannot read the image it booted ({extensions.reason})"
    return Running(version, schematic(extensions.stdout))


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


def _names(nodes: list[str]) -> str:
    return ", ".join(nodes) or "none"


def _health(talosctl: Talosctl, steps: list[Step]) -> Call:
    return talosctl.health(
        [s.address for s in steps if s.role == Role.CONTROLPLANE], [s.address for s in steps if s.role == Role.WORKER]
    )


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


@dataclass(frozen=True)
class Snapshots:
    """The etcd snapshot before each control plane's upgrade: `take(step)` takes a fresh verified one through another
    control plane, or prints the operator's reason for none (`skipped`, --no-snapshot REASON); it raises an
    OperationError (BACKUP_FAILED) when none could be taken."""

    take: Callable[[Step], object]
    skipped: str | None = None
    alone: bool = False  # one control plane: the snapshot is taken through the node about to be upgraded

    def describe(self) -> str:
        if self.skipped is not None:
            return f"no etcd snapshot (--no-snapshot: {self.skipped})"
        if self.alone:
            return "etcd snapshot through it (the only control plane)"
        return "etcd snapshot through another control plane"


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


def unit_lines(number: int, unit: Unit, snapshots: Snapshots | None) -> list[str]:
    """The plan's line(s) of one unit, as --dry-run prints them and as the run prints them when it starts the unit."""
    if unit.kind == "health":
        return [f"{number}. talosctl health after the skipped {_names(list(unit.after))}"]
    lines = [f"{number}. {d.step.label}: {d.why()}" for d in unit.decisions]
    if unit.kind == "skip":
        return lines
    actions = ["talosctl upgrade", "read back (version and schematic)", "talosctl health"]
    if unit.steps[0].role == Role.CONTROLPLANE and snapshots is not None:
        actions.insert(0, snapshots.describe())
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
            f"target {target} for {_names([s.node for s in group])}: {image} (schematic "
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
            f"{_names([s.node for s in foreign])} booted an image that is not an Image Factory one (talosctl get "
            f"extensions lists no `schematic` extension): what it runs cannot be compared with the site's image. "
            f"Look at it (talosctl -n {foreign[0].address} get extensions); to replace it with the site's image, "
            f"pass --force (re-imaged with {foreign[0].image})"
        )
    return None


# ---------------------------------------------------------------------------------------------------------- the run
@dataclass
class _Progress:
    """What a run did so far, for its one stop line and its interrupt line."""

    steps: list[Step]
    log: Log
    upgraded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    what: str = "the health check before the first node"
    touching: list[str] = field(default_factory=list)

    def doing(self, what: str, touching: list[str] | None = None) -> None:
        self.what, self.touching = what, touching or []

    def stop(self, at: list[Step], reason: str, touched: bool, code: ExitCode = ExitCode.FAILED) -> Outcome:
        at_names = [s.node for s in at]
        left = [s.node for s in self.steps if s.node not in self.done and (not touched or s.node not in at_names)]
        outcome = Outcome(self.upgraded, self.skipped, ", ".join(at_names), reason, self.done, left, code=code)
        self.log(outcome.summary())
        return outcome

    def refuse(self, reason: str) -> Outcome:
        outcome = Outcome([], [], None, reason, [], [s.node for s in self.steps], refused=True)
        self.log(outcome.summary())
        return outcome

    def interrupted(self, error: BaseException) -> None:
        touched = [n for n in self.touching if n not in self.done]
        left = [s.node for s in self.steps if s.node not in self.done and s.node not in touched]
        annotate(
            error,
            where=f"during {self.what}",
            summary=f"done: {_names(self.done)}; not touched: {_names(left)}" + (f"; {RESUME}" if touched else ""),
        )


def survey(
    steps: list[Step], talosctl: Talosctl, target: TalosVersion, force: bool, progress: _Progress
) -> list[Decision] | Outcome:
    """Reads what every node runs (read-only calls), prints it, and decides per node; an Outcome when the run stops
    (a node that cannot be read) or is refused — before anything is touched. Shared by the run and --dry-run."""
    current: dict[str, Running] = {}
    for step in steps:
        progress.doing(f"reading what {step.node} runs")
        running = read_running(talosctl, step)
        if isinstance(running, str):
            return progress.stop([step], running, False)
        current[step.node] = running
    progress.log("what the nodes run (talosctl version, talosctl get extensions):")
    for step in steps:
        progress.log(f"   {step.label}: {current[step.node].describe()}")
    refused = refusal(steps, current, target)
    if refused is not None and not force:
        return progress.refuse(refused)
    for line in target_lines(steps, target):
        progress.log(line)
    return [Decision(step, current[step.node], target) for step in steps]


def rolling_upgrade(
    site: Site,
    cluster_name: str,
    talosctl: Talosctl,
    *,
    worker_batch: int = 1,
    force: bool = False,
    target: str | None = None,
    snapshots: Snapshots | None = None,
    log: Log = print,
) -> Outcome:
    """The roll-out (see the module's docstring). `snapshots`: the etcd snapshot before each control plane
    (`terravixens upgrade` always gives one; None only for callers that back etcd up themselves)."""
    target_text = target or site.clusters[cluster_name].talos_version
    steps = upgrade_plan(site, cluster_name)
    progress = _Progress(steps, log)
    parsed_target = parse_version(target_text)
    if isinstance(parsed_target, str):
        return progress.stop(steps[:1], f"the target talos_version {parsed_target}", False)
    try:
        return _rolling(steps, talosctl, parsed_target, worker_batch, force, snapshots, progress)
    except KeyboardInterrupt as error:
        progress.interrupted(error)
        raise


def _rolling(
    steps: list[Step],
    talosctl: Talosctl,
    target: TalosVersion,
    worker_batch: int,
    force: bool,
    snapshots: Snapshots | None,
    progress: _Progress,
) -> Outcome:
    log = progress.log
    log(HEALTH_FIRST)
    before = _health(talosctl, steps)
    if not before.ok:
        return progress.stop(steps[:1], f"health check before the first node failed ({before.reason})", False)
    log("   cluster healthy")
    decisions = survey(steps, talosctl, target, force, progress)
    if isinstance(decisions, Outcome):
        return decisions
    units = schedule(decisions, worker_batch)
    for number, unit in enumerate(units, 1):
        for line in unit_lines(number, unit, snapshots):
            log(line)
        group = unit.steps
        if unit.kind == "skip":
            progress.skipped += [s.node for s in group]
            progress.done += [s.node for s in group]
            continue
        if unit.kind == "health":
            progress.doing(f"the health check after skipping {_names(list(unit.after))}")
            gate = _health(talosctl, steps)
            if not gate.ok:
                # before the next upgrade, that node (or batch) is where it stopped; at the end, the last node
                following = next((u.steps for u in units[number:] if u.kind == "upgrade"), [])
                at, touched = (following, False) if following else (steps[-1:], True)
                why = f"health check after skipping {_names(list(unit.after))} failed ({gate.reason})"
                return progress.stop(at, why, touched)
            log("   cluster healthy")
            continue
        if group[0].role == Role.CONTROLPLANE and snapshots is not None:
            progress.doing(f"the etcd snapshot before the upgrade of {unit.names}")
            try:
                snapshots.take(group[0])
            except OperationError as error:
                return progress.stop(group, str(error), False, error.code)
        progress.doing(f"talosctl upgrade of {unit.names}", [s.node for s in group])
        with ThreadPoolExecutor(max_workers=len(group)) as pool:
            answers = list(pool.map(lambda s: talosctl.upgrade(s.address, s.image), group))
        failed = [(step, answer.reason) for step, answer in zip(group, answers, strict=True) if not answer.ok]
        if failed:
            for step, answer in zip(group, answers, strict=True):
                if answer.ok:
                    progress.upgraded.append(step.node)
                    progress.done.append(step.node)
            why = "; ".join(f"on {step.node}: {reason}" for step, reason in failed)
            return progress.stop([step for step, _ in failed], f"talosctl upgrade failed ({why})", True)
        progress.doing(f"reading back what {unit.names} run", [s.node for s in group])
        wrong: list[tuple[Step, str]] = []
        for decision in unit.decisions:
            step = decision.step
            after = read_running(talosctl, step)
            if isinstance(after, str):
                wrong.append((step, f"{step.node}: {after} after its upgrade"))
            elif not on_target(after, target, step):
                wrong.append((step, not_on_target(step, decision.running, after, target)))
            else:
                progress.upgraded.append(step.node)
                progress.done.append(step.node)
        if wrong:
            return progress.stop(
                [step for step, _ in wrong],
                f"not on the target after its upgrade ({'; '.join(why for _, why in wrong)})",
                True,
            )
        progress.doing(f"the health check after upgrading {unit.names}")
        gate = _health(talosctl, steps)
        if not gate.ok:
            return progress.stop(group, f"health check after upgrading {unit.names} failed ({gate.reason})", True)
        if len({s.schematic for s in group}) == 1:
            image = f"schematic {short(group[0].schematic)}"
        else:
            image = "schematics " + ", ".join(f"{short(s.schematic)} ({s.node})" for s in group)
        log(f"   {unit.names}: upgraded to {target}, {image} (read back: version and schematic), cluster healthy")
    outcome = Outcome(progress.upgraded, progress.skipped, done=progress.done)
    log(outcome.summary())
    return outcome


@dataclass(frozen=True)
class DryRun:
    """`upgrade --dry-run` as a value: what each node runs and what the run would do with it, the numbered units in
    order, the outcome (a stop or a refusal ends it early: no decisions then), and the lines it printed. The
    `terravixens/upgrade-dry-run/v1` document (terravixens.output) is built from it."""

    cluster: str
    target: str
    outcome: Outcome
    decisions: tuple[Decision, ...] = ()
    units: tuple[Unit, ...] = ()
    text: tuple[str, ...] = ()
    command: str = "upgrade dry-run"

    @property
    def exit_code(self) -> int:
        return int(self.outcome.exit_code)

    def lines(self) -> list[str]:
        return list(self.text)

    def notes(self) -> list[str]:
        return []

    def body(self) -> dict[str, Any]:
        outcome = self.outcome
        return {
            "cluster": self.cluster,
            "target": self.target,
            "result": "refused" if outcome.refused else "ok" if outcome.ok else "stopped",
            "exit_code": self.exit_code,
            "reason": outcome.reason or None,
            "stopped_at": outcome.stopped_at,
            "nodes": [
                {
                    "node": d.step.node,
                    "role": str(d.step.role),
                    "address": d.step.address,
                    "running": str(d.running.version),
                    "running_schematic": d.running.schematic,
                    "target_schematic": d.step.schematic,
                    "action": "skip" if d.current else "upgrade" if d.version_changes else "re-image",
                    "why": d.why(),
                }
                for d in self.decisions
            ],
            "units": [
                {
                    "number": number,
                    "kind": unit.kind,
                    "nodes": [d.step.node for d in unit.decisions] or list(unit.after),
                }
                for number, unit in enumerate(self.units, 1)
            ],
            "lines": list(self.text),
        }


def rolling_dry_run(
    site: Site,
    cluster_name: str,
    talosctl: Talosctl,
    *,
    worker_batch: int = 1,
    force: bool = False,
    snapshots: Snapshots | None = None,
    log: Log = print,
) -> Outcome:
    """What the run will do, exactly: every node read (`talosctl version`, `talosctl get extensions`: read-only), then
    the numbered plan the run prints as it goes — which nodes are upgraded or re-imaged and why, which are skipped,
    in which order and batches, with the snapshots and health gates. A node that cannot be read, or a run that would
    be refused, ends the dry run with the line and the exit code the run would end with. The health gate itself is
    not run (the run checks it first)."""
    return dry_run_report(
        site, cluster_name, talosctl, worker_batch=worker_batch, force=force, snapshots=snapshots, log=log
    ).outcome


def dry_run_report(
    site: Site,
    cluster_name: str,
    talosctl: Talosctl,
    *,
    worker_batch: int = 1,
    force: bool = False,
    snapshots: Snapshots | None = None,
    log: Log = print,
) -> DryRun:
    """rolling_dry_run's work, returned as a DryRun (each line is also given to `log` as it is decided)."""
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        log(line)

    steps = upgrade_plan(site, cluster_name)
    progress = _Progress(steps, say, what="the dry run")
    wanted = site.clusters[cluster_name].talos_version
    target = parse_version(wanted)
    if isinstance(target, str):
        stopped = progress.stop(steps[:1], f"the target talos_version {target}", False)
        return DryRun(cluster_name, wanted, stopped, text=tuple(said))
    try:
        decisions = survey(steps, talosctl, target, force, progress)
    except KeyboardInterrupt as error:
        annotate(error, where=f"during {progress.what} (--dry-run)", summary="nothing was changed")
        raise
    if isinstance(decisions, Outcome):
        return DryRun(cluster_name, str(target), decisions, text=tuple(said))
    say(HEALTH_FIRST)
    units = schedule(decisions, worker_batch)
    for number, unit in enumerate(units, 1):
        for line in unit_lines(number, unit, snapshots):
            say(line)
    current = [d.step.node for d in decisions if d.current]
    say(
        f"dry run: nothing was changed ({len(decisions) - len(current)} to upgrade, {len(current)} already "
        f"current); the run reads every node again first and follows this plan while they run what is shown above"
    )
    outcome = Outcome([], current, done=[])
    return DryRun(cluster_name, str(target), outcome, tuple(decisions), tuple(units), tuple(said))


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
    try:
        answer = talosctl.upgrade_k8s(first.address, target)
    except KeyboardInterrupt as error:
        annotate(
            error,
            where=f"during talosctl upgrade-k8s through {first.node}",
            summary="components may be partly upgraded: run the same command again (upgrade-k8s resumes where "
            "it stopped)",
        )
        raise
    if not answer.ok:
        return stop(
            f"talosctl upgrade-k8s failed ({answer.reason}); components may be partly upgraded: fix the "
            f"cause and run it again",
            True,
        )
    gate = _health(talosctl, steps)
    if not gate.ok:
        return stop(f"health check after upgrade-k8s failed ({gate.reason})", True)
    outcome = Outcome(everyone, [], done=everyone)
    log(f"kubernetes {target} on {_names(everyone)}, cluster healthy")
    return outcome


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
            f"kube-apiserver, kube-controller-manager and kube-scheduler on {_names(control_planes)} one node at a "
            f"time, then the kubelet of every node ({_names(control_planes + workers)}), each machine configuration "
            f"updated"
        ),
        f"2. talosctl health over {_names(control_planes)} (control planes) and {_names(workers)} (workers)",
        "for the cluster's own view of each change: talosctl upgrade-k8s --dry-run (contacts the cluster)",
    ]


# ---------------------------------------------------------------------------------------------------------- command
class _Lines:
    """A text stream whose lines go to a Log: the etcd steps' Console prints through the upgrade's log."""

    def __init__(self, log: Log):
        self.log, self.pending = log, ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.log(line)
        return len(text)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def talosconfig_path(ws: Any, terraform: Callable[[], Any], cluster_name: str, given: str | None) -> Iterator[str]:
    """The talosctl client configuration: `--talosconfig FILE` when given; else ./talosconfig when there is one
    (upgrade's default before it could read the platform layer's); else the platform layer's `talosconfig` output,
    written 0600 into a 0700 temporary folder removed afterwards (terravixens.operations.etcd.talosconfig_file) —
    read from the layer's working directory a deploy from this folder left (no synth, no init: the upgrade does not
    plan or apply anything)."""
    from terravixens.operations.etcd import talosconfig_file

    if given:
        yield given
        return
    if Path(LOCAL_TALOSCONFIG).is_file():  # relative to the current folder, as talosctl reads it
        yield LOCAL_TALOSCONFIG
        return
    layer = platform_stack_name(cluster_name)
    if not ws.stack_dir(layer).is_dir():
        raise OperationError(
            f"no talosconfig: none given (--talosconfig FILE), no ./{LOCAL_TALOSCONFIG} here, and {layer} was not "
            f"deployed from this folder (no cdktf.out/stacks/{layer} to read its talosconfig output from)",
            ExitCode.BAD_INPUT,
        )
    with talosconfig_file(ws, terraform(), cluster_name, None) as path:
        yield path


def etcd_snapshots(ws: Any, cluster_name: str, talosctl: Talosctl, skip_reason: str | None, log: Log) -> Snapshots:
    """Before each control plane's upgrade: a fresh verified etcd snapshot through another control plane (the one
    being upgraded last), kept in etcd-snapshots/<site>/<cluster>/ (ADR 0030); none is a BACKUP_FAILED stop unless
    the operator gave a reason (--no-snapshot REASON), which is printed instead."""
    from typing import TextIO, cast

    from terravixens.operations.console import Console
    from terravixens.operations.etcd import SnapshotPolicy, control_plane_addresses, fresh_snapshot

    console = Console(out=cast(TextIO, _Lines(log)))
    policy = SnapshotPolicy(skip_reason=skip_reason)

    def take(step: Step) -> object:
        return fresh_snapshot(
            ws, cluster_name, talosctl, console, f"the upgrade of {step.node}", policy, avoid=[step.node]
        )

    alone = len(control_plane_addresses(ws, cluster_name)) == 1
    return Snapshots(take, skip_reason, alone)


def command(
    site: Site,
    cluster_name: str,
    talosctl: Talosctl,
    *,
    kubernetes: bool = False,
    dry_run: bool = False,
    worker_batch: int = 1,
    force: bool = False,
    no_snapshot: str | None = None,
    talosconfig: str | None = None,
    terraform: Callable[[], Any] | None = None,
    root: Path | None = None,
    log: Log = print,
    as_json: bool = False,
) -> int:
    """`terravixens upgrade`: the dry run or the upgrade itself; returns the exit code. `talosctl`'s own talosconfig
    is replaced by the one `talosconfig_path` finds; `terraform()` gives the Terraform that reads the platform layer's
    output, called only when that is needed; snapshots go under `root` (default: the current folder, like every
    operation's). Sets umask 077 for the process, as the operations do."""
    if as_json and (kubernetes or not dry_run):
        print("terravixens upgrade: --json goes with --dry-run (without --kubernetes)", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if dry_run and kubernetes:
        for line in describe_kubernetes(site, cluster_name):
            log(line)
        return ExitCode.OK
    from terravixens.operations.files import private_process
    from terravixens.operations.terraform import Terraform
    from terravixens.operations.workspace import Workspace

    private_process()  # a talosconfig and etcd snapshots are written: 0600 files in 0700 folders
    ws = Workspace(site, root=root or Path.cwd())
    try:
        with talosconfig_path(ws, terraform or Terraform, cluster_name, talosconfig) as path:
            talosctl = replace(talosctl, talosconfig=path)
            if kubernetes:
                return kubernetes_upgrade(site, cluster_name, talosctl, log=log).exit_code
            if as_json:  # the plan's lines go to stderr as they are decided; stdout holds the document only
                from terravixens.output import render

                def aside(line: str) -> None:
                    print(line, file=sys.stderr, flush=True)

                snapshots = etcd_snapshots(ws, cluster_name, talosctl, no_snapshot, aside)
                report = dry_run_report(
                    site, cluster_name, talosctl, worker_batch=worker_batch, force=force, snapshots=snapshots, log=aside
                )
                return render(report, True, sys.stdout, sys.stderr)
            snapshots = etcd_snapshots(ws, cluster_name, talosctl, no_snapshot, log)
            run = rolling_dry_run if dry_run else rolling_upgrade
            return run(
                site, cluster_name, talosctl, worker_batch=worker_batch, force=force, snapshots=snapshots, log=log
            ).exit_code
    except OperationError as error:
        print(f"terravixens upgrade: {error}", file=sys.stderr)
        return error.code
