"""How terravixens reaches a node: one fallback chain, pure functions of the site model, unit-tested branch by branch.

The address used to manage a node follows a fallback chain, from the most to the least preferred:
routable address -> management VLAN (111 by default) -> any other VLAN (lowest id first) -> maintenance IP.
A new node is first contacted on its maintenance IP (the address it has in maintenance mode, before any
configuration): that is the `endpoint` of its configuration apply, while `node` is the managed address.
Everything else (terravixens.config.placement, the constructs, the upgrade command) asks `managed()`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from terravixens.config.network import DEFAULT_MANAGEMENT_VLAN, NodeNetworks


class NoAddressError(ValueError):
    pass


@dataclass(frozen=True)
class Managed:
    """The managed address, and its network when it is an interface address (the maintenance IP has no prefix)."""

    address: str
    subnet: str | None


def _interface(networks: NodeNetworks, management_vlan: int) -> str | None:
    """The chain above without its last link: the interface (address/prefix) to manage the node on, if any."""
    if networks.routable is not None:
        return networks.routable.address
    if management_vlan in networks.vlans:
        return networks.vlans[management_vlan].address
    if networks.vlans:
        return networks.vlans[min(networks.vlans)].address
    return None


@lru_cache(maxsize=8192)
def _interface_of(text: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    """Parsed once per address: placing a node asks for its managed address and network several times."""
    return ipaddress.ip_interface(text)


def managed(networks: NodeNetworks, management_vlan: int = DEFAULT_MANAGEMENT_VLAN) -> Managed:
    """The address terravixens manages the node at, by the fallback chain above, with its network."""
    interface = _interface(networks, management_vlan)
    if interface is not None:
        parsed = _interface_of(interface)
        return Managed(str(parsed.ip), str(parsed.network))
    if networks.maintenance_ip is not None:
        return Managed(networks.maintenance_ip, None)
    raise NoAddressError(
        "the node has no address: give it networks.maintenance_ip, a VLAN interface under networks.vlans "
        "or networks.routable"
    )


def node_address(networks: NodeNetworks, management_vlan: int = DEFAULT_MANAGEMENT_VLAN) -> str:
    return managed(networks, management_vlan).address


def managed_subnet(networks: NodeNetworks, management_vlan: int = DEFAULT_MANAGEMENT_VLAN) -> str | None:
    """The network of the managed address (None when that is the maintenance IP, which carries no prefix).

    Talos pins etcd's advertised address and the kubelet's node IP to it: a node with several networks would
    otherwise advertise whichever address sorts first (often the maintenance one).
    """
    if _interface(networks, management_vlan) is None:
        return None
    return managed(networks, management_vlan).subnet


def first_contact_address(networks: NodeNetworks, management_vlan: int = DEFAULT_MANAGEMENT_VLAN) -> str:
    """Where a new node is reached before it has a configuration: its maintenance IP when it has one."""
    if networks.maintenance_ip is not None:
        return networks.maintenance_ip
    return node_address(networks, management_vlan)
