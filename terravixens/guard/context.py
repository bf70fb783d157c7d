"""What the guard knows besides the plan: roles from the site file, what L0 resources are in use, what the plan
run said about reboot checks, and which nodes the operator allows to reboot.

All of it is built from the site file and from Terraform's own output; nothing is guessed from machine
configuration text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from terravixens.catalogue import CONTAINERS, VMS
from terravixens.config.model import Site
from terravixens.inputs import JsonObject
from terravixens.layers import Layer
from terravixens.logical_ids import owner_of, standalone_owner_of
from terravixens.talos.image import disk_image_file_name

REBOOT_CHECK_FAILED = "Cannot check reboot requirement"


@dataclass
class Usage:
    """Who uses each L0 resource: bridges by (Proxmox node, bridge), images by (Proxmox node, datastore, file),
    storage by its id (cluster-wide in Proxmox), and the automation user while any VM is managed. Each maps to the
    users' descriptions, for the message."""

    bridges: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    images: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)
    storages: dict[str, set[str]] = field(default_factory=dict)
    api_user: set[str] = field(default_factory=set)
    # The deployed machines by Proxmox identity (node name, VM id) -> (layer, owning node or VM name): a plan of one
    # layer that deletes or re-creates a machine another layer's node runs on is judged on that node.
    machines: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)
    # Whether what the deployed machines use is known (their layers' states were read): `plan-guard` without
    # --deployed-state knows the site only, and a storage no site node names may still hold a deployed VM's disk.
    deployed_known: bool = True

    def add_bridge(self, node_name: str, bridge: str, user: str) -> None:
        self.bridges.setdefault((node_name, bridge), set()).add(user)

    def add_image(self, node_name: str, datastore: str, file_name: str, user: str) -> None:
        self.images.setdefault((node_name, datastore, file_name), set()).add(user)

    def add_storage(self, storage: str, user: str) -> None:
        self.storages.setdefault(storage, set()).add(user)

    def storage_users(self, storage: object) -> set[str]:
        """Who has a disk on the storage a plan's `id` names (none when it is not text)."""
        return self.storages.get(storage, set()) if isinstance(storage, str) else set()

    def bridge_users(self, node_name: object, bridge: object) -> set[str]:
        """Who uses the bridge a plan's values name (values are what Terraform wrote: none when they are not text)."""
        if isinstance(node_name, str) and isinstance(bridge, str):
            return self.bridges.get((node_name, bridge), set())
        return set()

    def image_users(self, node_name: object, datastore: object, file_name: object) -> set[str]:
        """Who boots from the image a plan's values name (none when the values are not text)."""
        if isinstance(node_name, str) and isinstance(datastore, str) and isinstance(file_name, str):
            return self.images.get((node_name, datastore, file_name), set())
        return set()


def site_usage(site: Site, usage: Usage | None = None) -> Usage:
    """What the site's nodes want from L0: their bridge on their hypervisor and the image they would boot from.

    Counted for deploys only: a teardown (`plan -destroy`) of L0 is judged on what is deployed, not on the site.
    """
    usage = usage or Usage()
    for cluster_name, cluster in sorted(site.clusters.items()):
        for node_name, (_, node) in cluster.nodes().items():
            hypervisor = site.hypervisors.get(node.hypervisor)
            if hypervisor is None:
                continue
            who = f"node {node_name} of cluster {cluster_name} (site file)"
            usage.add_bridge(hypervisor.node_name, node.bridge or cluster.bridge, who)
            usage.add_storage(node.storage or hypervisor.datastores.vm, who)
            usage.add_image(
                hypervisor.node_name,
                hypervisor.datastores.images,
                disk_image_file_name(hypervisor.talos_image, cluster.talos_version),
                who,
            )
    for name, guest in sorted(site.standalone.nodes.items()):
        hypervisor = site.hypervisors.get(guest.parent)
        if hypervisor is not None:  # a guest of a hypervisor (L2 `standalone`); nested hosts' guests are not L0's
            who = f"standalone {guest.type} {name} (site file)"
            usage.add_bridge(hypervisor.node_name, guest.bridge, who)
            usage.add_storage(guest.storage or hypervisor.datastores.vm, who)
    return usage


def _state_resources(state: Mapping[str, Any]) -> Iterable[tuple[str, str, JsonObject]]:
    """(type, name, attributes) of every managed resource instance in a raw state (`terraform state pull`) or in
    the state JSON of `terraform show -json`."""
    if "resources" in state:  # raw state, version 4
        for resource in state.get("resources") or []:
            if not isinstance(resource, dict) or resource.get("mode", "managed") != "managed":
                continue
            for instance in resource.get("instances") or []:
                if isinstance(instance, dict) and instance.get("deposed"):
                    continue  # a left-over of a failed replacement: no node runs on it
                attributes = instance.get("attributes") if isinstance(instance, dict) else None
                if isinstance(attributes, dict):
                    yield str(resource.get("type")), str(resource.get("name")), attributes
        return
    modules = [((state.get("values") or {}).get("root_module") or {})]
    while modules:
        module = modules.pop()
        for resource in module.get("resources") or []:
            if (
                isinstance(resource, dict)
                and resource.get("mode", "managed") == "managed"
                and not resource.get("deposed_key")
            ):
                yield str(resource.get("type")), str(resource.get("name")), resource.get("values") or {}
        modules += module.get("child_modules") or []


def deployed_usage(states: Mapping[str, Mapping[str, Any]], usage: Usage | None = None) -> Usage:
    """What the deployed VMs and containers use, from the platform stacks' and the `standalone` stack's states
    (layer name -> state JSON)."""
    usage = usage or Usage()
    for layer, state in sorted(states.items()):
        for kind, name, attributes in _state_resources(state):
            if kind not in VMS and kind not in CONTAINERS:
                continue
            node_name = attributes.get("node_name")
            what = "VM" if kind in VMS else "CT"
            who = f"{what} {attributes.get('name') or name} in {layer} (deployed)"
            usage.api_user.add(who)
            vm_id = pve_vm_id(attributes)
            if isinstance(node_name, str) and vm_id is not None:
                usage.machines[(node_name, vm_id)] = (
                    layer,
                    owner_of(name) or standalone_owner_of(name) or str(attributes.get("name") or name),
                )
            for device in (attributes.get("network_device") or []) + (attributes.get("network_interface") or []):
                if isinstance(device, dict) and device.get("bridge") and node_name:
                    usage.add_bridge(node_name, device["bridge"], who)
            for storage in _datastores(attributes):
                usage.add_storage(storage, who)
    return usage


def _datastores(attributes: Mapping[str, Any]) -> set[str]:
    """The storages a deployed VM or container has a disk on: its disks (a VM's list, a container's one block), its
    cloud-init drive (`initialization`) and a VM's EFI and TPM disks."""
    found: set[str] = set()
    for key in ("disk", "initialization", "efi_disk", "tpm_state"):
        blocks = attributes.get(key)
        for block in blocks if isinstance(blocks, list) else [blocks]:
            if isinstance(block, dict) and isinstance(block.get("datastore_id"), str) and block["datastore_id"]:
                found.add(block["datastore_id"])
    return found


@dataclass(frozen=True)
class RebootChecks:
    """What `terraform plan -json` said: the applies whose reboot check could not run (the talos provider warns
    "Cannot check reboot requirement" and plans `auto`). Present only when the plan's log was read."""

    unchecked_addresses: frozenset[str] = frozenset()
    unchecked_details: tuple[str, ...] = ()

    @classmethod
    def from_log(cls, messages: Iterable[object]) -> RebootChecks:
        addresses: set[str] = set()
        details: list[str] = []
        for message in messages:
            diagnostic = message.get("diagnostic") if isinstance(message, Mapping) else None
            if not isinstance(diagnostic, Mapping) or diagnostic.get("summary") != REBOOT_CHECK_FAILED:
                continue
            if diagnostic.get("address"):
                addresses.add(str(diagnostic["address"]))
            details.append(str(diagnostic.get("detail", "")))
        return cls(frozenset(addresses), tuple(details))

    def unchecked(self, address: str, node_address: str | None) -> bool:
        if address in self.unchecked_addresses:
            return True
        return node_address is not None and any(f"Node {node_address}:" in detail for detail in self.unchecked_details)


@dataclass(frozen=True)
class GuardContext:
    """roles: node -> 'controlplane' | 'worker' from the site file; usage: who uses L0 resources (None: not known,
    the L0 check is skipped); reboot_checks: the plan log's reboot-check warnings (None: no log was read);
    allow_reboot: nodes the operator lets reboot; waived: check codes an operation lifts on purpose (decommission);
    teardown: the plan takes things down on request (`destroy`, `decommission`'s steps, `plan-guard --teardown`), so
    a node whose machine or apply it deletes is leaving, not a node the site keeps losing its machine."""

    roles: Mapping[str, str] = field(default_factory=dict)
    usage: Usage | None = None
    reboot_checks: RebootChecks | None = None
    allow_reboot: frozenset[str] = frozenset()
    waived: frozenset[str] = frozenset()
    teardown: bool = False


class AmbiguousRoles(ValueError):
    pass


def site_roles(site: Site, layer: Layer | None = None) -> dict[str, str]:
    """Node -> role for the cluster whose roles `layer`'s plan is judged with (its GuardFacts.roles: none for a layer
    without), or for every cluster of the site when no layer is given (a node name in two clusters with two roles
    must then be disambiguated)."""
    clusters = sorted(site.clusters)
    if layer is not None:
        if not layer.guard.roles:
            return {}
        clusters = [name for name in clusters if layer.cluster in (None, name)]
    roles: dict[str, str] = {}
    for cluster_name in clusters:
        for node_name, (role, _) in site.clusters[cluster_name].nodes().items():
            if roles.get(node_name, role) != role:
                raise AmbiguousRoles(
                    f"node {node_name!r} is a {roles[node_name]} in one cluster and a {role} in "
                    f"another: name the layer (--layer platform-<cluster>)"
                )
            roles[node_name] = role
    return roles


def pve_vm_id(values: object) -> int | None:
    """A VM's or container's Proxmox id from its attributes: `vm_id` (the SDK resources), else a numeric `id` (the
    framework ones, whose id is the VM id)."""
    for key in ("vm_id", "id"):
        value = values.get(key) if isinstance(values, Mapping) else None
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def apply_node_address(values: object) -> str | None:
    node = values.get("node") if isinstance(values, Mapping) else None
    return node if isinstance(node, str) else None


__all__ = [
    "AmbiguousRoles",
    "GuardContext",
    "RebootChecks",
    "Usage",
    "apply_node_address",
    "deployed_usage",
    "pve_vm_id",
    "site_roles",
    "site_usage",
]
