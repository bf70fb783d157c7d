"""TalosNode: one Talos VM on Proxmox and the application of its machine configuration, reset when it leaves."""

from __future__ import annotations

from dataclasses import dataclass

from cdktf import TerraformResourceLifecycle
from constructs import Construct

from terravixens._bindings.proxmox.virtual_environment_vm import (
    VirtualEnvironmentVm,
    VirtualEnvironmentVmAgent,
    VirtualEnvironmentVmCpu,
    VirtualEnvironmentVmDisk,
    VirtualEnvironmentVmMemory,
    VirtualEnvironmentVmOperatingSystem,
    VirtualEnvironmentVmSerialDevice,
)
from terravixens._bindings.talos.machine_configuration_apply import MachineConfigurationApply
from terravixens.config.model import Cluster
from terravixens.config.placement import PlacedNode
from terravixens.constructs.build import address, locate, null
from terravixens.constructs.cluster_config import ClusterConfig
from terravixens.logical_ids import node_id, pin
from terravixens.talos.image import disk_image_file_id
from terravixens.talos.patches import node_patch

NETWORK_DEVICE_KEYS = (
    "bridge",
    "disconnected",
    "enabled",
    "firewall",
    "mac_address",
    "model",
    "mtu",
    "queues",
    "rate_limit",
    "trunks",
    "vlan_id",
)


@dataclass(frozen=True)
class TalosNodeProps:
    """placed: the node with its role, hypervisor and addresses (terravixens.config.placement.place / placed_nodes)."""

    placed: PlacedNode
    cluster: Cluster
    cluster_config: ClusterConfig
    apply_mode: str = "staged_if_needing_reboot"
    reset_on_destroy: bool = True
    # How the reset runs when the apply is destroyed. Graceful: cordon, drain, leave etcd — impossible for the last
    # control plane of a cluster, which `terravixens decommission` resets with graceful=False. Reboot: the wiped node
    # comes back in maintenance mode (decommission) instead of powering off (a leaving node whose VM goes too).
    reset_graceful: bool = True
    reboot_after_reset: bool = False


class TalosNode(Construct):
    """The VM and the machine-configuration apply of one node, and nothing of any other node.

    Safety properties (each pinned by a test):
    - logical ids come from the node's name only (`node_<name>_vm`, `node_<name>_apply`): a role change keeps the VM;
    - a new hypervisor migrates the VM; a new vm_id replaces it, and then the apply is replaced too (graceful reset
      of the old machine, configuration of the new one) instead of leaving a blank VM behind;
    - the apply resets this node, gracefully (cordon, drain, leave etcd), when the node leaves the site file, and
      only then: no attribute of the apply forces a replacement in the Talos provider 0.11;
    - `staged_if_needing_reboot`: a change that needs a reboot is staged, never rebooting several nodes at once;
    - the VM ignores changes to its boot image (`disk[0].import_from`): a Talos upgrade of the image never replaces
      a VM; the running system is upgraded in place by `terravixens upgrade`.
    """

    def __init__(self, scope: Construct, id: str, props: TalosNodeProps):
        super().__init__(scope, id)
        locate(self, scope, id)
        self.props = props
        placed = props.placed
        self.node_name = placed.name
        self.address = placed.address
        self.first_contact = placed.first_contact
        self.vm = pin(self._vm(), node_id(placed.name, "vm"))
        vm_address = address(type(self.vm), node_id(placed.name, "vm"))
        self.apply = pin(
            MachineConfigurationApply(
                self,
                "apply",
                # node == endpoint: talosctl reaches the machine where it answers today. A new managed address is
                # configured by this very apply, so it cannot be the target of it (ADR 0008).
                node_attribute=self.first_contact,
                endpoint=self.first_contact,
                client_configuration=props.cluster_config.client_configuration(),
                machine_configuration_input=props.cluster_config.machine_configuration(placed.role),
                config_patches=[node_patch(placed, props.cluster)],
                apply_mode=props.apply_mode,
                on_destroy={
                    "reset": props.reset_on_destroy,
                    "graceful": props.reset_graceful,
                    "reboot": props.reboot_after_reset,
                },
                depends_on=[self.vm],
                # A replaced VM (new vm_id) is a new machine: reset the old one gracefully, then configure the new one.
                lifecycle=TerraformResourceLifecycle(replace_triggered_by=[f"{vm_address}.id"]),
            ),
            node_id(placed.name, "apply"),
        )

    def _vm(self) -> VirtualEnvironmentVm:
        placed, cluster = self.props.placed, self.props.cluster
        node, hypervisor = placed.node, placed.hypervisor
        # Proxmox stores tags lowercased and sorted; anything else diffs forever.
        tags = sorted({tag.lower() for tag in ["talos", "terravixens", *node.tags]})
        vm = VirtualEnvironmentVm(
            self,
            "vm",
            node_name=hypervisor.node_name,
            vm_id=node.vm_id,
            name=placed.hostname,
            description="Talos node managed by terravixens",
            tags=tags,
            on_boot=True,
            started=True,
            # Without the guest agent a shutdown can hang; stopping is safe because the apply reset the node first.
            stop_on_destroy=True,
            # Moving a node to another hypervisor migrates the VM instead of replacing it.
            migrate=True,
            machine="q35",
            bios="seabios",
            scsi_hardware="virtio-scsi-single",
            boot_order=["scsi0"],
            agent=VirtualEnvironmentVmAgent(
                enabled=any(name.endswith("qemu-guest-agent") for name in hypervisor.talos_image.extensions),
                trim=True,
            ),
            cpu=VirtualEnvironmentVmCpu(cores=node.cpu, type="host"),
            memory=VirtualEnvironmentVmMemory(dedicated=node.memory_mib),
            operating_system=VirtualEnvironmentVmOperatingSystem(type="l26"),
            serial_device=[VirtualEnvironmentVmSerialDevice(device="socket")],
            disk=[
                VirtualEnvironmentVmDisk(
                    interface="scsi0",
                    # The node's own storage (site rule: declared on its hypervisor, holding images), else the default.
                    datastore_id=node.storage or hypervisor.datastores.vm,
                    import_from_attribute=disk_image_file_id(
                        hypervisor.talos_image, cluster.talos_version, hypervisor.datastores.images
                    ),
                    size=node.disk_gib,
                    file_format="raw",
                    iothread=True,
                    discard="on",
                    ssd=True,
                )
            ],
            lifecycle=TerraformResourceLifecycle(ignore_changes=["disk[0].import_from"]),
        )
        # A trunk: VLAN interfaces are configured inside Talos, so changing a VLAN never touches the VM.
        # bpg types network_device as a list of objects: Terraform wants every key, so unset ones are null
        # (the binding would drop them, and `terraform validate` refuses the result).
        device: dict[str, object] = dict.fromkeys(NETWORK_DEVICE_KEYS, null())
        device.update(bridge=node.bridge or cluster.bridge, model="virtio", firewall=False)
        if node.mac_address is not None:
            # bpg updates the NIC in place (no new VM); null lets Proxmox choose, and keeps what it chose (ADR 0024).
            device["mac_address"] = node.mac_address
        vm.add_override("network_device", [device])
        return vm
