"""Machine configuration patches as YAML documents: cluster-wide ones, and one per node.

A node's patch depends only on that node's entry in the site file and on cluster-wide settings, never on another
node: this is what keeps a change to one node from touching another node's configuration apply.
Addresses and hostnames live here, in the Talos configuration, not in Proxmox cloud-init snippets (a changed
snippet file id forces the VM to be replaced).

What a patch holds follows the cluster's configuration contract (docs/adr/0023): up to v1.11 the hostname is
`machine.network.hostname`; from v1.12 Talos generates a `HostnameConfig` document that refuses that key, so the
hostname goes into that document, static (`auto: "off"`), never generated. The network stays in
`machine.network.interfaces` under every contract: deprecated from 1.12 but accepted without a warning, and moving a
live node to the new link documents would rename its VLAN links (ADR 0023 says what a migration needs).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from terravixens import talos_versions as versions
from terravixens.config.model import Cluster, Node
from terravixens.config.placement import PlacedNode
from terravixens.roles import Role
from terravixens.talos import yaml_text
from terravixens.talos.image import installer_image

# Talos gives DHCP routes metric 1024, like our static defaults: DHCP on the maintenance network goes below them.
DHCP_ROUTE_METRIC = 2048


def _dump(document: dict[str, Any]) -> str:
    return yaml_text.dump(document)  # yaml.safe_dump(document, sort_keys=True, default_flow_style=False), faster


def hostname_config(hostname: str) -> dict[str, Any]:
    """The HostnameConfig document of contracts >= v1.12. `auto` must be "off": Talos' patcher keeps the generated
    `auto: stable` beside our hostname otherwise (and refuses both); yaml writes it quoted, so no YAML 1.1 reader
    turns it into the boolean false."""
    return {"apiVersion": "v1alpha1", "kind": "HostnameConfig", "hostname": hostname, "auto": "off"}


def cluster_patch(cluster: Cluster) -> str:
    """Cilium replaces both the CNI and kube-proxy, so Talos installs neither."""
    return _dump(
        {
            "cluster": {"network": {"cni": {"name": "none"}}, "proxy": {"disabled": True}},
            "machine": {"features": {"kubePrism": {"enabled": True, "port": 7445}}},
        }
    )


# The one Talos API role the backup job needs (talos machinery's role.EtcdBackup: /machine.MachineService/
# EtcdSnapshot only).
ETCD_BACKUP_ROLE = "os:etcd:backup"


def control_plane_patch(cluster: Cluster) -> str | None:
    """What only the control planes' configuration adds: Talos API access from Kubernetes for the offsite etcd
    backup job (ADR 0059) — its role only, from its namespace only. Talos refuses the feature on workers (and the job
    talks to the control planes' apid through the `talos` Service). None when the cluster has no etcd_backup."""
    if cluster.etcd_backup is None:
        return None
    return _dump(
        {
            "machine": {
                "features": {
                    "kubernetesTalosAPIAccess": {
                        "enabled": True,
                        "allowedRoles": [ETCD_BACKUP_ROLE],
                        "allowedKubernetesNamespaces": [cluster.etcd_backup.namespace],
                    }
                }
            }
        }
    )


def _vlan_entries(node: Node, role: Role, cluster: Cluster) -> list[dict[str, Any]]:
    entries: dict[int, dict[str, Any]] = {}
    metric = 1024
    ordered = []
    if node.networks.routable:
        ordered.append((node.networks.routable.vlan, node.networks.routable.address, node.networks.routable.gateway))
    ordered += [(vlan, item.address, item.gateway) for vlan, item in sorted(node.networks.vlans.items())]
    for vlan, address, gateway in ordered:
        entry = entries.setdefault(vlan, {"vlanId": vlan, "addresses": []})
        entry["addresses"].append(address)
        if gateway:
            network = "0.0.0.0/0" if ipaddress.ip_interface(address).version == 4 else "::/0"
            entry.setdefault("routes", []).append({"network": network, "gateway": gateway, "metric": metric})
            metric += 1
    if role is Role.CONTROLPLANE and cluster.management_vlan in entries:
        # The shared API address floats between control planes on the management VLAN.
        entries[cluster.management_vlan]["vip"] = {"ip": cluster.endpoint_vip}
    return [entries[vlan] for vlan in sorted(entries)]


def node_patch(placed: PlacedNode, cluster: Cluster) -> str:
    """The patch of one placed node: only its own site entry and cluster-wide settings go in."""
    node, role = placed.node, placed.role
    interface: dict[str, Any] = {"deviceSelector": {"physical": True}}
    if node.networks.maintenance_ip is not None:
        # Keeping DHCP on the untagged network keeps the maintenance path: a second way in if a VLAN is misconfigured.
        interface["dhcp"] = True
        interface["dhcpOptions"] = {"routeMetric": DHCP_ROUTE_METRIC}
    vlans = _vlan_entries(node, role, cluster)
    if vlans:
        interface["vlans"] = vlans
    hostname_document = versions.writes_hostname_config(versions.minor_of(cluster.contract))
    network: dict[str, Any] = (
        {"interfaces": [interface]} if hostname_document else {"hostname": placed.hostname, "interfaces": [interface]}
    )
    machine: dict[str, Any] = {
        "network": network,
        "install": {
            "disk": cluster.install_disk,
            "image": installer_image(placed.hypervisor.talos_image, cluster.talos_version),
        },
    }
    if node.labels:
        machine["nodeLabels"] = dict(sorted(node.labels.items()))
    if node.taints:
        # Talos joins key and value as key=value:Effect; an empty value stays as ":Effect".
        machine["nodeTaints"] = {taint.key: f"{taint.value}:{taint.effect}" for taint in node.taints}
    document: dict[str, Any] = {"machine": machine}
    subnet = placed.managed_subnet
    if subnet is not None:
        # Multi-homed nodes: etcd and the kubelet use the managed network, the one health checks and peers expect.
        machine["kubelet"] = {"nodeIP": {"validSubnets": [subnet]}}
        if role is Role.CONTROLPLANE:
            document["cluster"] = {"etcd": {"advertisedSubnets": [subnet]}}
    if hostname_document:
        return _dump(document) + "---\n" + _dump(hostname_config(placed.hostname))
    return _dump(document)
