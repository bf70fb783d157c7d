"""Sequenced scale-in inside `terravixens deploy` (docs/adr/0037-control-plane-scale-in-sequencing.md).

A platform layer's plan that would take more than one control plane out of etcd in one apply (the site dropped
several: 3 → 1, 5 → 3), that replaces control planes (new ones in the site while old ones leave), or that removes
more workers than `--worker-batch N` is never submitted as it is — the guard (PG002) would refuse the first kind
anyway. Deploy computes a sequence from that plan (the state and the site), shows it, and runs it step by step:

    grow            the new nodes join (control planes: etcd grows first) with the rest of the plan's changes;
                    only when the site adds nodes
    workers         the workers that leave: all in one apply (as a plain deploy does), or N per apply with
                    --worker-batch N
    control plane   one control plane per apply, leaving etcd gracefully (its reset), never the last: etcd goes
                    n, n-1, … down to the site's count, which is odd (rule TV001)

Each step is a deploy of its own: plan with `-target` of what the step changes (the last step plans the whole layer,
so that nothing of the site is left out), the step's plan checked against the step (it takes out exactly the
step's nodes), the guard (the last line of defence: PG002 is never waived on a step), a fresh verified etcd snapshot
through a control plane that stays (steps that change etcd; `--no-snapshot REASON` skips it), a verified state
backup, apply of that saved plan, the Kubernetes Node objects of the nodes that left deleted, `talosctl health` over
the cluster as the step leaves it, and `talosctl etcd members` read back: exactly the control planes the step
expects, none a learner.

Before the first step the cluster as it is must be healthy and etcd must list exactly the state's control planes.
Any failure stops with the journal's one line (done / not done). Running `terravixens deploy` again recomputes the
sequence from what the state still holds: a step that was applied is not in it any more, so none is repeated.

A step module (like terravixens.operations.steps): deploy imports it, it imports no command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from terravixens.catalogue import NODE_APPLY, VMS
from terravixens.config.addressing import node_address
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode
from terravixens.guard import Fate, GuardContext, Plan, node_view, site_roles
from terravixens.guard.nodes import NodeView
from terravixens.layers import PLATFORM, Layer
from terravixens.operations import summary
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy, fresh_snapshot, talosconfig_file
from terravixens.operations.files import remove_quietly
from terravixens.operations.kube import Kubectl, delete_nodes, kubeconfig_of
from terravixens.operations.outcome import OperationError
from terravixens.operations.steps import LayerPlan, apply_saved, confirm, guard_context, judge, left_nodes, make_plan
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.roles import Role
from terravixens.talosctl import Member, Talosctl, members

GROW, WORKERS, CONTROL_PLANE = "grow", "workers", "control plane"
DEFAULT_TIMEOUT = 10 * 60
EACH_STEP = (
    "each step: plan (-target of the step's resources; the last step: the whole layer), the plan checked against "
    "the step, guard, etcd snapshot through a control plane that stays (steps that change etcd), state backup, "
    "apply, Node objects of the nodes that left deleted, talosctl health, etcd members read back"
)
RESUME = "Run `terravixens deploy` again once fixed: it resumes from what the state holds"


@dataclass(frozen=True)
class ScaleInOptions:
    """`--worker-batch N` (None: the workers that leave go in one apply), the snapshot policy (`--no-snapshot
    REASON`), and how talosctl is run: its binary, the talosconfig (None: the platform layer's output, written 0600
    for the run) and the deadline of each call (`talosctl health --wait-timeout`)."""

    worker_batch: int | None = None
    snapshot: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    talosctl: str = "talosctl"
    talosconfig: str | None = None
    timeout: int = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class ClusterNode:
    """A node of the cluster during the sequence: its name (the site's key, the state's logical id), role, hostname
    (its etcd member name and Kubernetes Node name) and the address talosctl reaches it at."""

    name: str
    role: str
    hostname: str
    address: str

    @property
    def control_plane(self) -> bool:
        return self.role == Role.CONTROLPLANE


@dataclass(frozen=True)
class Step:
    """One apply of the sequence. `targets`: the addresses planned with -target (empty: the whole layer, the last
    step); `members_before/after`: etcd's member count before and after it; `rest`: how many other changes of the
    plan it carries (the site's updates, the membership record…)."""

    kind: str
    leaving: tuple[str, ...] = ()
    joining: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    members_before: int = 0
    members_after: int = 0
    rest: int = 0

    @property
    def changes_etcd(self) -> bool:
        return self.members_before != self.members_after

    @property
    def short(self) -> str:
        """'cp-b leaves', 'cp-d, wk-c join', 'wk-a, wk-b leave'."""
        names = ", ".join(self.joining if self.kind == GROW else self.leaving)
        several = len(self.joining if self.kind == GROW else self.leaving) > 1
        return f"{names} {'join' if self.kind == GROW else 'leave'}{'' if several else 's'}"

    @property
    def title(self) -> str:
        """What the step does, in one line: the dry-run prints it, the run announces each step with it."""
        if self.kind == CONTROL_PLANE:
            text = f"control plane {self.short}"
        elif self.kind == WORKERS:
            text = f"worker{'s' if len(self.leaving) > 1 else ''} {self.short}"
        else:
            text = self.short
        if self.changes_etcd:
            text += f" (etcd {self.members_before} → {self.members_after} members)"
        if self.rest:
            text += f", with the rest of the plan ({self.rest} change{'s' if self.rest != 1 else ''})"
        return text


@dataclass(frozen=True)
class ScaleIn:
    """The sequence of one platform layer: why it is sequenced, its steps, and every node it knows (today's members
    and the new ones), so that each step knows the cluster it leaves behind."""

    layer: str
    cluster: str
    why: str
    steps: tuple[Step, ...]
    nodes: Mapping[str, ClusterNode]
    today: tuple[str, ...]  # the running members (names), before the first step
    staying: tuple[str, ...]  # today's control planes the site keeps: talosctl goes through them

    def after(self, index: int) -> list[ClusterNode]:
        """The cluster's nodes once steps[0..index] are applied (index -1: today)."""
        present = set(self.today)
        for step in self.steps[: index + 1]:
            present = (present | set(step.joining)) - set(step.leaving)
        return [self.nodes[name] for name in sorted(present)]

    def through(self) -> list[ClusterNode]:
        return [self.nodes[name] for name in self.staying]


# ------------------------------------------------------------------------------------------------- the sequence
def _names(nodes: Sequence[NodeView]) -> list[str]:
    return [node.name for node in nodes]


def _addresses(node: NodeView) -> list[str]:
    """Every address the plan changes for the node (its VM and its apply, wherever they are), sorted."""
    found = set()
    for event in node.events:
        found.add(event.address)
        if event.again is not None:
            found.add(event.again.address)
    return sorted(found)


def _cluster_node(site: Site, cluster_name: str, node: NodeView, plan: Plan, role: str) -> ClusterNode:
    """Name, role, hostname and address: from the site for a node it lists, else from what the state recorded (the
    membership record's address, the VM's name — TalosNode gives the VM and the Talos hostname the same name)."""
    cluster = site.clusters[cluster_name]
    listed = cluster.nodes().get(node.name)
    if listed is not None:
        _, config = listed
        return ClusterNode(
            node.name, role, config.hostname or node.name, node_address(config.networks, cluster.management_vlan)
        )
    record = plan.membership() or {}
    recorded = {**(record.get("workers") or {}), **(record.get("control_planes") or {})}
    address = recorded.get(node.name)
    if not isinstance(address, str):
        applies = [r for r in plan.prior_of(NODE_APPLY) if r.node == node.name]
        address = str(applies[0].values.get("node") or "") if applies else ""
    vms = [r.values.get("name") for r in plan.prior_of(*VMS) if r.node == node.name]
    hostname = vms[0] if vms and isinstance(vms[0], str) and vms[0] else node.name
    return ClusterNode(node.name, role, hostname, address)


def sequence_of(site: Site, layer: Layer, plan: Plan | None, worker_batch: int | None = None) -> ScaleIn | None:
    """The sequence a platform layer's plan needs, or None when one plain apply is right (no control plane leaves,
    the workers that leave fit in one batch) — or when the plan is the guard's to refuse as it is (a node the site
    keeps losing its machine, no control plane of today staying). A single control plane leaving is a sequence of
    one step: it gets the snapshot and the checks too (it is what is left of a sequence after a stop)."""
    cluster_name = layer.cluster if layer.kind.name == PLATFORM else None  # a cluster's Talos machines
    if cluster_name is None or plan is None:
        return None
    roles = site_roles(site, layer)
    view = node_view(plan, GuardContext(roles=roles))
    nodes = [node for node in view.nodes.values() if node.group == "cluster" and node.layer is None]
    if any(node.fate in (Fate.REPLACED, Fate.MACHINE_LOST) for node in nodes):
        return None  # PG001 judges it: a node the site keeps is never sequenced away
    running = [node for node in nodes if node.member]
    control_planes = [node for node in running if node.counts_as_control_plane]
    leaving_cps = [node for node in control_planes if node.fate == Fate.LEAVING]
    leaving_workers = [node for node in running if not node.counts_as_control_plane and node.fate == Fate.LEAVING]
    new = [node for node in nodes if node.fate == Fate.NEW]
    joining_cps = [node for node in new if roles.get(node.name) == Role.CONTROLPLANE]
    batch = worker_batch or max(len(leaving_workers), 1)
    reasons = []
    if len(leaving_cps) > 1:
        reasons.append(f"{len(leaving_cps)} control planes leave ({', '.join(_names(leaving_cps))}), one per apply")
    elif leaving_cps:  # one (what is left of a sequence, or a replacement): the same snapshot and checks
        reasons.append(f"control plane {leaving_cps[0].name} leaves etcd")
    if leaving_cps and joining_cps:
        reasons.append(
            f"control plane{'s' if len(joining_cps) > 1 else ''} {', '.join(_names(joining_cps))} "
            f"join{'' if len(joining_cps) > 1 else 's'} before {', '.join(_names(leaving_cps))} "
            f"leave{'' if len(leaving_cps) > 1 else 's'}"
        )
    if len(leaving_workers) > batch:
        reasons.append(f"{len(leaving_workers)} workers leave, {batch} per apply (--worker-batch)")
    if not reasons or len(leaving_cps) == len(control_planes):
        return None  # one apply is right; or no control plane of today stays: PG003's to refuse

    leaving = {node.name for node in leaving_cps + leaving_workers}
    held = {address for node in nodes if node.name in leaving for address in _addresses(node)}
    changed = [change.address for change in plan.changes if change.actions not in (("no-op",), ("read",))]
    rest = [address for address in changed if address not in held]
    new_addresses = {address for node in new for address in _addresses(node)}

    steps: list[Step] = []
    count = len(control_planes)
    if new:  # the cluster grows first: new control planes are members before any leaves
        after = count + len(joining_cps)
        others = len([address for address in rest if address not in new_addresses])
        steps.append(Step(GROW, (), tuple(_names(new)), tuple(rest), count, after, others))
        count, rest = after, []
    for start in range(0, len(leaving_workers), batch):
        chunk = leaving_workers[start : start + batch]
        targets = tuple(address for node in chunk for address in _addresses(node))
        steps.append(Step(WORKERS, tuple(_names(chunk)), (), targets, count, count))
    for node in leaving_cps:  # by name; never the last (some of today's stay, checked above)
        steps.append(Step(CONTROL_PLANE, (node.name,), (), tuple(_addresses(node)), count, count - 1))
        count -= 1
    last = steps[-1]
    steps[-1] = Step(last.kind, last.leaving, last.joining, (), last.members_before, last.members_after, len(rest))
    if count % 2 == 0 or count < 1:  # the site's count is odd (TV001): a state that disagrees is not guessed at
        raise OperationError(
            f"{layer.name}: the sequence would leave etcd with {count} members; the site's control planes are odd in "
            f"number: the state and the site disagree (run `terravixens drift {layer.name}`); nothing was applied",
            ExitCode.REFUSED,
        )

    control_plane_names = set(_names(control_planes) + _names(joining_cps))
    cluster_nodes = {
        node.name: _cluster_node(
            site, cluster_name, node, plan, Role.CONTROLPLANE if node.name in control_plane_names else Role.WORKER
        )
        for node in sorted(running + new, key=lambda node: node.name)
    }
    staying = tuple(node.name for node in control_planes if node.fate != Fate.LEAVING)
    return ScaleIn(
        layer.name,
        cluster_name,
        "; ".join(reasons),
        tuple(steps),
        cluster_nodes,
        tuple(sorted(node.name for node in running)),
        staying,
    )


def describe(sequence: ScaleIn) -> list[str]:
    """The sequence as the dry-run prints it, and the run before it starts: one line per step."""
    total = len(sequence.steps)
    lines = [f"  {number}/{total} {step.title}" for number, step in enumerate(sequence.steps, 1)]
    return [*lines, f"  {EACH_STEP}"]


# ---------------------------------------------------------------------------------------------------- checks
def _health(talosctl: Talosctl, nodes: list[ClusterNode], through: list[ClusterNode]) -> str | None:
    """`talosctl health` over exactly these nodes (talosctl compares them with what it discovers, and the etcd
    members with the control planes), through the first control plane that stays; None when healthy."""
    here = {node.name for node in nodes}
    first = next((node for node in through if node.name in here), None)
    control_planes = [node.address for node in nodes if node.control_plane]
    if first is not None:
        control_planes.remove(first.address)
        control_planes.insert(0, first.address)
    workers = [node.address for node in nodes if not node.control_plane]
    answer = talosctl.health(control_planes, workers)
    return None if answer.ok else answer.reason


def _members(
    talosctl: Talosctl, through: list[ClusterNode], console: Console, layer: str
) -> tuple[ClusterNode, list[Member]]:
    """The etcd members, listed by the first control plane that stays and answers."""
    for node in through:
        answer = talosctl.etcd_members(node.address)
        if answer.ok:
            return node, members(answer.stdout)
        console.step(layer, "etcd", f"{node.name} ({node.address}) cannot list members ({answer.reason[:200]})")
    raise OperationError(
        f"{layer}: no control plane that stays answers `talosctl etcd members`. {RESUME}", ExitCode.FAILED
    )


def _membership_problem(listed: list[Member], expected: list[ClusterNode]) -> str | None:
    """What is wrong with the member list: a count, a member that should be gone or there, a learner."""
    names = sorted(member.hostname for member in listed)
    wanted = sorted(node.hostname for node in expected)
    problems = []
    if len(listed) != len(wanted):
        problems.append(f"{len(listed)} members, {len(wanted)} expected")
    extra = sorted(set(names) - set(wanted))
    missing = sorted(set(wanted) - set(names))
    if extra:
        problems.append(f"still a member: {', '.join(extra)}")
    if missing:
        problems.append(f"not a member: {', '.join(missing)}")
    learners = sorted(member.hostname for member in listed if member.learner)
    if learners:
        problems.append(f"still a learner (not yet a voting member): {', '.join(learners)}")
    return "; ".join(problems) or None


def check_cluster(
    talosctl: Talosctl, sequence: ScaleIn, index: int, console: Console, what: str, done: str = ""
) -> None:
    """Health over the cluster as steps[0..index] leave it, then etcd's members: exactly its control planes. `done`
    says what is applied already (for the message of a stop)."""
    layer = sequence.layer
    nodes = sequence.after(index)
    applied = done or "nothing was applied"
    console.journal.saw(layer, "health")
    problem = _health(talosctl, nodes, sequence.through())
    if problem is not None:
        raise OperationError(
            f"{layer}: talosctl health {what} failed ({problem[:300]}); {applied}. {RESUME}", ExitCode.FAILED
        )
    console.step(layer, "health", f"{len(nodes)} nodes healthy {what}")
    console.journal.saw(layer, "etcd members")
    expected = [node for node in nodes if node.control_plane]
    through, listed = _members(talosctl, sequence.through(), console, layer)
    problem = _membership_problem(listed, expected)
    if problem is not None:
        raise OperationError(
            f"{layer}: etcd members {what}, listed through {through.name}: {problem}; {applied}. {RESUME}",
            ExitCode.FAILED,
        )
    console.step(
        layer,
        "etcd members",
        f"{len(listed)} ({', '.join(sorted(m.hostname for m in listed))}) {what}, listed through {through.name}",
    )


def _unexpected(plan: Plan, step: Step, roles: Mapping[str, str]) -> str | None:
    """How the step's plan differs from the step: the nodes it takes out and the ones it adds must be the step's
    (a targeted plan that took more, or a state that moved since the sequence was computed, is not applied)."""
    view = node_view(plan, GuardContext(roles=roles))
    leaving = sorted(node.name for node in view.of(Fate.LEAVING) if node.member)
    joining = sorted(node.name for node in view.of(Fate.NEW))
    disrupted = sorted(node.name for node in view.of(Fate.REPLACED, Fate.MACHINE_LOST))
    problems = []
    if leaving != sorted(step.leaving):
        problems.append(f"it takes out {', '.join(leaving) or 'no node'}, the step {', '.join(step.leaving) or 'none'}")
    if not set(joining) <= set(step.joining):
        problems.append(f"it adds {', '.join(sorted(set(joining) - set(step.joining)))}, the step does not")
    if disrupted:
        problems.append(f"it replaces or loses the machine of {', '.join(disrupted)}")
    return "; ".join(problems) or None


# ------------------------------------------------------------------------------------------------------ run
@dataclass(frozen=True)
class SequenceRun:
    """What a deploy hands the sequence: its own options, and the sequence's."""

    options: ScaleInOptions
    yes: bool = False
    allow_reboot: frozenset[str] = frozenset()
    lock_timeout: str = "0s"
    dry_run: bool = False


def unit_name(sequence: ScaleIn, number: int) -> str:
    """The step in the journal's line: 'platform-prod step 1/2: cp-b leaves'."""
    return f"{sequence.layer} step {number}/{len(sequence.steps)}: {sequence.steps[number - 1].short}"


def _steps(count: int) -> str:
    return f"{count} step{'s' if count != 1 else ''}"


def run(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    planned: LayerPlan,
    sequence: ScaleIn,
    how: SequenceRun,
    kubectl: Kubectl | None = None,
) -> bool:
    """Judges the whole plan (PG002 waived: its control planes are taken out one per apply below), shows the
    sequence, asks once, then runs each step. Returns True when something was applied (False for a dry run)."""
    layer = sequence.layer
    planned.extra_waived = frozenset({"PG002"})
    judge(console, planned, guard_context(ws, tf, console, ws.layer(layer), planned, how.allow_reboot))
    remove_quietly(planned.path)  # each step plans again, with its own targets
    console.step(layer, "summary", f"{summary.counts(planned.plan)} in all, in {_steps(len(sequence.steps))}")
    for line in summary.lines(planned.plan):
        console.say(line)
    console.step(layer, "scale-in", f"{sequence.why}: {_steps(len(sequence.steps))}")
    for line in describe(sequence):
        console.say(line)
    if how.dry_run:
        console.step(layer, "dry run", "nothing applied: `terravixens deploy` runs the steps above")
        return False
    journal = console.journal
    check = f"{layer}: cluster check"
    kubeconfig = kubeconfig_of(tf, ws.stack_dir(layer))
    # the talosconfig first: a layer without one stops before the question, not after it
    with talosconfig_file(ws, tf, sequence.cluster, how.options.talosconfig) as talosconfig:
        talosctl = Talosctl(how.options.talosctl, talosconfig, how.options.timeout)
        confirm(
            console,
            layer,
            f"Run {'these' if len(sequence.steps) > 1 else 'this'} {_steps(len(sequence.steps))} on",
            how.yes,
        )
        journal.next(check, *(unit_name(sequence, number) for number in range(1, len(sequence.steps) + 1)))
        with journal.unit(check):
            check_cluster(talosctl, sequence, -1, console, "before the first step")
        for number in range(1, len(sequence.steps) + 1):
            with journal.unit(unit_name(sequence, number)) as unit:
                unit.note = _step(ws, tf, console, sequence, number, how, talosctl, kubectl or Kubectl(), kubeconfig)
    return True


def _step(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    sequence: ScaleIn,
    number: int,
    how: SequenceRun,
    talosctl: Talosctl,
    kubectl: Kubectl,
    kubeconfig: str | None,
) -> str:
    layer, step, total = sequence.layer, sequence.steps[number - 1], len(sequence.steps)
    applied = f"step {number}/{total} ({step.short}) is applied" + (
        f", steps 1 to {number - 1} before it" if number > 2 else ", step 1 before it" if number == 2 else ""
    )
    console.step(layer, "step", f"{number}/{total} {step.title}")
    targets = [f"-target={address}" for address in step.targets]
    planned = make_plan(ws, tf, console, layer, *targets, lock_timeout=how.lock_timeout)
    try:
        if not planned.changed:
            console.step(layer, "plan", "no changes: this step is already applied")
            check_cluster(talosctl, sequence, number - 1, console, f"after step {number}/{total}", applied)
            return "already applied"
        unexpected = _unexpected(planned.plan, step, site_roles(ws.site, ws.layer(layer)))
        if unexpected is not None:
            raise OperationError(
                f"{layer}: the plan of step {number}/{total} is not the step ({unexpected}); nothing of it was "
                f"applied. {RESUME}",
                ExitCode.REFUSED,
            )
        judge(console, planned, guard_context(ws, tf, console, ws.layer(layer), planned, how.allow_reboot))
        console.step(layer, "summary", summary.counts(planned.plan))
        for line in summary.lines(planned.plan):
            console.say(line)
        if step.changes_etcd:
            fresh_snapshot(
                ws,
                sequence.cluster,
                talosctl,
                console,
                f"scale-in step {number}/{total}, {step.short}",
                how.options.snapshot,
                avoid=(*step.leaving, *step.joining),
            )
        apply_saved(ws, tf, console, planned, "scale-in")
    finally:
        remove_quietly(planned.path)
    gone = left_nodes(planned.plan)
    if gone:  # a Talos reset leaves the Node object behind, NotReady for ever
        console.journal.saw(layer, "kubernetes")
        delete_nodes(kubectl, kubeconfig, gone, console, layer)
    check_cluster(talosctl, sequence, number - 1, console, f"after step {number}/{total}", applied)
    return "applied, healthy"


__all__ = [
    "ClusterNode",
    "ScaleIn",
    "ScaleInOptions",
    "SequenceRun",
    "Step",
    "check_cluster",
    "describe",
    "run",
    "sequence_of",
]
