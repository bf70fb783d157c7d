"""The per-node view of a plan: what happens to each node, whatever the addresses say.

A node is a Talos node of a cluster (logical ids `node_<name>_*`) or a standalone guest (`sa_<name>_*`). Its
*machine* is the VM or container it runs on; a cluster node also has its configuration *apply*, whose deletion
resets (wipes) it. Terraform plans per address, and an address says little about a machine: the same VM can be
deleted at one address and created again at another (a `module.` move without `moved`, bpg's other type name for the
same VM, a `count`/`for_each` key that changed), forgotten by a `removed` block while it runs, or deleted outright
while the node's apply stays. So a machine is also known by what it is:

- a VM or container by its Proxmox identity (`node_name` + `vm_id`, or the framework resources' numeric `id`) and
  its name, in the values before and after the change;
- an apply by the Talos address it configures (`node`), which the membership record maps to the node's name;

matched against today's state (`prior_state`), the membership record (before and after the plan) and, where given,
the other layers' deployed states (`Usage.machines`). Each node then gets one fate — kept, new, leaving, replaced or
machine lost — and the checks (PG001–PG003) judge those fates, never an address alone.

Whether the site keeps a node comes from the site file (GuardContext.roles) when the guard has it, else from the
plan's own membership record (what the synthesized site lists), else from what the plan leaves of the node. In a
teardown (`destroy`, `decommission`'s steps) every deletion is the request: those nodes are leaving.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from terravixens.catalogue import CONTAINERS, NODE_APPLY, TALOS_MACHINE, VMS
from terravixens.guard.context import GuardContext, apply_node_address, pve_vm_id
from terravixens.guard.plan import Change, Plan, addresses_in, roles_in
from terravixens.inputs import JsonObject
from terravixens.logical_ids import owner_of, standalone_owner_of
from terravixens.roles import Role

VM, CONTAINER, APPLY = "VM", "container", "configuration apply"
CLUSTER, STANDALONE = "cluster", "standalone"


class Fate(StrEnum):
    KEPT = "kept"  # nothing of it deleted, replaced or forgotten (updated or moved in place at most)
    NEW = "new"  # nothing of it today; the plan creates it
    LEAVING = "leaving"  # the site drops it (or a teardown takes it down): its machine or apply goes
    REPLACED = "replaced"  # its machine or apply is deleted and created again, at one address or two
    MACHINE_LOST = "machine lost"  # the site keeps it, but its machine or apply is deleted or forgotten for good


DISRUPTED = frozenset({Fate.LEAVING, Fate.REPLACED, Fate.MACHINE_LOST})
# What a machine is, whatever its address: ("pve", node_name, vm_id) for a VM or container, ("talos", address) for an
# apply (see identity_of).
Identity = tuple[Literal["pve"], str, int] | tuple[Literal["talos"], str]


def machine_kind(resource_type: str) -> str | None:
    if resource_type in VMS:
        return VM
    if resource_type in CONTAINERS:
        return CONTAINER
    if resource_type in (NODE_APPLY, TALOS_MACHINE):
        return APPLY
    return None


def _family(kind: str) -> str:
    """VMs and containers are both the machine a node runs on; an apply is its configuration."""
    return APPLY if kind == APPLY else "machine"


def identity_of(kind: str, values: object, unknown: Mapping[str, object] | None = None) -> Identity | None:
    """What a machine is, whatever its address: ("pve", node_name, vm_id) for a VM or container, ("talos", address)
    for an apply. None when the values do not say (yet): unknown until apply, or absent."""
    if not isinstance(values, Mapping):
        return None
    unknown = unknown or {}
    if kind == APPLY:
        address = apply_node_address(values)
        return ("talos", address) if address and not unknown.get("node") else None
    node_name, vm_id = values.get("node_name"), pve_vm_id(values)
    if isinstance(node_name, str) and node_name and vm_id is not None and not unknown.get("node_name"):
        return ("pve", node_name, vm_id)
    return None


def _machine_name(kind: str, values: object) -> str | None:
    if not isinstance(values, Mapping):
        return None
    if kind == VM:
        name = values.get("name")
        return name if isinstance(name, str) and name else None
    if kind == CONTAINER:
        for block in values.get("initialization") or []:
            hostname = block.get("hostname") if isinstance(block, Mapping) else None
            if isinstance(hostname, str):
                return hostname
    return None


def identity_label(kind: str, identity: Identity | None) -> str:
    if identity is None:
        return kind
    if identity[0] == "pve":
        return f"{kind} {identity[1]}/{identity[2]}"
    return f"{kind} of {identity[1]}"


@dataclass(frozen=True)
class Machine:
    """One object a node runs on (a VM or container) or is configured by (an apply), as today's state holds it."""

    kind: str
    address: str
    type: str
    identity: Identity | None
    name: str | None

    @property
    def label(self) -> str:
        return identity_label(self.kind, self.identity)


@dataclass(frozen=True)
class Event:
    """What the plan does to one of a node's machines. `action`: replaced, deleted, forgotten (losses), created,
    moved, updated, imported, or deposed (a left-over object of an earlier failed replacement, cleaned up)."""

    kind: str
    action: str
    address: str
    identity: Identity | None
    change: Change
    again: Change | None = None  # for a loss: the change that creates this machine again at another address

    @property
    def elsewhere(self) -> str | None:
        return self.again.address if self.again is not None else None

    @property
    def loss(self) -> bool:
        return self.action in ("replaced", "deleted", "forgotten")

    @property
    def label(self) -> str:
        return identity_label(self.kind, self.identity)

    def says(self) -> str:
        """One line of what happens, e.g. 'VM pve1/1101 deleted at X, created again at Y'."""
        text = f"{self.label} {self.action} at {self.address}"
        if self.elsewhere:
            text += f", created again at {self.elsewhere}"
        return text + (f" ({self.why()})" if self.why() else "")

    def why(self) -> str:
        change = self.change
        if self.action != "replaced":
            return ""
        if change.actions == ("create", "forget"):
            return "the old one is left running: destroy = false"
        if change.action_reason == "replace_because_tainted":
            return "it is tainted"
        if change.action_reason == "replace_by_request":
            return "-replace asked for it"
        if change.action_reason == "replace_by_triggers":
            return "its replace_triggered_by changed"
        if change.replace_paths:
            return "forced by " + ", ".join(".".join(str(step) for step in path) for path in change.replace_paths)
        return ""

    def fix(self) -> str:
        """What to do so that the node keeps this machine."""
        change = self.change
        if self.again is not None:
            if self.again.type != change.type:
                return (
                    f"keep the resource type {change.type} (a `moved` block cannot change a resource's type "
                    f"unless the provider supports that move)"
                )
            return f"add `moved {{ from = {self.address}  to = {self.elsewhere} }}` so that Terraform moves it in state"
        if self.action == "forgotten":
            return f"drop the `removed` block for {self.address}, or take the node out of the site first"
        if self.action == "deleted":
            return (
                f"keep {self.address} in the configuration (a `moved` block if its address must change), or take "
                f"the node out of the site to remove it"
            )
        if change.action_reason == "replace_because_tainted":
            return f"if the machine is healthy, `terraform untaint {self.address}` and plan again"
        if change.action_reason == "replace_by_request":
            return f"plan without `-replace={self.address}`"
        if change.action_reason == "replace_by_triggers":
            return "revert what its replace_triggered_by refers to"
        if change.actions == ("create", "forget"):
            return "revert the change that forces the replacement"
        if change.replace_paths:
            return "revert that change"
        return (
            "Find the attribute that forces it (compare before and after in the plan's JSON: `terravixens deploy "
            "LAYER --dry-run --save-plan-json FILE`) and revert it"
        )


@dataclass(frozen=True)
class NodeView:
    """One node: what it is today, whether the site keeps it, and what the plan does to it."""

    name: str
    group: str  # cluster | standalone
    role: str | None  # today's role: the membership record's, else the site's; None when neither knows
    member: bool  # has a configuration apply in today's state: a cluster member terravixens runs
    stays: bool  # the site keeps it (or, without the site, the plan's own record or leftovers do)
    fate: Fate
    events: tuple[Event, ...] = ()
    today: tuple[Machine, ...] = ()
    layer: str | None = None  # another layer's node (known from its deployed state), else None

    @property
    def losses(self) -> list[Event]:
        return [event for event in self.events if event.loss]

    @property
    def changed(self) -> bool:
        return any(event.action in ("moved", "updated", "imported", "created") for event in self.events)

    @property
    def counts_as_control_plane(self) -> bool:
        """A running member whose role is controlplane, or unknown (the safe side)."""
        return self.member and self.role in (Role.CONTROLPLANE, None)

    def described(self) -> str:
        """'cp-e (VM pve1/1105 deleted at X)' for messages."""
        what = "; ".join(event.says() for event in self.losses) or self.fate.value
        return f"{self.name} ({what})"


def _names(nodes: list[NodeView], limit: int = 6) -> str:
    listed = [node.name for node in nodes]
    return ", ".join(listed[:limit]) + (f" and {len(listed) - limit} more" if len(listed) > limit else "")


@dataclass(frozen=True)
class NodesView:
    nodes: Mapping[str, NodeView]
    unowned: tuple[Event, ...] = ()
    teardown: bool = False

    def of(self, *fates: Fate) -> list[NodeView]:
        return [node for _, node in sorted(self.nodes.items()) if node.fate in fates]

    def control_planes_today(self) -> list[NodeView]:
        return [node for _, node in sorted(self.nodes.items()) if node.member and node.role == Role.CONTROLPLANE]

    def control_planes_leaving(self) -> list[NodeView]:
        """Members counted as control planes whose apply or machine goes (left, replaced or lost): each leaves etcd."""
        return [
            node for _, node in sorted(self.nodes.items()) if node.counts_as_control_plane and node.fate in DISRUPTED
        ]

    def summary(self) -> str:
        """One line, e.g. '5 nodes: 3 kept (1 changed in place: cp-b), 1 new (wk-c), 1 leaving (wk-b); none
        replaced, no machine lost'."""
        if not self.nodes:
            return "no node in this plan"
        kept = self.of(Fate.KEPT)
        changed = [node for node in kept if node.changed]
        parts = [f"{len(kept)} kept" + (f" ({len(changed)} changed in place: {_names(changed)})" if changed else "")]
        for fate in (Fate.NEW, Fate.LEAVING):
            found = self.of(fate)
            if found:
                parts.append(f"{len(found)} {fate.value} ({_names(found)})")
        replaced, lost = self.of(Fate.REPLACED), self.of(Fate.MACHINE_LOST)
        tail = [
            f"{len(replaced)} replaced ({_names(replaced)})" if replaced else "none replaced",
            f"{len(lost)} with a machine lost ({_names(lost)})" if lost else "no machine lost",
        ]
        count = len(self.nodes)
        return f"{count} node{'s' if count != 1 else ''}: {', '.join(parts)}; {', '.join(tail)}"


@dataclass
class _Owners:
    """Who a machine belongs to: its logical id first, then what it is (identity, name, Talos address)."""

    plan: Plan
    context: GuardContext
    by_identity: dict[Identity, str] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)
    layers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.addresses = {**addresses_in(self.plan.planned_membership()), **addresses_in(self.plan.membership())}
        self.cluster_names = (
            set(self.context.roles) | set(self.plan.recorded_roles()) | set(roles_in(self.plan.planned_membership()))
        )

    def logical(self, name: str) -> tuple[str, str] | None:
        node = owner_of(name)
        if node is not None:
            return node, CLUSTER
        standalone = standalone_owner_of(name)
        return (standalone, STANDALONE) if standalone is not None else None

    def by_what(self, kind: str, values: JsonObject) -> tuple[str, str] | None:
        """The owner by what the machine is: its identity, Talos address or name matching a known node."""
        identity = identity_of(kind, values)
        if identity is not None and identity in self.by_identity:
            node = self.by_identity[identity]
            return node, self.groups.get(node, CLUSTER)
        if kind == APPLY and identity is not None and identity[1] in self.addresses:
            return self.addresses[identity[1]], CLUSTER
        if identity is not None and identity[0] == "pve" and self.context.usage is not None:
            elsewhere = self.context.usage.machines.get(identity[1:])
            if elsewhere is not None:
                layer, node = elsewhere
                self.layers.setdefault(node, layer)
                return node, self.groups.get(node, CLUSTER)
        name = _machine_name(kind, values)
        if name is not None and name in self.cluster_names:
            return name, CLUSTER
        if name is not None and name in self.groups:
            return name, self.groups[name]
        return None

    def claim(self, node: str, group: str, identity: Identity | None) -> None:
        self.groups.setdefault(node, group)
        if identity is not None:
            self.by_identity.setdefault(identity, node)


def _prior_machines(plan: Plan, owners: _Owners) -> dict[str, tuple[Machine, str]]:
    """Today's machines by address, with their owner. A machine no node can be found for is left out: its changes
    are judged as unowned."""
    found: dict[str, tuple[Machine, str]] = {}
    pending: list[tuple[Machine, JsonObject]] = []
    for resource in plan.prior:
        kind = machine_kind(resource.type)
        if kind is None or resource.deposed is not None:
            continue
        machine = Machine(
            kind,
            resource.address,
            resource.type,
            identity_of(kind, resource.values),
            _machine_name(kind, resource.values),
        )
        owner = owners.logical(resource.name)
        if owner is not None:
            owners.claim(*owner, machine.identity)
            found[resource.address] = (machine, owner[0])
        else:
            pending.append((machine, resource.values))
    for machine, values in pending:  # second pass: names and identities claimed by the logical ids are known now
        owner = owners.by_what(machine.kind, values)
        if owner is not None:
            owners.claim(*owner, machine.identity)
            found[machine.address] = (machine, owner[0])
    return found


def _event(change: Change, kind: str, identity: Identity | None) -> Event | None:
    if change.deposed is not None:
        return Event(kind, "deposed", change.address, identity, change)
    if change.replaced:
        return Event(kind, "replaced", change.address, identity, change)
    if change.actions == ("delete",):
        return Event(kind, "deleted", change.address, identity, change)
    if change.actions == ("forget",):
        return Event(kind, "forgotten", change.address, identity, change)
    if change.actions == ("create",):
        return Event(kind, "imported" if change.importing else "created", change.address, identity, change)
    if change.importing:
        return Event(kind, "imported", change.address, identity, change)
    if change.moved:
        return Event(kind, "moved", change.address, identity, change)
    if change.actions == ("update",):
        return Event(kind, "updated", change.address, identity, change)
    return None


def node_view(plan: Plan, context: GuardContext | None = None) -> NodesView:
    """What the plan does to each node (see the module docstring); computed once per plan and judging context
    (what of it the view reads: the site's roles, other layers' deployed machines, teardown), kept with the plan."""
    context = context or GuardContext()
    machines = tuple(sorted(context.usage.machines.items())) if context.usage is not None else None
    key = (tuple(sorted(context.roles.items())), machines, context.teardown)
    view = plan.views.get(key)
    if not isinstance(view, NodesView):
        view = plan.views[key] = _node_view(plan, context)
    return view


def _node_view(plan: Plan, context: GuardContext) -> NodesView:
    owners = _Owners(plan, context)
    today = _prior_machines(plan, owners)
    owned: list[tuple[Change, str, Identity | None, str | None]] = []  # change, kind, identity, owner
    removed: dict[Identity, str] = {}  # identity -> owner, of today's machines this plan deletes, forgets or replaces
    later: list[tuple[Change, str]] = []
    for change in plan.changes:
        kind = machine_kind(change.type)
        if kind is None:
            continue
        prior = None if change.deposed is not None else today.get(change.previous_address or change.address)
        if prior is None:
            later.append((change, kind))
            continue
        machine, owner = prior
        identity = identity_of(kind, change.before) or machine.identity
        owned.append((change, kind, identity, owner))
        if change.removes_current and identity is not None:
            removed[identity] = owner
    for change, kind in later:  # creations, deposed objects, changes no prior object explains
        before, after = identity_of(kind, change.before), identity_of(kind, change.after, change.after_unknown)
        found: tuple[str, str] | None
        if after is not None and after in removed:
            found = (removed[after], owners.groups.get(removed[after], CLUSTER))  # the same machine, made again
        else:
            found = (
                owners.logical(change.name)
                or (owners.by_what(kind, change.before) if change.before else None)
                or (owners.by_what(kind, change.after) if change.after else None)
            )
        if found:
            owners.claim(found[0], found[1], None)
        owned.append((change, kind, before or after, found[0] if found else None))

    events: dict[str, list[Event]] = {}
    unowned: list[Event] = []
    for change, kind, identity, owned_by in owned:
        event = _event(change, kind, identity)
        if event is None:
            continue
        if owned_by is None:
            unowned.append(event)
        else:
            events.setdefault(owned_by, []).append(event)
    recorded = plan.recorded_roles()
    planned_record = plan.planned_membership()
    planned_roles = roles_in(planned_record) if planned_record is not None else None
    nodes: dict[str, NodeView] = {}
    for name in sorted(set(events) | {owner for _, owner in today.values()}):
        machines = tuple(machine for machine, owner in today.values() if owner == name)
        nodes[name] = _judge(name, machines, _paired(events.get(name, [])), owners, context, recorded, planned_roles)
    return NodesView(nodes, tuple(unowned), context.teardown)


def _paired(events: list[Event]) -> tuple[Event, ...]:
    """A loss whose machine the same node gets again at another address is one replacement across two entries:
    the loss names the address that creates it again, and that creation is folded into it."""
    created = [event for event in events if event.action in ("created", "imported")]
    result: list[Event] = []
    used: set[int] = set()
    for event in events:
        if event.action in ("deleted", "forgotten"):
            free = [other for other in created if id(other) not in used and _family(other.kind) == _family(event.kind)]
            match = next(
                (other for other in free if event.identity is None or other.identity in (None, event.identity)),
                free[0] if free else None,
            )
            if match is not None:
                used.add(id(match))
                event = Event(event.kind, "replaced", event.address, event.identity, event.change, match.change)
        result.append(event)
    return tuple(event for event in result if id(event) not in used)


def _judge(
    name: str,
    machines: tuple[Machine, ...],
    events: tuple[Event, ...],
    owners: _Owners,
    context: GuardContext,
    recorded: Mapping[str, str],
    planned_roles: Mapping[str, str] | None,
) -> NodeView:
    group = owners.groups.get(name, CLUSTER)
    layer = owners.layers.get(name)
    role = recorded.get(name) or context.roles.get(name)
    member = any(machine.kind == APPLY for machine in machines)
    losses = [event for event in events if event.loss]
    removed = {event.address for event in losses}
    if layer is not None:
        stays = True  # another layer's node: this plan cannot be the request that removes it
    elif group == CLUSTER and context.roles:
        stays = name in context.roles
    elif group == CLUSTER and planned_roles is not None:
        stays = name in planned_roles
    else:
        stays = any(machine.address not in removed for machine in machines) or any(
            event.action in ("created", "imported") for event in events
        )
    if not losses:
        fate = Fate.NEW if not machines and events else Fate.KEPT
    elif any(event.action == "replaced" for event in losses):
        fate = Fate.REPLACED
    elif stays and not context.teardown:
        fate = Fate.MACHINE_LOST
    else:
        fate = Fate.LEAVING
    return NodeView(name, group, role, member, stays, fate, events, machines, layer)


def describe(nodes: Iterable[NodeView]) -> str:
    return ", ".join(node.described() for node in nodes)


__all__ = [
    "APPLY",
    "CONTAINER",
    "DISRUPTED",
    "VM",
    "Event",
    "Fate",
    "Machine",
    "NodeView",
    "NodesView",
    "describe",
    "identity_of",
    "machine_kind",
    "node_view",
]
