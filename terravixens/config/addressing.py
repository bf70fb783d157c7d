"""How terravixens reaches a node: pure functions of the site model, unit-tested branch by branch.

The address used to manage a node follows a fallback chain, from the most to the least preferred:
routable address -> management VLAN (111 by default) -> any other VLAN (lowest id first) -> maintenance IP.
A new node is first contacted on its maintenance IP (the address it has in maintenance mode, before any
configuration): that is the `endpoint` of its configuration apply, while `node` is the managed address.
"""
from __future__ import annotations

import ipaddress

from terravixens.config.model import DEFAULT_MANAGEMENT_VLAN, NodeNetworks


class NoAddressError(ValueError):
    pass


def _ip(interface: str) -> str:
    return str(ipaddress.ip_interface(interface).ip)


def node_address(networks: NodeNetworks, management_vlan: int = DEFAULT_MANAGEMENT_VLAN) -> str:
    """The address terravixens manages the node at, by the fallback chain above."""
    if networks.routable is not None:
        return _ip(networks.routable.address)
    if management_vlan in networks.vlans:
        return _ip(networks.vlans[management_vlan].address)
    if networks.vlans:
        return _ip(networks.vlans[min(networks.vlans)].address)
    if networks.maintenance_ip is not None:
        return networks.maintenance_ip
    raise NoAddressError(
        "the node has no address: give it networks.maintenance_ip, a VLAN interface under networks.vlans "
        "or networks.routable"
    )


def managed_subnet(networks: NodeNetworks, management_vlan: int = DEFAULT_MANAGEMENT_VLAN) -> str | None:
    """The network of the managed address (None when that is the maintenance IP, which carries no prefix).

    Talos pins etcd's advertised address and the kubelet's node IP to it: a node with several networks would
    otherwise advertise whichever address sorts first (often the maintenance one).
    """
    if networks.routable is not None:
        interface = networks.routable.address
    elif management_vlan in networks.vlans:
        interface = networks.vlans[management_vlan].address
    elif networks.vlans:
        interface = networks.vlans[min(networks.vlans)].address
    else:
        return None
    return str(ipaddress.ip_interface(interface).network)


def first_contact_address(networks: NodeNetworks, management_vlan: int = DEFAULT_MANAGEMENT_VLAN) -> str:
    """Where a new node is reached before it has a configuration: its maintenance IP when it has one."""
    if networks.maintenance_ip is not None:
        return networks.maintenance_ip
    return node_address(networks, management_vlan)
