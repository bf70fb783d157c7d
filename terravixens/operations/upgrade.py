"""`terravixens upgrade CLUSTER`: rolling Talos upgrades and image roll-outs that cannot make things worse: gated
on cluster health, backed up, bounded in time, resumable, and planned exactly as they run.

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

The plan (steps 3 and 4: which node, why, in which unit, in which order) is a value computed from what the nodes run
(terravixens.talos.rolling, pure): `--dry-run` reads the nodes (read-only calls: `talosctl version`, `talosctl get
extensions`) and prints it, and the run prints each numbered line of the same plan as it starts that unit — the two
are compared in the tests.

What a node runs is read with `talosctl version` (the server's Tag) and `talosctl get extensions` (the Image
Factory's `schematic` extension: its version is the schematic id of the image the node booted — the running image,
where machine.install.image only says what a future install would use). Whatever Tag talosctl prints is either
understood as a release (`v1.11.6`, `1.11.6`, `v1.12.0-beta.1`, `v1.11.6+custom`) or stops the run naming the node
(`v1.11`: no patch, so not comparable with the target; anything else).

An operation like the others: its lines go through the console, the nodes done and not done yet are its journal's
units, and the talosctl client configuration is chosen once (`talosconfig_path`), before talosctl is built.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from terravixens.arguments import Definition, batch, duration, json_option, no_snapshot_option, site_option
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode, codes
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy, control_plane_addresses, fresh_snapshot, talosconfig_file
from terravixens.operations.journal import Journal
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.output import render
from terravixens.roles import Role
from terravixens.runner import annotate
from terravixens.talos.rolling import (
    HEALTH_FIRST,
    Decision,
    Running,
    Step,
    Unit,
    describe_kubernetes,
    listed,
    not_on_target,
    on_target,
    refusal,
    schedule,
    short,
    target_lines,
    unit_lines,
    upgrade_plan,
)
from terravixens.talos_versions import TalosVersion, parse_version
from terravixens.talosctl import Call, Talosctl, schematic, server_tag

Log = Callable[[str], None]
RESUME = (
    "an upgrade Talos already started goes on inside the node: run the same command again to check health and resume"
)
# The talosctl client configuration upgrade used before it could read the platform layer's: still taken when present.
LOCAL_TALOSCONFIG = "talosconfig"
UPGRADE_TIMEOUT = "15m"  # each talosctl call's deadline: an upgrade with --wait reboots the node


@dataclass
class Outcome:
    """One run (the roll-out, its dry run, or --kubernetes), recorded as it goes and returned when it ends.

    Its journal (the console's: terravixens.operations.journal) holds the nodes done, in the order they were, and the
    nodes not done yet; this record adds how each done node was handled (upgraded or skipped), where the run is and
    which nodes it is touching (for the interrupt's line), and how it ended: a stop (where, why, and its `code`:
    FAILED, or BACKUP_FAILED when no etcd snapshot could be taken before a control plane; `not_touched`: the nodes
    this run never acted on), a refusal (nothing touched), or done. Each end is said in one line through `log`."""

    journal: Journal = field(default_factory=Journal)
    log: Log = field(default=print, repr=False, compare=False)
    upgraded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stopped_at: str | None = None
    reason: str = ""
    not_touched: list[str] = field(default_factory=list)
    refused: bool = False
    code: ExitCode = ExitCode.FAILED
    what: str = "the health check before the first node"
    touching: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, steps: list[Step], log: Log, journal: Journal | None = None, what: str | None = None) -> Outcome:
        """A run of `steps`: every node not done yet, in the plan's order."""
        outcome = cls(journal if journal is not None else Journal(), log)
        outcome.journal.expect(*[step.node for step in steps])
        if what is not None:
            outcome.what = what
        return outcome

    @property
    def done(self) -> list[str]:
        return list(self.journal.done)

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
            return f"upgraded: {listed(self.upgraded)}; already current: {listed(self.skipped)}"
        return (
            f"stopped at {self.stopped_at}: {self.reason}; done: {listed(self.done)}; "
            f"not touched: {listed(self.not_touched)}"
        )

    def doing(self, what: str, touching: list[str] | None = None) -> None:
        self.what, self.touching = what, touching or []

    def did(self, steps: list[Step], upgraded: bool) -> None:
        nodes = [step.node for step in steps]
        (self.upgraded if upgraded else self.skipped).extend(nodes)
        self.journal.did(*nodes)

    def stop(self, at: list[Step], reason: str, touched: bool, code: ExitCode = ExitCode.FAILED) -> Outcome:
        """Stopped at `at` (`touched`: acted on, so neither done nor untouched) for `reason`."""
        names = [step.node for step in at]
        left = [node for node in self.journal.pending if not touched or node not in names]
        return self.ended(", ".join(names), reason, left, code)

    def ended(self, at: str, reason: str, not_touched: list[str], code: ExitCode = ExitCode.FAILED) -> Outcome:
        self.stopped_at, self.reason, self.not_touched, self.code = at, reason, not_touched, code
        self.log(self.summary())
        return self

    def refuse(self, reason: str) -> Outcome:
        self.refused, self.reason, self.not_touched = True, reason, list(self.journal.pending)
        self.log(self.summary())
        return self

    def interrupted(self, error: BaseException) -> None:
        """The interrupt's line (terravixens.runner.annotate): where the run was, what is done and not touched, and
        that an upgrade Talos already started goes on when it was touching a node."""
        touched = [node for node in self.touching if node not in self.journal.done]
        left = [node for node in self.journal.pending if node not in touched]
        annotate(
            error,
            where=f"during {self.what}",
            summary=f"done: {listed(self.done)}; not touched: {listed(left)}" + (f"; {RESUME}" if touched else ""),
        )


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


def _health(talosctl: Talosctl, steps: list[Step]) -> Call:
    return talosctl.health(
        [s.address for s in steps if s.role == Role.CONTROLPLANE], [s.address for s in steps if s.role == Role.WORKER]
    )


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


def _described(snapshots: Snapshots | None) -> str | None:
    return snapshots.describe() if snapshots is not None else None


# ---------------------------------------------------------------------------------------------------------- the run
def survey(
    steps: list[Step], talosctl: Talosctl, target: TalosVersion, force: bool, outcome: Outcome
) -> list[Decision] | Outcome:
    """Reads what every node runs (read-only calls), prints it, and decides per node; the Outcome when the run stops
    (a node that cannot be read) or is refused — before anything is touched. Shared by the run and --dry-run."""
    current: dict[str, Running] = {}
    for step in steps:
        outcome.doing(f"reading what {step.node} runs")
        running = read_running(talosctl, step)
        if isinstance(running, str):
            return outcome.stop([step], running, False)
        current[step.node] = running
    outcome.log("what the nodes run (talosctl version, talosctl get extensions):")
    for step in steps:
        outcome.log(f"   {step.label}: {current[step.node].describe()}")
    refused = refusal(steps, current, target)
    if refused is not None and not force:
        return outcome.refuse(refused)
    for line in target_lines(steps, target):
        outcome.log(line)
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
    journal: Journal | None = None,
) -> Outcome:
    """The roll-out (see the module's docstring). `snapshots`: the etcd snapshot before each control plane
    (`terravixens upgrade` always gives one; None only for callers that back etcd up themselves); `journal`: the
    console's (a fresh one without)."""
    target_text = target or site.clusters[cluster_name].talos_version
    steps = upgrade_plan(site, cluster_name)
    outcome = Outcome.of(steps, log, journal)
    parsed_target = parse_version(target_text)
    if isinstance(parsed_target, str):
        return outcome.stop(steps[:1], f"the target talos_version {parsed_target}", False)
    try:
        return _rolling(steps, talosctl, parsed_target, worker_batch, force, snapshots, outcome)
    except KeyboardInterrupt as error:
        outcome.interrupted(error)
        raise


def _rolling(
    steps: list[Step],
    talosctl: Talosctl,
    target: TalosVersion,
    worker_batch: int,
    force: bool,
    snapshots: Snapshots | None,
    outcome: Outcome,
) -> Outcome:
    log = outcome.log
    log(HEALTH_FIRST)
    before = _health(talosctl, steps)
    if not before.ok:
        return outcome.stop(steps[:1], f"health check before the first node failed ({before.reason})", False)
    log("   cluster healthy")
    decisions = survey(steps, talosctl, target, force, outcome)
    if isinstance(decisions, Outcome):
        return decisions
    units = schedule(decisions, worker_batch)
    for number, unit in enumerate(units, 1):
        for line in unit_lines(number, unit, _described(snapshots)):
            log(line)
        group = unit.steps
        if unit.kind == "skip":
            outcome.did(group, upgraded=False)
            continue
        if unit.kind == "health":
            outcome.doing(f"the health check after skipping {listed(list(unit.after))}")
            gate = _health(talosctl, steps)
            if not gate.ok:
                # before the next upgrade, that node (or batch) is where it stopped; at the end, the last node
                following = next((u.steps for u in units[number:] if u.kind == "upgrade"), [])
                at, touched = (following, False) if following else (steps[-1:], True)
                why = f"health check after skipping {listed(list(unit.after))} failed ({gate.reason})"
                return outcome.stop(at, why, touched)
            log("   cluster healthy")
            continue
        stopped = _upgrade_unit(unit, steps, talosctl, target, snapshots, outcome)
        if stopped is not None:
            return stopped
    outcome.log(outcome.summary())
    return outcome


def _upgrade_unit(
    unit: Unit,
    steps: list[Step],
    talosctl: Talosctl,
    target: TalosVersion,
    snapshots: Snapshots | None,
    outcome: Outcome,
) -> Outcome | None:
    """One control plane (after its etcd snapshot) or one batch of workers: `talosctl upgrade --wait`, read back,
    the health gate. The Outcome when the run stops there."""
    group = unit.steps
    if group[0].role == Role.CONTROLPLANE and snapshots is not None:
        outcome.doing(f"the etcd snapshot before the upgrade of {unit.names}")
        try:
            snapshots.take(group[0])
        except OperationError as error:
            return outcome.stop(group, str(error), False, error.code)
    outcome.doing(f"talosctl upgrade of {unit.names}", [s.node for s in group])
    with ThreadPoolExecutor(max_workers=len(group)) as pool:
        answers = list(pool.map(lambda s: talosctl.upgrade(s.address, s.image), group))
    failed = [(step, answer.reason) for step, answer in zip(group, answers, strict=True) if not answer.ok]
    if failed:
        outcome.did([step for step, answer in zip(group, answers, strict=True) if answer.ok], upgraded=True)
        why = "; ".join(f"on {step.node}: {reason}" for step, reason in failed)
        return outcome.stop([step for step, _ in failed], f"talosctl upgrade failed ({why})", True)
    outcome.doing(f"reading back what {unit.names} run", [s.node for s in group])
    wrong: list[tuple[Step, str]] = []
    for decision in unit.decisions:
        step = decision.step
        after = read_running(talosctl, step)
        if isinstance(after, str):
            wrong.append((step, f"{step.node}: {after} after its upgrade"))
        elif not on_target(after, target, step):
            wrong.append((step, not_on_target(step, decision.running, after, target)))
        else:
            outcome.did([step], upgraded=True)
    if wrong:
        return outcome.stop(
            [step for step, _ in wrong],
            f"not on the target after its upgrade ({'; '.join(why for _, why in wrong)})",
            True,
        )
    outcome.doing(f"the health check after upgrading {unit.names}")
    gate = _health(talosctl, steps)
    if not gate.ok:
        return outcome.stop(group, f"health check after upgrading {unit.names} failed ({gate.reason})", True)
    if len({s.schematic for s in group}) == 1:
        image = f"schematic {short(group[0].schematic)}"
    else:
        image = "schematics " + ", ".join(f"{short(s.schematic)} ({s.node})" for s in group)
    outcome.log(f"   {unit.names}: upgraded to {target}, {image} (read back: version and schematic), cluster healthy")
    return None


# ---------------------------------------------------------------------------------------------------------- dry run
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
    journal: Journal | None = None,
) -> DryRun:
    """rolling_dry_run's work, returned as a DryRun (each line is also given to `log` as it is decided)."""
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        log(line)

    steps = upgrade_plan(site, cluster_name)
    outcome = Outcome.of(steps, say, journal, what="the dry run")
    wanted = site.clusters[cluster_name].talos_version
    target = parse_version(wanted)
    if isinstance(target, str):
        stopped = outcome.stop(steps[:1], f"the target talos_version {target}", False)
        return DryRun(cluster_name, wanted, stopped, text=tuple(said))
    try:
        decisions = survey(steps, talosctl, target, force, outcome)
    except KeyboardInterrupt as error:
        annotate(error, where=f"during {outcome.what} (--dry-run)", summary="nothing was changed")
        raise
    if isinstance(decisions, Outcome):
        return DryRun(cluster_name, str(target), decisions, text=tuple(said))
    say(HEALTH_FIRST)
    units = schedule(decisions, worker_batch)
    for number, unit in enumerate(units, 1):
        for line in unit_lines(number, unit, _described(snapshots)):
            say(line)
    current = [d.step.node for d in decisions if d.current]
    say(
        f"dry run: nothing was changed ({len(decisions) - len(current)} to upgrade, {len(current)} already "
        f"current); the run reads every node again first and follows this plan while they run what is shown above"
    )
    outcome.skipped = current  # would be: the dry run itself did nothing
    return DryRun(cluster_name, str(target), outcome, tuple(decisions), tuple(units), tuple(said))


# ---------------------------------------------------------------------------------------------------------- kubernetes
def kubernetes_upgrade(
    site: Site, cluster_name: str, talosctl: Talosctl, log: Log = print, journal: Journal | None = None
) -> Outcome:
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
    outcome = Outcome.of(steps, log, journal)

    def stop(reason: str, touched: bool) -> Outcome:
        return outcome.ended(first.node, reason, [] if touched else everyone)

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
    outcome.did(steps, upgraded=True)
    log(f"kubernetes {target} on {listed(everyone)}, cluster healthy")
    return outcome


# ---------------------------------------------------------------------------------------------------------- operation
@contextlib.contextmanager
def talosconfig_path(ws: Workspace, tf: Terraform, cluster_name: str, given: str | None) -> Iterator[str]:
    """The talosctl client configuration, chosen once: `--talosconfig FILE` when given; else ./talosconfig when
    there is one (upgrade's default before it could read the platform layer's); else the platform layer's
    `talosconfig` output, written 0600 into a 0700 temporary folder removed afterwards
    (terravixens.operations.etcd.talosconfig_file) — read from the layer's working directory a deploy from this
    folder left (no synth, no init: the upgrade does not plan or apply anything)."""
    if given:
        yield given
        return
    if Path(LOCAL_TALOSCONFIG).is_file():  # relative to the current folder, as talosctl reads it
        yield LOCAL_TALOSCONFIG
        return
    layer = ws.platform_layer(cluster_name).name
    if not ws.stack_dir(layer).is_dir():
        raise OperationError(
            f"no talosconfig: none given (--talosconfig FILE), no ./{LOCAL_TALOSCONFIG} here, and {layer} was not "
            f"deployed from this folder (no cdktf.out/stacks/{layer} to read its talosconfig output from)",
            ExitCode.BAD_INPUT,
        )
    with talosconfig_file(ws, tf, cluster_name, None) as path:
        yield path


def etcd_snapshots(
    ws: Workspace, cluster_name: str, talosctl: Talosctl, skip_reason: str | None, console: Console
) -> Snapshots:
    """Before each control plane's upgrade: a fresh verified etcd snapshot through another control plane (the one
    being upgraded last), kept in etcd-snapshots/<site>/<cluster>/ (ADR 0030); none is a BACKUP_FAILED stop unless
    the operator gave a reason (--no-snapshot REASON), which is printed instead."""
    policy = SnapshotPolicy(skip_reason=skip_reason)

    def take(step: Step) -> object:
        return fresh_snapshot(
            ws, cluster_name, talosctl, console, f"the upgrade of {step.node}", policy, avoid=[step.node]
        )

    alone = len(control_plane_addresses(ws, cluster_name)) == 1
    return Snapshots(take, skip_reason, alone)


@dataclass(frozen=True)
class UpgradeOptions:
    """`talosctl`: the binary (it should match the target version); `timeout`: each talosctl call's deadline, in
    seconds; `talosconfig`: the operator's file (None: see talosconfig_path); `kubernetes`: upgrade-k8s instead of
    Talos; `dry_run`: read and print the plan, change nothing; `json`: the dry run's document on stdout;
    `no_snapshot`: the operator's reason to go without the etcd snapshots."""

    talosctl: str = "talosctl"
    timeout: int = 15 * 60
    talosconfig: str | None = None
    kubernetes: bool = False
    dry_run: bool = False
    worker_batch: int = 1
    force: bool = False
    no_snapshot: str | None = None
    json: bool = False


def upgrade(ws: Workspace, cluster_name: str, tf: Terraform, options: UpgradeOptions, console: Console) -> int:
    """`terravixens upgrade`: the dry run or the upgrade itself (of Talos, or --kubernetes); returns the exit code.
    `tf` reads the platform layer's talosconfig output, only when no other talosconfig is there; etcd snapshots go
    under the workspace's root."""
    if options.json and (options.kubernetes or not options.dry_run):
        raise OperationError("--json goes with --dry-run (without --kubernetes)", ExitCode.BAD_INPUT)
    site = ws.site
    if options.dry_run and options.kubernetes:
        for line in describe_kubernetes(site, cluster_name):
            console.say(line)
        return ExitCode.OK
    with talosconfig_path(ws, tf, cluster_name, options.talosconfig) as path:
        talosctl = Talosctl(options.talosctl, path, options.timeout)
        if options.kubernetes:
            return kubernetes_upgrade(site, cluster_name, talosctl, console.say, console.journal).exit_code
        snapshots = etcd_snapshots(ws, cluster_name, talosctl, options.no_snapshot, console)
        batch, force = options.worker_batch, options.force
        if options.dry_run:
            report = dry_run_report(
                site,
                cluster_name,
                talosctl,
                worker_batch=batch,
                force=force,
                snapshots=snapshots,
                log=console.say,  # with --json the console is stderr: stdout holds the document only
                journal=console.journal,
            )
            return render(report, True) if options.json else report.exit_code
        return rolling_upgrade(
            site,
            cluster_name,
            talosctl,
            worker_batch=batch,
            force=force,
            snapshots=snapshots,
            log=console.say,
            journal=console.journal,
        ).exit_code


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster")
    site_option(parser)
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
        type=batch,
        default=1,
        metavar="N",
        help="upgrade workers N at a time, each batch gated on health (control planes: always one)",
    )
    parser.add_argument(
        "--timeout",
        type=duration,
        default=UPGRADE_TIMEOUT,
        help="deadline of each talosctl call, e.g. 90s, 15m, 1h (default 15m)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a downgrade (a node newer than talos_version), skipping a Talos minor, or re-imaging a node "
        "not booted from an Image Factory image",
    )
    no_snapshot_option(parser, "before each control plane's upgrade")
    json_option(parser, " with --dry-run (terravixens/upgrade-dry-run/v1: each node's action, the units in order)")


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    # An interrupt (Ctrl-C, SIGTERM, SIGHUP) reaches the command line annotated by the run with what is done and not.
    if args.cluster not in ws.site.clusters:
        print(f"unknown cluster {args.cluster!r}: use one of {', '.join(sorted(ws.site.clusters))}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    options = UpgradeOptions(
        talosctl=args.talosctl,
        timeout=args.timeout,
        talosconfig=args.talosconfig,
        kubernetes=args.kubernetes,
        dry_run=args.dry_run,
        worker_batch=args.worker_batch,
        force=args.force,
        no_snapshot=args.no_snapshot,
        json=args.json,
    )
    return upgrade(ws, args.cluster, tf, options, console)


UPGRADE = Definition(
    arguments,
    command,
    codes(
        (
            ExitCode.OK,
            (
                "every node on the target version and schematic (read back), cluster healthy; with --dry-run: the "
                "plan is printed"
            ),
        ),
        (
            ExitCode.REFUSED,
            (
                "a downgrade, a skipped Talos minor, or a node not booted from an Image Factory image, without "
                "--force: no node touched"
            ),
        ),
        (ExitCode.BAD_INPUT, "site file, unknown cluster, bad option, no talosconfig"),
        (
            ExitCode.FAILED,
            (
                "a talosctl call failed, hung or is missing, a node is not on the target version and "
                "schematic after its upgrade (rolled back), a version talosctl printed cannot be understood, "
                "or the cluster is unhealthy: the last line says where, what is done and what is not "
                "touched; run it again once fixed (--dry-run: a node could not be read)"
            ),
        ),
        (
            ExitCode.BACKUP_FAILED,
            (
                "no verified etcd snapshot before a control plane's upgrade (without --no-snapshot REASON): "
                "stopped before that node"
            ),
        ),
        (ExitCode.INTERRUPTED, "an upgrade Talos already started goes on inside the node; run it again"),
    ),
    examples=(
        "terravixens upgrade prod --dry-run",
        "terravixens upgrade prod --dry-run --json",
        "terravixens upgrade prod --worker-batch 2 --kubernetes",
    ),
)


__all__ = [
    "LOCAL_TALOSCONFIG",
    "RESUME",
    "UPGRADE",
    "DryRun",
    "Outcome",
    "Snapshots",
    "UpgradeOptions",
    "arguments",
    "command",
    "dry_run_report",
    "etcd_snapshots",
    "kubernetes_upgrade",
    "read_running",
    "rolling_dry_run",
    "rolling_upgrade",
    "survey",
    "talosconfig_path",
    "upgrade",
]
