"""`terravixens maintain HYPERVISOR`: empty a Proxmox host of what the site runs on it, so that it can be patched and
rebooted; `terravixens maintain HYPERVISOR --done`: bring it all back (ADR 0055).

Going down (terravixens.talos.maintenance: what, in which order, when to refuse):
1. Proxmox is asked where every guest runs (`/cluster/resources`): each of the site's guests on HYPERVISOR must be
   there (a guest elsewhere is drift: refused, nothing changed); one already stopped is done (a re-run resumes);
   a guest the site does not know is listed for the operator.
2. Refused before anything changes when a cluster would lose etcd's quorum: too many of its control planes on the
   host, counting members already down elsewhere — the message says which control plane to move first, and where.
3. The typed confirmation SITE/HYPERVISOR (or `--confirm`).
4. Per cluster: `talosctl health` of the whole cluster (on a first run; a resumed run has nodes down, which health
   would count against it), then each of its nodes on the host, workers first, one at a time: the node's health
   (Kubernetes Node Ready, Talos answering), for a control plane etcd read through a control plane that stays (the
   members still answering after this one leaves must keep quorum) and a fresh verified etcd snapshot; the Node
   annotated `terravixens.io/maintenance=HYPERVISOR` and cordoned (a Node someone else cordoned is left as it is),
   drained (`kubectl drain`, PodDisruptionBudgets respected, bounded), `talosctl shutdown`, the VM seen stopped
   through the Proxmox API; for a control plane, etcd's members read back through one that stays.
5. The standalone guests of the host, last (what the cluster uses stays up while its nodes drain), each shut down
   through the Proxmox API as its spec's posture says (`maintenance_stop`: a clean shutdown, and a hard stop only
   when the posture allows it).
6. What to do on the host is printed.

`--done`: the guests started first, then per cluster its control planes, then its workers: each VM started through
the Proxmox API (its task waited for), the Node waited for until Ready (a control plane: its etcd member answering),
uncordoned when maintain cordoned it; then `terravixens check` of each cluster (its logs since the nodes came back).

Every external call is bounded (the runner for talosctl and kubectl, deadlines for the API); every node is a unit of
the journal, so a stop says in one line what is done and what is not, and running the same command again resumes
(what is stopped, cordoned or running is read again). `--dry-run` prints exactly the steps, reading nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from terravixens.arguments import Definition, duration, json_option, no_snapshot_option, site_option
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode, codes
from terravixens.layers import SiteLayers
from terravixens.operations import acceptance
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy, fresh_snapshot
from terravixens.operations.kube import Kubectl
from terravixens.operations.observe import Access, Since, cluster_access, site_nodes
from terravixens.operations.outcome import OperationError
from terravixens.operations.steps import typed_confirmation
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.output import render
from terravixens.proxmox_api import Answer, Guest, ProxmoxApi
from terravixens.roles import Role
from terravixens.runner import Interrupted, parse_duration, stopping
from terravixens.talos.maintenance import Blocked, Hosted, HostedGuest, TalosMachine, blocked, hosted
from terravixens.talosctl import Talosctl, etcd_statuses, members, node_errors

ANNOTATION = "terravixens.io/maintenance"
DEFAULT_TIMEOUT = 10 * 60
DRAIN_TIMEOUT = 5 * 60
CHECK_WAIT = 5 * 60
POLL = 5.0  # between two reads of what is waited for; at most a twentieth of --timeout
HOST_UNIT = "the host"


@dataclass(frozen=True)
class MaintainOptions:
    """`timeout`: each wait (a VM off or on, a Node Ready) and each talosctl call; `drain_timeout`: kubectl drain's
    own; `check_wait`: how long --done's check keeps looking while something fails; `confirm`: the typed confirmation
    given on the command line; `no_snapshot`: the reason to skip the control planes' snapshots."""

    hypervisor: str
    done: bool = False
    dry_run: bool = False
    json: bool = False
    confirm: str | None = None
    talosctl: str = "talosctl"
    kubectl: str | None = None
    talosconfig: str | None = None
    kubeconfig: str | None = None
    timeout: int = DEFAULT_TIMEOUT
    drain_timeout: int = DRAIN_TIMEOUT
    check_wait: int = CHECK_WAIT
    no_snapshot: str | None = None
    postures: Mapping[str, str] = field(default_factory=dict)  # guest -> its posture's maintenance_stop


# ------------------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Step:
    """One unit of the run: what it is and what it does, in order."""

    unit: str
    what: str
    actions: tuple[str, ...]

    def line(self) -> str:
        return f"{self.unit} ({self.what}): {' → '.join(self.actions)}"


def _machine_what(machine: TalosMachine) -> str:
    role = "control plane" if machine.role is Role.CONTROLPLANE else "worker"
    return f"{role}, vm {machine.vm_id}, {machine.address}"


def _guest_what(guest: HostedGuest, stop: str) -> str:
    inside = f"; {', '.join(guest.inside)} inside, stopped and started with it" if guest.inside else ""
    return f"{guest.type} {guest.vm_id}, spec {guest.spec}, {stop}{inside}"


def steps(hosted: Hosted, done: bool, postures: Mapping[str, str], timeout: int) -> list[Step]:
    """Exactly what the run does, unit by unit (the dry run prints these; the run announces them, then does them)."""
    found: list[Step] = []
    if not done:
        for machine in hosted.talos:
            if machine.role is Role.CONTROLPLANE:
                actions: tuple[str, ...] = (
                    "health (Node Ready, Talos answers; the etcd members that stay keep quorum)",
                    "etcd snapshot",
                    "cordon",
                    "drain",
                    "talosctl shutdown",
                    "VM stopped",
                    "etcd members read back",
                )
            else:
                actions = ("health (Node Ready, Talos answers)", "cordon", "drain", "talosctl shutdown", "VM stopped")
            found.append(Step(machine.unit, _machine_what(machine), actions))
        for guest in hosted.guests:
            stop = postures.get(guest.name, "shutdown")
            hard = ", then a hard stop" if stop == "shutdown_then_stop" else ""
            found.append(
                Step(
                    guest.unit,
                    _guest_what(guest, f"maintenance_stop {stop}"),
                    (f"shutdown through Proxmox (up to {timeout}s{hard})", "stopped"),
                )
            )
        found.append(
            Step(
                HOST_UNIT,
                hosted.hypervisor,
                (f"patch and reboot {hosted.node_name}", f"then: bin/terravixens maintain {hosted.hypervisor} --done"),
            )
        )
        return found
    for item in hosted.coming_back():
        if isinstance(item, HostedGuest):
            found.append(Step(item.unit, _guest_what(item, "started"), ("start through Proxmox", "running")))
        elif item.role is Role.CONTROLPLANE:
            found.append(
                Step(
                    item.unit,
                    _machine_what(item),
                    ("start through Proxmox", "Node Ready", "etcd member answers", "uncordon if maintain cordoned it"),
                )
            )
        else:
            found.append(
                Step(
                    item.unit,
                    _machine_what(item),
                    ("start through Proxmox", "Node Ready", "uncordon if maintain cordoned it"),
                )
            )
    found += [Step(f"check {cluster}", cluster, ("terravixens check",)) for cluster in hosted.clusters()]
    return found


@dataclass(frozen=True)
class DryRun:
    """`--dry-run`: the steps, and what refuses the run before anything changes (from the site alone: the run also
    counts etcd members already down elsewhere)."""

    site: str
    hypervisor: str
    done: bool
    steps: tuple[Step, ...]
    refusals: tuple[str, ...]
    command: str = "maintain dry-run"

    @property
    def exit_code(self) -> int:
        return ExitCode.REFUSED if self.refusals else ExitCode.OK

    def lines(self) -> list[str]:
        head = f"maintain {self.hypervisor}{' --done' if self.done else ''}: {len(self.steps)} steps, in order"
        return [head, *(f"  {step.line()}" for step in self.steps)]

    def notes(self) -> list[str]:
        return [f"refused: {reason}" for reason in self.refusals]

    def body(self) -> Mapping[str, Any]:
        return {
            "site": self.site,
            "hypervisor": self.hypervisor,
            "done": self.done,
            "result": "refused" if self.refusals else "ok",
            "exit_code": int(self.exit_code),
            "steps": [{"unit": s.unit, "what": s.what, "actions": list(s.actions)} for s in self.steps],
            "refused": list(self.refusals),
        }


def _refusal(site: Site, refused: Blocked, hypervisor: str) -> str:
    """Why emptying `hypervisor` is refused, the cluster's platform layer named for the deploy after a move."""
    return refused.message(hypervisor, SiteLayers.of(site).platform(refused.cluster).name)


def dry_run(site: Site, options: MaintainOptions) -> DryRun:
    found = hosted(site, options.hypervisor)
    hv = options.hypervisor
    refusals = () if options.done else tuple(_refusal(site, b, hv) for b in blocked(site, hv))
    plan = steps(found, options.done, options.postures, options.timeout)
    return DryRun(site.site, options.hypervisor, options.done, tuple(plan), refusals)


# ------------------------------------------------------------------------------------------------------ readings
def _answered(answer: Answer, what: str, code: ExitCode = ExitCode.FAILED) -> Answer:
    if not answer.ok:
        raise OperationError(f"{what}: {answer.reason}", code)
    return answer


def _placement(api: ProxmoxApi, hosted: Hosted) -> dict[int, Guest]:
    """The site's guests on the host as Proxmox has them (vmid -> guest); refused when one is elsewhere or missing."""
    listed = api.guests()
    if isinstance(listed, Answer):
        raise OperationError(f"reading where the guests run: {listed.reason}", ExitCode.FAILED)
    by_vmid = {guest.vmid: guest for guest in listed}
    wrong = []
    for item in hosted.going_down():
        guest = by_vmid.get(item.vm_id)
        if guest is None:
            wrong.append(f"{item.unit} (vm {item.vm_id}) is not in Proxmox")
        elif guest.node != hosted.node_name or guest.kind != item.kind:
            wrong.append(f"{item.unit} (vm {item.vm_id}) runs on {guest.node}, not {hosted.node_name}")
    if wrong:
        raise OperationError(
            f"the site and Proxmox disagree: {'; '.join(wrong)}. Nothing was changed: run `bin/terravixens drift` "
            f"and deploy what the site says first (or fix the site), then run maintain again",
            ExitCode.REFUSED,
        )
    return {vmid: by_vmid[vmid] for vmid in (item.vm_id for item in hosted.going_down())} | {
        guest.vmid: guest for guest in listed if guest.node == hosted.node_name
    }


@dataclass(frozen=True)
class NodeState:
    """A Kubernetes Node as `kubectl get node NAME -o json` shows it."""

    ready: str
    reason: str
    unschedulable: bool
    marked: str | None  # the hypervisor in our annotation, when maintain cordoned it


def _node(kubectl: Kubectl, kubeconfig: Path, name: str) -> NodeState | str:
    ran = kubectl.run(["get", "node", name, "-o", "json", f"--request-timeout={int(kubectl.timeout)}s"], kubeconfig)
    _interrupted(ran.interrupted, "kubectl get node")
    if not ran.ok:
        return ran.reason or (ran.stderr.strip().splitlines() or ["no answer"])[-1]
    try:
        document = json.loads(ran.stdout)
    except ValueError:
        return "kubectl printed no JSON"
    conditions = (document.get("status") or {}).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    annotations = (document.get("metadata") or {}).get("annotations") or {}
    return NodeState(
        str(ready.get("status", "Unknown")),
        str(ready.get("reason", "")),
        bool((document.get("spec") or {}).get("unschedulable")),
        annotations.get(ANNOTATION),
    )


def _interrupted(interrupted: bool, what: str) -> None:
    if interrupted:
        raise Interrupted(stopping() or "SIGINT", [what])


def _kubectl(kubectl: Kubectl, kubeconfig: Path, arguments: Sequence[str], what: str) -> None:
    ran = kubectl.run(list(arguments), kubeconfig)
    _interrupted(ran.interrupted, f"kubectl {arguments[0]}")
    if not ran.ok:
        detail = ran.reason if ran.timed_out else (ran.stderr.strip().splitlines() or [ran.reason])[-1]
        raise OperationError(f"{what}: kubectl {' '.join(arguments[:2])} failed: {detail[:300]}", ExitCode.FAILED)


@dataclass(frozen=True)
class Quorum:
    """etcd as seen through a control plane that stays: its members and those answering `etcd status`."""

    through: str
    members: tuple[str, ...]  # hostnames
    answering: tuple[str, ...]  # hostnames


def _quorum(talosctl: Talosctl, site: Site, cluster: str, staying: Sequence[TalosMachine | Any]) -> Quorum | str:
    """`etcd members` through the first control plane of `staying` that lists them (it needs a leader: a listing
    is quorum), then `etcd status` of every control plane of the site (a member that answers has a row)."""
    nodes = {node.hostname: node for node in site_nodes(site, cluster) if node.role is Role.CONTROLPLANE}
    failures = []
    for node in staying:
        ran = talosctl.etcd_members(node.address)
        _interrupted(ran.interrupted, "talosctl etcd members")
        listed = members(ran.stdout)
        if not (ran.ok and listed):
            failures.append(f"{node.name}: {node_errors(ran.stderr).get(node.address) or ran.reason or 'no rows'}")
            continue
        status = talosctl.etcd_status([n.address for n in nodes.values()])
        _interrupted(status.interrupted, "talosctl etcd status")
        rows = etcd_statuses(status.stdout)
        ids = {member.id for member in listed}
        answering = sorted(
            hostname for hostname, n in nodes.items() if n.address in rows and rows[n.address].member in ids
        )
        return Quorum(node.name, tuple(sorted(m.hostname for m in listed)), tuple(answering))
    return "; ".join(failures) or "no control plane stays to read etcd through"


def _wait_node(kubectl: Kubectl, kubeconfig: Path, name: str, deadline: float, pause: Callable[[], None]) -> NodeState:
    while True:
        state = _node(kubectl, kubeconfig, name)
        if isinstance(state, NodeState) and state.ready == "True":
            return state
        if time.monotonic() >= deadline:
            last = state if isinstance(state, str) else f"Ready {state.ready} ({state.reason})"
            raise OperationError(f"Node {name} is not Ready in time (last: {last})", ExitCode.FAILED)
        pause()


# ------------------------------------------------------------------------------------------------------ the run
@dataclass
class Tools:
    """What the run calls: the Proxmox API, talosctl (its client configuration set per cluster) and kubectl."""

    api: ProxmoxApi
    talosctl: Talosctl
    kubectl: Kubectl
    sleep: Callable[[float], None] = time.sleep
    poll: float = POLL

    def pause(self) -> None:
        self.sleep(self.poll)


@contextlib.contextmanager
def _access(ws: Workspace, tf: Terraform, cluster: str, options: MaintainOptions) -> Iterator[Access]:
    with cluster_access(ws, tf, cluster, options.talosconfig, options.kubeconfig, options=True) as access:
        missing = [why for why in (access.talos_missing, access.kube_missing) if why]
        if missing or access.talosconfig is None or access.kubeconfig is None:
            raise OperationError(f"{cluster}: {'; '.join(missing)}", ExitCode.BAD_INPUT)
        yield access


def _stopped(guests: Mapping[int, Guest], vm_id: int) -> bool:
    guest = guests.get(vm_id)
    return guest is not None and guest.status == "stopped"


def _down(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    options: MaintainOptions,
    tools: Tools,
    found: Hosted,
    guests: dict[int, Guest],
) -> None:
    site, hv = ws.site, options.hypervisor
    journal = console.journal
    policy = SnapshotPolicy(skip_reason=options.no_snapshot)
    for cluster in found.clusters():
        mine = [m for m in found.talos if m.cluster == cluster]
        layer = ws.platform_layer(cluster).name
        with _access(ws, tf, cluster, options) as access:
            if access.talosconfig is None or access.kubeconfig is None:  # _access refuses it: no assert (python -O)
                raise OperationError(f"{cluster}: no talosconfig or kubeconfig", ExitCode.BAD_INPUT)
            talosctl = replace(tools.talosctl, talosconfig=access.talosconfig)
            others = [n for n in site_nodes(site, cluster) if n.name not in {m.name for m in mine}]
            staying = [n for n in others if n.role is Role.CONTROLPLANE]
            if any(m.role is Role.CONTROLPLANE for m in mine):
                # members down elsewhere count too: refused now rather than after the workers went down
                quorum = _quorum(talosctl, site, cluster, staying)
                if isinstance(quorum, str):
                    raise OperationError(
                        f"{cluster}: etcd cannot be read through a control plane that stays ({quorum}): nothing was "
                        f"shut down",
                        ExitCode.REFUSED,
                    )
                down = {n.name for n in staying if n.hostname not in quorum.answering}
                console.step(
                    layer,
                    "etcd",
                    f"through {quorum.through}: {len(quorum.answering)} of {len(quorum.members)} members answer"
                    + (f"; down elsewhere: {', '.join(sorted(down))}" if down else ""),
                )
                refused = [b for b in blocked(site, hv, {cluster: down}) if b.cluster == cluster]
                if refused:
                    raise OperationError(f"{_refusal(site, refused[0], hv)}; nothing was shut down", ExitCode.REFUSED)
            if not any(_stopped(guests, m.vm_id) for m in mine):
                every = site_nodes(site, cluster)
                console.step(layer, "health", "the whole cluster, before anything goes down")
                health = talosctl.health(
                    [n.address for n in every if n.role is Role.CONTROLPLANE],
                    [n.address for n in every if n.role is Role.WORKER],
                )
                _interrupted(health.interrupted, "talosctl health")
                if not health.ok:
                    raise OperationError(
                        f"{cluster} is not healthy ({health.reason}): nothing was shut down; fix it first",
                        ExitCode.REFUSED,
                    )
            for machine in mine:
                with journal.unit(machine.unit) as unit:
                    if _stopped(guests, machine.vm_id):
                        console.step(machine.unit, "skipped", "its VM is already stopped (an earlier run)")
                        unit.note = "already down"
                        continue
                    _take_down(ws, console, options, tools, talosctl, access, machine, staying, found.node_name, policy)
    for guest in found.guests:
        with journal.unit(guest.unit) as unit:
            if _stopped(guests, guest.vm_id):
                console.step(guest.unit, "skipped", "already stopped")
                unit.note = "already down"
                continue
            stop = options.postures.get(guest.name, "shutdown")
            console.step(guest.unit, "shutdown", f"maintenance_stop {stop}, up to {options.timeout}s")
            answer = tools.api.shutdown(
                found.node_name,
                guest.kind,
                guest.vm_id,
                options.timeout,
                time.monotonic() + options.timeout + 60,
                force_stop=stop == "shutdown_then_stop",
            )
            if not answer.ok:
                raise OperationError(
                    f"{guest.unit} did not shut down ({answer.reason}); its posture allows no hard stop: shut it "
                    f"down yourself, then run maintain again",
                    ExitCode.FAILED,
                )
            _answered(
                tools.api.wait_status(found.node_name, guest.kind, guest.vm_id, "stopped", time.monotonic() + 60),
                guest.unit,
            )
            console.step(guest.unit, "stopped")


def _take_down(
    ws: Workspace,
    console: Console,
    options: MaintainOptions,
    tools: Tools,
    talosctl: Talosctl,
    access: Access,
    machine: TalosMachine,
    staying: Sequence[Any],
    node_name: str,
    policy: SnapshotPolicy,
) -> None:
    if access.kubeconfig is None:  # _access refuses it: no assert (python -O drops them)
        raise OperationError(f"{machine.cluster}: no kubeconfig", ExitCode.BAD_INPUT)
    site, hv, unit = ws.site, options.hypervisor, machine.unit
    state = _node(tools.kubectl, access.kubeconfig, machine.hostname)
    if isinstance(state, str) or state.ready != "True":
        why = state if isinstance(state, str) else f"Ready {state.ready}: {state.reason}"
        raise OperationError(
            f"{unit}: its Node is not Ready ({why}): it cannot be drained cleanly; nothing of it was changed. Fix "
            f"it, or shut it down yourself, then run maintain again",
            ExitCode.REFUSED,
        )
    answer = talosctl.probe(machine.address)
    _interrupted(answer.interrupted, "talosctl version")
    if not answer.ok:
        raise OperationError(
            f"{unit}: Talos does not answer ({answer.reason}): nothing of it was changed", ExitCode.REFUSED
        )
    if machine.role is Role.CONTROLPLANE:
        quorum = _quorum(talosctl, site, machine.cluster, staying)
        if isinstance(quorum, str):
            raise OperationError(
                f"{unit}: etcd cannot be read through a control plane that stays ({quorum}): nothing of it was changed",
                ExitCode.REFUSED,
            )
        after = len([h for h in quorum.answering if h != machine.hostname])
        count = len(quorum.members)
        console.step(
            unit,
            "etcd",
            f"through {quorum.through}: {len(quorum.answering)} of {count} members answer; {after} without "
            f"{machine.name}, {count // 2 + 1} keep quorum",
        )
        if after < count // 2 + 1:
            down = {
                machine.cluster: {
                    n.name
                    for n in site_nodes(site, machine.cluster)
                    if n.role is Role.CONTROLPLANE and n.hostname not in quorum.answering
                }
            }
            refusals = [_refusal(site, b, hv) for b in blocked(site, hv, down) if b.cluster == machine.cluster]
            raise OperationError(
                (refusals or [f"{unit}: shutting it down would leave etcd without quorum"])[0]
                + f"; nothing of {machine.name} was changed",
                ExitCode.REFUSED,
            )
        avoid = [n.name for n in site_nodes(site, machine.cluster) if n.name not in {s.name for s in staying}]
        fresh_snapshot(
            ws,
            machine.cluster,
            talosctl,
            console,
            f"maintenance-of-{hv}",
            policy,
            avoid=avoid,
            purpose=f"before {machine.name} goes down for {hv}'s maintenance",
        )
    name = machine.hostname
    if state.unschedulable and state.marked != hv:
        console.step(unit, "cordon", "already cordoned by someone else: left so after --done")
    else:
        _kubectl(
            tools.kubectl, access.kubeconfig, ["annotate", "node", name, f"{ANNOTATION}={hv}", "--overwrite"], unit
        )
        _kubectl(tools.kubectl, access.kubeconfig, ["cordon", name], unit)
        console.step(unit, "cordon", f"Node {name} cordoned, annotated {ANNOTATION}={hv}")
    drainer = Kubectl(tools.kubectl.binary, timeout=options.drain_timeout + 60, grace=tools.kubectl.grace)
    console.step(unit, "drain", f"up to {options.drain_timeout}s, PodDisruptionBudgets respected")
    _kubectl(
        drainer,
        access.kubeconfig,
        ["drain", name, "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={options.drain_timeout}s"],
        f"{unit}: the Node stays cordoned, nothing was shut down",
    )
    console.step(unit, "shutdown", "talosctl shutdown")
    ran = talosctl.shutdown(machine.address)
    _interrupted(ran.interrupted, "talosctl shutdown")
    if not ran.ok:
        console.journal.outcome_unknown("the shutdown may have started: read its VM's state in Proxmox")
        raise OperationError(f"{unit}: talosctl shutdown failed: {ran.reason}", ExitCode.FAILED)
    stopped = tools.api.wait_status(
        node_name, machine.kind, machine.vm_id, "stopped", time.monotonic() + options.timeout
    )
    if not stopped.ok:
        raise OperationError(
            f"{unit}: its VM did not power off ({stopped.reason}): look at its console in Proxmox", ExitCode.FAILED
        )
    console.step(unit, "stopped", f"vm {machine.vm_id} on {node_name}")
    if machine.role is Role.CONTROLPLANE:
        quorum = _quorum(talosctl, site, machine.cluster, staying)
        if isinstance(quorum, str):
            raise OperationError(
                f"{unit}: etcd does not answer through the control planes that stay ({quorum}) after {machine.name} "
                f"went down: bring it back with `bin/terravixens maintain {hv} --done`",
                ExitCode.FAILED,
            )
        console.step(
            unit,
            "etcd",
            f"through {quorum.through}: members {', '.join(quorum.members)}; answering "
            f"{', '.join(quorum.answering)}: quorum kept",
        )


def _up(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    options: MaintainOptions,
    tools: Tools,
    found: Hosted,
    guests: dict[int, Guest],
) -> list[str]:
    journal, hv = console.journal, options.hypervisor
    clusters: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        for item in found.coming_back():
            with journal.unit(item.unit) as unit:
                if not _stopped(guests, item.vm_id):
                    console.step(item.unit, "running", f"vm {item.vm_id} already runs")
                else:
                    console.step(item.unit, "start", f"vm {item.vm_id} on {found.node_name}")
                    started = tools.api.start(
                        found.node_name, item.kind, item.vm_id, time.monotonic() + options.timeout
                    )
                    if not started.ok:
                        raise OperationError(f"{item.unit}: its VM did not start ({started.reason})", ExitCode.FAILED)
                    _answered(
                        tools.api.wait_status(
                            found.node_name, item.kind, item.vm_id, "running", time.monotonic() + options.timeout
                        ),
                        item.unit,
                    )
                if isinstance(item, HostedGuest):
                    unit.note = "running"
                    continue
                if item.cluster not in clusters:
                    clusters[item.cluster] = stack.enter_context(_access(ws, tf, item.cluster, options))
                access = clusters[item.cluster]
                deadline = time.monotonic() + options.timeout
                talosctl = replace(tools.talosctl, talosconfig=access.talosconfig)
                _wait_talos(talosctl, item, deadline, tools.pause)  # a Ready from before the shutdown is not trusted
                state = _wait_node(tools.kubectl, access.kubeconfig, item.hostname, deadline, tools.pause)
                console.step(item.unit, "ready", f"Node {item.hostname} Ready")
                if item.role is Role.CONTROLPLANE:
                    _wait_member(talosctl, item, deadline, tools.pause)
                    console.step(item.unit, "etcd", f"{item.hostname}'s member answers")
                if state.marked == hv:
                    _kubectl(tools.kubectl, access.kubeconfig, ["uncordon", item.hostname], item.unit)
                    _kubectl(
                        tools.kubectl,
                        access.kubeconfig,
                        ["annotate", "node", item.hostname, f"{ANNOTATION}-"],
                        item.unit,
                    )
                    console.step(item.unit, "uncordon", f"Node {item.hostname} schedulable again")
                elif state.unschedulable:
                    console.step(item.unit, "uncordon", "left cordoned: maintain did not cordon it")
    return found.clusters()


def _wait_talos(talosctl: Talosctl, machine: TalosMachine, deadline: float, pause: Callable[[], None]) -> None:
    """Until the node's Talos answers (`talosctl version`): it booted."""
    while True:
        ran = talosctl.probe(machine.address)
        _interrupted(ran.interrupted, "talosctl version")
        if ran.ok:
            return
        if time.monotonic() >= deadline:
            raise OperationError(f"{machine.unit}: Talos does not answer in time ({ran.reason})", ExitCode.FAILED)
        pause()


def _wait_member(talosctl: Talosctl, machine: TalosMachine, deadline: float, pause: Callable[[], None]) -> None:
    while True:
        ran = talosctl.etcd_status([machine.address])
        _interrupted(ran.interrupted, "talosctl etcd status")
        row = etcd_statuses(ran.stdout).get(machine.address)
        if row is not None and not row.errors:
            return
        if time.monotonic() >= deadline:
            why = node_errors(ran.stderr).get(machine.address) or ran.reason or (row.errors if row else "no row")
            raise OperationError(f"{machine.unit}: its etcd member does not answer in time ({why})", ExitCode.FAILED)
        pause()


def _check(
    ws: Workspace, tf: Terraform, console: Console, options: MaintainOptions, clusters: Sequence[str], since: datetime
) -> None:
    for cluster in clusters:
        name = f"check {cluster}"
        check_options = acceptance.CheckOptions(
            talosconfig=options.talosconfig,
            kubeconfig=options.kubeconfig,
            since=Since(since, "the nodes' return (maintain --done)"),
            wait=options.check_wait,
            talosctl=options.talosctl,
            timeout=min(options.timeout, 120),
        )

        def progress(text: str, name: str = name) -> None:
            console.journal.saw(name, text)

        with console.journal.unit(name) as unit:
            console.step(name, "check", f"waiting up to {options.check_wait}s for every check to pass")
            kubectl = Kubectl(options.kubectl) if options.kubectl else None
            report = acceptance.run(ws, tf, cluster, check_options, kubectl, progress=progress)
            unit.note = acceptance.VERDICT[report.exit_code]
        for line in report.lines():
            console.say(f"  {line}")
        if report.exit_code != 0:
            code = ExitCode.CHECK_FAILED if report.named(acceptance.Status.PROBLEM) else ExitCode.FAILED
            raise OperationError(
                f"{report.summary()}: every node is back; fix what the lines above say, then `bin/terravixens check "
                f"{cluster}`",
                code,
            )
        console.step(name, "check", report.summary())


def maintain(
    ws: Workspace,
    tf: Terraform,
    options: MaintainOptions,
    console: Console | None = None,
    tools: Tools | None = None,
) -> int:
    """Empties the hypervisor (or, `done`, brings it back); the dry run prints the steps and reads nothing."""
    console = console or Console()
    site, hv = ws.site, options.hypervisor
    if hv not in site.hypervisors:
        raise OperationError(
            f"unknown hypervisor {hv!r}: use one of {', '.join(sorted(site.hypervisors))}", ExitCode.BAD_INPUT
        )
    if options.json and not options.dry_run:
        raise OperationError("--json goes with --dry-run", ExitCode.BAD_INPUT)
    if options.dry_run:
        return render(dry_run(site, options), options.json)
    found = hosted(site, hv)
    refused = [] if options.done else blocked(site, hv)
    if refused:
        why = " / ".join(_refusal(site, b, hv) for b in refused)
        raise OperationError(f"{why}; nothing was changed", ExitCode.REFUSED)
    tools = tools or Tools(
        ProxmoxApi(site.proxmox.endpoint, site.proxmox.insecure),
        Talosctl(options.talosctl, timeout=options.timeout),
        Kubectl(options.kubectl) if options.kubectl else Kubectl(),
        poll=min(POLL, max(0.2, options.timeout / 20)),
    )
    plan = steps(found, options.done, options.postures, options.timeout)
    journal = console.journal
    synth = (options.talosconfig is None or options.kubeconfig is None) and bool(found.talos)
    journal.expect(*(["synth"] if synth else []), "placement", *(s.unit for s in plan))
    console.say(f"maintain {hv}{' --done' if options.done else ''}: {len(plan)} steps, in order")
    for step in plan:
        console.say(f"  {step.line()}")
    if synth:
        with journal.unit("synth"):
            console.step("site", "synth", f"{site.site}: to read the platform layers' talosconfig and kubeconfig")
            ws.synth()
    with journal.unit("placement"):
        console.step("placement", "proxmox", f"where the guests run ({site.proxmox.endpoint})")
        guests = _placement(tools.api, found)
        mine = {item.vm_id for item in found.going_down()}
        known = (
            {node.vm_id for c in site.clusters.values() for node in c.control_planes.values()}
            | {node.vm_id for c in site.clusters.values() for node in c.workers.values()}
            | {node.vm_id for node in site.standalone.nodes.values()}
        )
        for guest in sorted(guests.values(), key=lambda g: g.vmid):
            if guest.node == found.node_name and guest.vmid not in mine and guest.vmid not in known:
                console.step(
                    "placement",
                    "not the site's",
                    f"{guest.kind} {guest.vmid} {guest.name!r} ({guest.status}): "
                    f"{'shut it down yourself' if not options.done else 'start it yourself if it should run'}",
                )
    if not options.done:
        going = [item for item in found.going_down() if not _stopped(guests, item.vm_id)]
        if going:
            typed_confirmation(
                console,
                f"{site.site}/{hv}",
                options.confirm,
                f"shut down {', '.join(item.unit for item in going)} on {hv}",
            )
        _down(ws, tf, console, options, tools, found, guests)
        with journal.unit(HOST_UNIT):
            console.step(
                HOST_UNIT,
                hv,
                f"nothing of site {site.site} runs on {found.node_name} now: patch it and reboot it, then run "
                f"`bin/terravixens maintain {hv} --done`",
            )
        return ExitCode.OK
    clusters = _up(ws, tf, console, options, tools, found, guests)
    _check(ws, tf, console, options, clusters, datetime.now(UTC))
    return ExitCode.OK


# ------------------------------------------------------------------------------------------------- command line
def postures_of(site_path: str | None, site: Site) -> dict[str, str]:
    """Each standalone guest's posture `maintenance_stop` (its spec's posture); {} when the specs cannot be read
    (then every guest gets the strictest: a clean shutdown only)."""
    if not site.standalone.nodes:
        return {}
    import os

    from terravixens.config.loader import DEFAULT_SITE, SITE_ENV
    from terravixens.standalone.catalog import CatalogError
    from terravixens.standalone.resolve import load_standalone

    path = site_path or os.environ.get(SITE_ENV) or str(DEFAULT_SITE)
    try:
        loaded = load_standalone(path)
    except (CatalogError, OSError, ValueError):
        return {}
    return {name: node.posture.maintenance_stop for name, node in loaded.nodes.items()}


def wait(text: str) -> int:
    """A duration that may be 0 (`--check-wait 0`: the check once)."""
    try:
        return parse_duration(text, zero=True)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hypervisor", metavar="HYPERVISOR", help="a key of the site's hypervisors, e.g. pve1")
    site_option(parser)
    parser.add_argument(
        "--done",
        action="store_true",
        help="the host is back: start its VMs and containers, wait for each node Ready, uncordon, then check",
    )
    parser.add_argument("--dry-run", action="store_true", help="print exactly the steps, in order; read nothing")
    parser.add_argument(
        "--confirm", metavar="SITE/HYPERVISOR", help="the typed confirmation of the shutdowns, for a run without one"
    )
    parser.add_argument("--talosconfig", metavar="FILE", help="default: each platform layer's talosconfig output")
    parser.add_argument("--kubeconfig", metavar="FILE", help="default: each platform layer's kubeconfig output")
    parser.add_argument("--talosctl", default="talosctl", metavar="BIN", help="the talosctl binary")
    parser.add_argument("--kubectl", metavar="BIN", help="the kubectl binary (default: $KUBECTL or kubectl)")
    parser.add_argument(
        "--timeout",
        type=duration,
        default="10m",
        metavar="DURATION",
        help="each wait (a VM off or on, a Node Ready, a guest's shutdown) and each talosctl call (default 10m)",
    )
    parser.add_argument(
        "--drain-timeout", type=duration, default="5m", metavar="DURATION", help="kubectl drain's (default 5m)"
    )
    parser.add_argument(
        "--check-wait",
        type=wait,
        default="5m",
        metavar="DURATION",
        help="--done: how long the check keeps looking while something fails (default 5m)",
    )
    no_snapshot_option(parser, "before each control plane goes down")
    json_option(parser, " with --dry-run (terravixens/maintain-dry-run/v1: the steps, and what refuses the run)")


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    options = MaintainOptions(
        hypervisor=args.hypervisor,
        done=args.done,
        dry_run=args.dry_run,
        json=args.json,
        confirm=args.confirm,
        talosctl=args.talosctl,
        kubectl=args.kubectl,
        talosconfig=args.talosconfig,
        kubeconfig=args.kubeconfig,
        timeout=args.timeout,
        drain_timeout=args.drain_timeout,
        check_wait=args.check_wait,
        no_snapshot=args.no_snapshot,
        postures=postures_of(args.site, ws.site),
    )
    return maintain(ws, tf, options, console)


MAINTAIN = Definition(
    arguments,
    command,
    codes(
        (
            ExitCode.OK,
            (
                "the host holds nothing of the site that runs (--done: everything is back, Ready, uncordoned and "
                "checked); --dry-run: the steps are printed"
            ),
        ),
        (
            ExitCode.REFUSED,
            (
                "nothing of the node it names was changed: a cluster would lose etcd's quorum (the message says "
                "which control plane to move first), the cluster or a node is not healthy, or the site and "
                "Proxmox disagree on where a guest runs"
            ),
        ),
        (ExitCode.BAD_INPUT, "site file, unknown hypervisor, bad option, no talosconfig or kubeconfig"),
        (ExitCode.DECLINED, "the shutdowns were not confirmed (SITE/HYPERVISOR, or --confirm): nothing was changed"),
        (
            ExitCode.BACKUP_FAILED,
            "no verified etcd snapshot before a control plane goes down (without --no-snapshot REASON): it was not",
        ),
        (
            ExitCode.FAILED,
            (
                "a drain, a shutdown, a start or a wait failed or ran out of time: the last line says what is done "
                "and what is not; run the same command again to resume"
            ),
        ),
        (ExitCode.CHECK_FAILED, "--done: every node is back, and the acceptance check found problems"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens maintain pve1 --dry-run",
        "terravixens maintain pve1 --dry-run --json",
        "terravixens maintain pve1 --confirm homelab/pve1",
        "terravixens maintain pve1 --done",
    ),
)


__all__ = [
    "ANNOTATION",
    "MAINTAIN",
    "DryRun",
    "MaintainOptions",
    "Step",
    "Tools",
    "arguments",
    "command",
    "dry_run",
    "maintain",
    "postures_of",
    "steps",
]
