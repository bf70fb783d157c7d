"""The network parts of the site model: bridges (of a hypervisor or a nested Proxmox host) and a Talos node's
addresses (its VLAN interfaces, its routable address, its maintenance IP).

Shared by the L0 and L1 sections (terravixens.config.model) and the L2 one (terravixens.config.standalone), and read
by the address fallback chain (terravixens.config.addressing), which needs nothing else of the model.
"""

from __future__ import annotations

from pydantic import Field

from terravixens.config.fields import InterfaceAddress, PlainAddress, Strict, VlanId

# The VLAN a cluster prefers to reach its nodes on, and the one carrying its API VIP (Cluster.management_vlan).
DEFAULT_MANAGEMENT_VLAN = 111


class Bridge(Strict):
    ports: list[str] = Field(default_factory=list, description="Physical ports of the bridge.")
    vlan_aware: bool = Field(True, description="VLAN-aware bridge (VM NICs are trunks; VLANs are configured in Talos).")
    vlans: list[VlanId] = Field(
        default_factory=list,
        description="VLANs allowed on this VLAN-aware bridge (1-4094); node VLANs must be in it when set.",
    )
    comment: str = Field("managed by terravixens", description="Comment Proxmox shows for the bridge.")


class VlanInterface(Strict):
    address: InterfaceAddress = Field(description="Address with prefix, e.g. `10.11.1.11/24`.")
    gateway: PlainAddress | None = Field(None, description="Default gateway on this VLAN, inside `address`' subnet.")


class RoutableAddress(Strict):
    vlan: VlanId = Field(description="The VLAN of the routable address.")
    address: InterfaceAddress = Field(description="Address with prefix, e.g. `192.0.2.11/24`.")
    gateway: PlainAddress | None = Field(None, description="Default gateway, inside `address`' subnet.")


class NodeNetworks(Strict):
    maintenance_ip: PlainAddress | None = Field(
        None, description="Where the fresh VM answers in maintenance mode (DHCP reservation on the untagged network)."
    )
    vlans: dict[VlanId, VlanInterface] = Field(
        default_factory=dict,
        description="One interface per VLAN id, e.g. `111: {address: 10.11.1.11/24, gateway: 10.11.1.1}`.",
    )
    routable: RoutableAddress | None = Field(
        None, description="The preferred management address, `{vlan, address, gateway}`."
    )
