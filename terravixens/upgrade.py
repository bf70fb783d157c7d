"""Rolling Talos upgrades that cannot make things worse: gated on cluster health, bounded in time, resumable.

Terraform has no notion of "one at a time", so after a `talos_version` bump (ADR 0009: the new installer image is
already in every node's configuration, no VM was replaced) the operating system is upgraded here (ADR 0015):

1. `talosctl health` over the whole cluster must pass before anything is touched: a cluster that is already
   unhealthy never gets one more node rebooted;
2. every node's running version is read first: an unreachable node stops the run, and a node newer than the
   target (a downgrade) or more than one minor behind it (1.11 -> 1.13: Talos upgrades one minor at a time,
   ADR 0023) refuses it unless forced — before any node is touched;
3. control planes one at a time (by name), then workers in batches of `worker_batch` (by name, default 1), each
   with `talosctl upgrade --wait`; after each node or batch, what each node runs is read back (its version AND the
   image it booted, see below) and must be the target — a node that came back on its old version (Talos' A/B
   fallback after a failed boot) stops the run, named — then the health gate must pass again. Nodes already on the
   target (version and image) are skipped, and a health check follows skipped nodes before the next upgrade (and at
   the end), so a stopped run is resumed by running it again;
4. every talosctl call has a deadline; a failed, hung or missing talosctl ends the run with
   "stopped at X: why; done: …; not touched: …" — never a traceback. An interrupt (Ctrl-C, SIGTERM, SIGHUP)
   stops talosctl and says the same in one line.

What a node runs is read with `talosctl version` (the server's Tag) and `talosctl get extensions` (the Image
Factory's `schematic` extension: its version is the schematic id of the image the node booted — the running image,
where machine.install.image only says what a future install would use). Whatever Tag talosctl prints is either
understood as a release (`v1.11.6`, `1.11.6`, `v1.12.0-beta.1`, `v1.11.6+custom`) or stops the run naming the node
(`v1.11`: no patch, so not comparable with the target; anything else).
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
from terravixens.runner import annotate
from terravixens.talos.image import installer_image, schematic_id
from terravixens.talosctl import Call, Talosctl, schematic, server_tag

IDENTIFIER = r"[0-9A-Za-z-]+"
DOTTED = rf"{IDENTIFIER}(?:\.{IDENTIFIER})*"
RELEASE = re.compile(rf"^v?(\d+)\.(\d+)\.(\d+)(?:-({DOTTED}))?(?:\+({DOTTED}))?$")
NO_PATCH = re.compile(r"^v?\d+\.\d+$")
# Exit codes of `terravixens upgrade`: the one table (terravixens.exitcodes). The EXIT_* names are aliases kept for
# code written before it.
EXIT_OK, EXIT_STOPPED, EXIT_INPUT, EXIT_REFUSED = ExitCode.OK, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.REFUSED
Log = Callable[[str], None]
RESUME = (
    "an upgrade Talos already started goes on inside the node: run the same command again to check health and resume"
)


@dataclass(frozen=True)
class Step:
    node: str
    role: Role
    address: str
    image: str
    schematic: str = ""


@dataclass(frozen=True)
class TalosVersion:
    """A Talos release as talosctl prints it, ordered as semantic versions: pre-releases before the release
    (v1.12.0-beta.1 < v1.12.0), their dot-separated parts numerically where numeric (beta.2 < beta.10); build
    metadata (`+custom`) does not order, but a build is not the release it is built from (see `same`)."""

    text: str
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: str = ""

    @property
    def key(self) -> tuple:
        pre = tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in self.pre)
        return self.major, self.minor, self.patch, (0, pre) if self.pre else (1, ())

    def same(self, other: "TalosVersion") -> bool:
        """The same release and build (`1.11.6` is `v1.11.6`; `v1.11.6+custom` is not)."""
        return self.key == other.key and self.build == other.build

    def __str__(self) -> str:
        return self.text


def parse_version(text: str) -> TalosVersion | str:
    """The version, or why it is not one (a value: the caller stops naming the node)."""
    found = RELEASE.match(text.strip())
    if found:
        major, minor, patch, pre, build = found.groups()
        return TalosVersion(
            text.strip(), int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else (), build or ""
        )
    if NO_PATCH.match(text.strip()):
        return f"{text.strip()!r} has no patch number: it cannot be compared with a release like v1.11.6"
    shown = text.strip()[:60] or "nothing"
    return f"{shown!r} is not a Talos version like v1.11.6"


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
        return (
            f"stopped at {self.stopped_at}: {self.reason}; done: {_names(self.done)}; "
            f"not touched: {_names(self.not_touched)}"
        )


def upgrade_plan(site: Site, cluster_name: str) -> list[Step]:
    """Control planes first, then workers, each group by name: never by position in the site file."""
    cluster = site.clusters[cluster_name]
    placed = placed_nodes(site, cluster_name)
    return [
        Step(
            node.name,
            node.role,
            node.address,
            installer_image(node.hypervisor.talos_image, cluster.talos_version),
            schematic_id(node.hypervisor.talos_image),
        )
        for role in Role
        for node in placed.values()
        if node.role is role
    ]


def release(version: str) -> tuple:
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


@dataclass(frozen=True)
class Running:
    """What a node runs: its version and the schematic id of the image it booted (None: not a factory image)."""

    version: TalosVersion
    schematic: str | None

    def describe(self) -> str:
        return f"{self.version} (schematic {self.schematic[:12] if self.schematic else 'none'})"


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
    if not after.version.same(target):
        if after.version.same(before.version):
            return (
                f"{step.node} still runs {after.version} after talosctl upgrade --wait returned: Talos rolled "
                f"back to its previous image (A/B fallback after a failed boot); look at its console or "
                f"`talosctl dmesg`, fix the cause and run the same command again"
            )
        return f"{step.node} runs {after.version} after its upgrade, not the target {target}"
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


def _groups(steps: list[Step], current: set[str], worker_batch: int) -> Iterator[tuple[str, list[Step]]]:
    """("skip", [step]) for a node on the target (`current`), ("upgrade", [steps]) for the next node or batch: each
    control plane alone, workers `worker_batch` at a time, both in name order."""
    batch: list[Step] = []
    for step in steps:
        if step.node in current:
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


def rolling_upgrade(
    site: Site,
    cluster_name: str,
    talosctl: Talosctl,
    *,
    worker_batch: int = 1,
    force: bool = False,
    target: str | None = None,
    log: Log = print,
) -> Outcome:
    target_text = target or site.clusters[cluster_name].talos_version
    steps = upgrade_plan(site, cluster_name)
    upgraded: list[str] = []
    skipped: list[str] = []
    done: list[str] = []
    doing = {"what": "the health check before the first node", "nodes": []}

    def stop(at: list[Step], reason: str, touched: bool) -> Outcome:
        at_names = [s.node for s in at]
        left = [s.node for s in steps if s.node not in done and (not touched or s.node not in at_names)]
        outcome = Outcome(upgraded, skipped, ", ".join(at_names), reason, done, left)
        log(outcome.summary())
        return outcome

    def refuse(reason: str) -> Outcome:
        outcome = Outcome([], [], None, reason, [], [s.node for s in steps], refused=True)
        log(outcome.summary())
        return outcome

    parsed_target = parse_version(target_text)
    if isinstance(parsed_target, str):
        return stop(steps[:1], f"the target talos_version {parsed_target}", False)
    try:
        return _rolling(
            steps, talosctl, parsed_target, worker_batch, force, log, stop, refuse, upgraded, skipped, done, doing
        )
    except KeyboardInterrupt as error:
        touched = [n for n in doing["nodes"] if n not in done]
        left = [s.node for s in steps if s.node not in done and s.node not in touched]
        annotate(
            error,
            where=f"during {doing['what']}",
            summary=f"done: {_names(done)}; not touched: {_names(left)}" + (f"; {RESUME}" if touched else ""),
        )
        raise


def _rolling(
    steps: list[Step],
    talosctl: Talosctl,
    target: TalosVersion,
    worker_batch: int,
    force: bool,
    log: Log,
    stop,
    refuse,
    upgraded: list[str],
    skipped: list[str],
    done: list[str],
    doing: dict,
) -> Outcome:
    before = _health(talosctl, steps)
    if not before.ok:
        return stop(steps[:1], f"health check before the first node failed ({before.reason})", False)
    log("cluster healthy before the first node")

    current: dict[str, Running] = {}
    for step in steps:
        doing["what"] = f"reading what {step.node} runs"
        running = read_running(talosctl, step)
        if isinstance(running, str):
            return stop([step], running, False)
        current[step.node] = running
    newer = [s for s in steps if current[s.node].version.key > target.key]
    if newer and not force:
        running_text = ", ".join(f"{s.node} runs {current[s.node].version}" for s in newer)
        return refuse(
            f"{running_text}, newer than the target {target}: that is a downgrade. Set talos_version to "
            f"the version the nodes run, or pass --force to downgrade"
        )
    behind = [s for s in steps if skips_a_minor(current[s.node].version, target)]
    if behind and not force:
        running_text = ", ".join(f"{s.node} runs {current[s.node].version}" for s in behind)
        return refuse(
            f"{running_text}, more than one minor behind the target {target}: Talos upgrades one minor at "
            f"a time. Set talos_version to the newest patch of the next minor, run the upgrade, then go "
            f"on; or pass --force"
        )

    already = {step.node for step in steps if on_target(current[step.node], target, step)}
    unchecked_skips: list[str] = []
    for kind, group in _groups(steps, already, worker_batch):
        names = ", ".join(s.node for s in group)
        if kind == "skip":
            [step] = group
            skipped.append(step.node)
            done.append(step.node)
            unchecked_skips.append(step.node)
            log(f"{step.node} ({step.role}, {step.address}): already {target}")
            continue
        if unchecked_skips:
            doing.update(what=f"the health check after skipping {_names(unchecked_skips)}", nodes=[])
            gate = _health(talosctl, steps)
            if not gate.ok:
                return stop(
                    group, f"health check after skipping {_names(unchecked_skips)} failed ({gate.reason})", False
                )
            unchecked_skips = []
        for step in group:
            was = current[step.node]
            shown = str(was.version) if was.schematic == step.schematic else was.describe()
            log(f"{step.node} ({step.role}, {step.address}): {shown} -> {target}")
        doing.update(what=f"talosctl upgrade of {names}", nodes=[s.node for s in group])
        with ThreadPoolExecutor(max_workers=len(group)) as pool:
            answers = list(pool.map(lambda s: talosctl.upgrade(s.address, s.image), group))
        failed = [(step, answer.reason) for step, answer in zip(group, answers) if not answer.ok]
        if failed:
            for step, answer in zip(group, answers):
                if answer.ok:
                    upgraded.append(step.node)
                    done.append(step.node)
            why = "; ".join(f"on {step.node}: {reason}" for step, reason in failed)
            return stop([step for step, _ in failed], f"talosctl upgrade failed ({why})", True)
        doing["what"] = f"reading back what {names} run"
        wrong: list[tuple[Step, str]] = []
        for step in group:
            after = read_running(talosctl, step)
            if isinstance(after, str):
                wrong.append((step, f"{step.node}: {after} after its upgrade"))
            elif not on_target(after, target, step):
                wrong.append((step, not_on_target(step, current[step.node], after, target)))
            else:
                upgraded.append(step.node)
                done.append(step.node)
        if wrong:
            return stop(
                [step for step, _ in wrong],
                f"not on the target after its upgrade ({'; '.join(why for _, why in wrong)})",
                True,
            )
        doing["what"] = f"the health check after upgrading {names}"
        gate = _health(talosctl, steps)
        if not gate.ok:
            return stop(group, f"health check after upgrading {names} failed ({gate.reason})", True)
        log(f"{names}: upgraded to {target} (read back: version and image), cluster healthy")
    if unchecked_skips:
        doing.update(what=f"the health check after skipping {_names(unchecked_skips)}", nodes=[])
        gate = _health(talosctl, steps)
        if not gate.ok:
            return stop(
                steps[-1:], f"health check after skipping {_names(unchecked_skips)} failed ({gate.reason})", True
            )
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


# ---------------------------------------------------------------------------------------------------------- dry run
def describe_rolling(site: Site, cluster_name: str, worker_batch: int = 1) -> list[str]:
    """What a rolling upgrade does, without contacting anything (which nodes are current is only known then)."""
    steps = upgrade_plan(site, cluster_name)
    target = site.clusters[cluster_name].talos_version
    lines = ["0. talosctl health: the cluster must be healthy before the first node"]
    groups = list(_groups(steps, set(), worker_batch))
    for number, (_, group) in enumerate(groups, 1):
        entries = [f"{s.node} ({s.role}, {s.address}) -> {s.image}" for s in group]
        lines.append(f"{number}. {entries[0]}")
        lines += [f"   {entry}" for entry in entries[1:]]
        lines[-1] += (", together" if len(group) > 1 else "") + ", then talosctl health"
    lines.append(
        f"nodes already on {target} are skipped (talosctl health follows them); a node newer than "
        f"{target}, or more than one minor behind it, refuses the run unless --force"
    )
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


def command(
    site: Site,
    cluster_name: str,
    talosctl: Talosctl,
    *,
    kubernetes: bool = False,
    dry_run: bool = False,
    worker_batch: int = 1,
    force: bool = False,
    log: Log = print,
) -> int:
    """`terravixens upgrade`: the dry-run text or the upgrade itself; returns the exit code."""
    if dry_run:
        for line in (
            describe_kubernetes(site, cluster_name)
            if kubernetes
            else describe_rolling(site, cluster_name, worker_batch)
        ):
            log(line)
        return ExitCode.OK
    if kubernetes:
        return kubernetes_upgrade(site, cluster_name, talosctl, log=log).exit_code
    return rolling_upgrade(site, cluster_name, talosctl, worker_batch=worker_batch, force=force, log=log).exit_code
