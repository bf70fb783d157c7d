"""What `terravixens maintain HYPERVISOR` takes down and brings back, in which order, and when it must refuse — pure
functions of the site (ADR 0055); the run (terravixens.operations.maintain) reads the machines and acts.

Going down, per cluster (by name): its workers, then its control planes, each alone and by name; the standalone
guests of the hypervisor last (a DNS or a registry the cluster uses stays up while its nodes drain; a nested Proxmox
VE host after the other guests: its own guests stop with it). Coming back, the reverse: the guests first, then per
cluster its control planes (etcd's fault tolerance back first), then its workers.

A control plane that goes down stays an etcd member: etcd keeps its quorum while at most `n - (n // 2 + 1)` of its
`n` members are down. A hypervisor holding more of a cluster's control planes than that (counting members already
down elsewhere) cannot be emptied without losing quorum: `blocked` says which control planes to move first, and
where — the site edit and `terravixens deploy` that migrate their VMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.config.site_rules.failure_domains import majority, moves_off
from terravixens.roles import Role
from terravixens.standalone.topology import placement

QEMU, LXC = "qemu", "lxc"


@dataclass(frozen=True)
class TalosMachine:
    """A Talos node on the hypervisor: its cluster, its key, the name Kubernetes and etcd know it by, its role, its VM
    and the address talosctl reaches it at."""

    cluster: str
    name: str
    hostname: str
    role: Role
    vm_id: int
    address: str

    @property
    def unit(self) -> str:
        return f"{self.cluster}/{self.name}"

    @property
    def kind(self) -> str:
        return QEMU


@dataclass(frozen=True)
class HostedGuest:
    """A standalone guest of the hypervisor: a VM (`vm`, `pve`) or a container (`ct`); `inside`: the guests of a
    nested Proxmox VE host, which stop and start with it (they live on its own API, not this one)."""

    name: str
    type: str
    vm_id: int
    spec: str
    inside: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return LXC if self.type == "ct" else QEMU

    @property
    def unit(self) -> str:
        return f"guest {self.name}"


@dataclass(frozen=True)
class Hosted:
    """Everything of the site on one hypervisor, in the order it goes down."""

    hypervisor: str
    node_name: str
    talos: tuple[TalosMachine, ...]
    guests: tuple[HostedGuest, ...]

    def clusters(self) -> list[str]:
        return sorted({machine.cluster for machine in self.talos})

    def going_down(self) -> list[TalosMachine | HostedGuest]:
        return [*self.talos, *self.guests]

    def coming_back(self) -> list[TalosMachine | HostedGuest]:
        back: list[TalosMachine | HostedGuest] = list(reversed(self.guests))
        for cluster in self.clusters():
            mine = [m for m in self.talos if m.cluster == cluster]
            back += [m for m in mine if m.role is Role.CONTROLPLANE] + [m for m in mine if m.role is Role.WORKER]
        return back


def hosted(site: Site, hypervisor: str) -> Hosted:
    """What the site places on `hypervisor` (a key of `hypervisors`)."""
    talos: list[TalosMachine] = []
    for cluster_name in sorted(site.clusters):
        placed = [node for node in placed_nodes(site, cluster_name).values() if node.hypervisor_name == hypervisor]
        for role in (Role.WORKER, Role.CONTROLPLANE):
            talos += [
                TalosMachine(cluster_name, node.name, node.hostname, node.role, node.node.vm_id, node.address)
                for node in sorted(placed, key=lambda n: n.name)
                if node.role is role
            ]
    guests = placement(site)
    direct = sorted((g for g in guests.values() if g.parent == hypervisor), key=lambda g: (g.type == "pve", g.name))
    hosted_guests = tuple(
        HostedGuest(
            guest.name,
            guest.type,
            guest.vm_id,
            guest.spec,
            tuple(sorted(g.name for g in guests.values() if len(g.chain) > 1 and g.chain[1] == guest.name)),
        )
        for guest in direct
    )
    return Hosted(hypervisor, site.hypervisors[hypervisor].node_name, tuple(talos), hosted_guests)


@dataclass(frozen=True)
class Blocked:
    """Emptying the hypervisor would leave `cluster`'s etcd without quorum: `leaving` (its control planes there),
    `down` (members already down elsewhere), `left` of `count` members would answer where `needed` must;
    `moves`: the control planes to move first, and where."""

    cluster: str
    count: int
    leaving: tuple[str, ...]
    down: tuple[str, ...]
    left: int
    needed: int
    moves: tuple[tuple[str, str], ...]

    def message(self, hypervisor: str, platform: str) -> str:
        """`platform`: the cluster's platform layer, the one to deploy after a move."""
        down = f" and {', '.join(self.down)} already down elsewhere" if self.down else ""
        head = (
            f"{self.cluster}: emptying {hypervisor} shuts down {', '.join(self.leaving)}{down}: {self.left} of "
            f"{self.count} etcd members would be left where {self.needed} keep quorum (and the cluster's API)"
        )
        back = f"bring {', '.join(self.down)} back, or " if self.down else ""
        if self.moves:
            fix = " and ".join(f"{name} to {target}" for name, target in self.moves)
            return (
                f"{head}. First {back}move {fix} (clusters.{self.cluster}.control_planes.<name>.hypervisor, then "
                f"`bin/terravixens deploy {platform}`: the VM migrates), then run maintain again"
            )
        if self.down:
            return f"{head}. Bring {', '.join(self.down)} back first, then run maintain again"
        return f"{head}. No other hypervisor can take its control planes: add one to the site first"


def blocked(site: Site, hypervisor: str, down_elsewhere: dict[str, set[str]] | None = None) -> list[Blocked]:
    """Per cluster with control planes on `hypervisor`: whether shutting them down loses etcd's quorum, given the
    members already down elsewhere (`down_elsewhere`: cluster -> control plane keys)."""
    found = []
    for cluster_name, cluster in sorted(site.clusters.items()):
        leaving = sorted(name for name, node in cluster.control_planes.items() if node.hypervisor == hypervisor)
        if not leaving:
            continue
        down = sorted((down_elsewhere or {}).get(cluster_name, set()) - set(leaving))
        count = len(cluster.control_planes)
        left = count - len(leaving) - len(down)
        if left >= majority(count):
            continue
        moves = moves_off(site, cluster, hypervisor, majority(count) - left)
        if len(moves) < majority(count) - left:  # not enough hypervisors to take them: no half advice
            moves = []
        found.append(Blocked(cluster_name, count, tuple(leaving), tuple(down), left, majority(count), tuple(moves)))
    return found


__all__ = ["LXC", "QEMU", "Blocked", "Hosted", "HostedGuest", "TalosMachine", "blocked", "hosted"]
