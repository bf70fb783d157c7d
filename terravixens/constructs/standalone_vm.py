"""StandaloneVm: one standalone VM (type `vm`, or a nested Proxmox VE host of type `pve`) and its cloud-init vendor
data, created from a cloud image without a template (no clone)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from cdktf import TerraformResourceLifecycle, TerraformVariable, Token
from constructs import Construct

from terravixens._bindings.proxmox.virtual_environment_vm import (
    VirtualEnvironmentVm,
    VirtualEnvironmentVmCpu,
    VirtualEnvironmentVmDisk,
    VirtualEnvironmentVmInitialization,
    VirtualEnvironmentVmInitializationIpConfig,
    VirtualEnvironmentVmInitializationIpConfigIpv4,
    VirtualEnvironmentVmInitializationIpConfigIpv6,
    VirtualEnvironmentVmMemory,
    VirtualEnvironmentVmOperatingSystem,
    VirtualEnvironmentVmSerialDevice,
)
from terravixens.config.model import Datastores
from terravixens.constructs.node_env_snippet import NodeEnvSnippet, NodeEnvSnippetProps
from terravixens.constructs.talos_node import NETWORK_DEVICE_KEYS
from terravixens.logical_ids import pin, standalone_id
from terravixens.standalone.node_env import NO_TRUST, Trust
from terravixens.standalone.topology import Nic, PlacedGuest

# A nested hypervisor needs the host's CPU flags (VMX/SVM); any other VM gets a model every host of a cluster can
# run, so it can migrate.
CPU_TYPES = {"pve": "host", "vm": "x86-64-v2-AES"}


@dataclass(frozen=True)
class StandaloneVmProps:
    """placed: the node from terravixens.standalone.topology; proxmox_node: the Proxmox node it runs on (a
    hypervisor's node_name, or the nested host's name); tokens: the stack's sensitive `node_tokens` variable."""

    placed: PlacedGuest
    proxmox_node: str
    datastores: Datastores
    spec_server: str
    tokens: TerraformVariable
    # The site's private CA and plain-http allowance, written into node.env (node_env.Trust).
    trust: Trust = NO_TRUST
    # The stack's `agent_bundle_sha256` variable: the agent bundle the VM's first boot may run (ADR 0059).
    agent_sha256: TerraformVariable | None = None
    # An ACPI shutdown first (cloud images handle the power button); a VM that does not stop in time is stopped.
    shutdown_timeout_seconds: int = 300


def ip_config(nic: Nic) -> VirtualEnvironmentVmInitializationIpConfig:
    interface = ipaddress.ip_interface(nic.address)
    if interface.version == 6:
        return VirtualEnvironmentVmInitializationIpConfig(
            ipv6=VirtualEnvironmentVmInitializationIpConfigIpv6(address=nic.address, gateway=nic.gateway)
        )
    return VirtualEnvironmentVmInitializationIpConfig(
        ipv4=VirtualEnvironmentVmInitializationIpConfigIpv4(address=nic.address, gateway=nic.gateway)
    )


class StandaloneVm(Construct):
    """The VM (`sa_<name>_vm`) and its node.env carrier (`sa_<name>_node_env`), and nothing of any other node.

    Safety properties (each pinned by a test):
    - logical ids come from the node's name only: another node's change never touches this one;
    - the vendor data is referred to by its constant volume id, never by reference: rotating a token, changing the
      posture or editing the spec never replaces (nor reboots) the VM — only the snippet is replaced (ADR 0026);
    - cloud-init carries what Proxmox generates from `initialization` (addresses, gateway) plus that vendor data;
      DNS and users come from the spec (pulled), so a spec edit never changes `initialization` (which reboots);
    - the boot image (`disk[0].import_from`) is ignored after creation: a new image in the site applies to new
      VMs only, never replacing a running one.
    """

    def __init__(self, scope: Construct, id: str, props: StandaloneVmProps):
        super().__init__(scope, id)
        self.props = props
        placed = props.placed
        if placed.type not in CPU_TYPES or placed.image is None:
            raise ValueError(
                f"standalone node {placed.name!r} is a {placed.type!r} with image {placed.image!r}: a "
                f"StandaloneVm is a 'vm' or 'pve' node with an image; create a 'ct' with "
                f"StandaloneContainer"
            )
        self.node_name = placed.name
        self.node_env = NodeEnvSnippet(
            self,
            "node_env",
            NodeEnvSnippetProps(
                node=placed.name,
                proxmox_node=props.proxmox_node,
                datastore=props.datastores.images,
                spec_server=props.spec_server,
                trust=props.trust,
                tokens=props.tokens,
                carrier="cloud-init",
                agent_sha256=props.agent_sha256,
            ),
        )
        self.vm = pin(self._vm(), standalone_id(placed.name, "vm"))

    def _vm(self) -> VirtualEnvironmentVm:
        props, placed = self.props, self.props.placed
        vm = VirtualEnvironmentVm(
            self,
            "vm",
            node_name=props.proxmox_node,
            vm_id=placed.vm_id,
            name=placed.name,
            description=f"terravixens standalone {placed.type} {placed.name} (spec {placed.spec})",
            tags=sorted({"terravixens", "standalone", placed.type, *placed.tags}),
            on_boot=True,
            started=True,
            stop_on_destroy=False,
            timeout_shutdown_vm=props.shutdown_timeout_seconds,
            machine="q35",
            bios="seabios",
            scsi_hardware="virtio-scsi-single",
            boot_order=["scsi0"],
            cpu=VirtualEnvironmentVmCpu(cores=placed.cores, type=CPU_TYPES[placed.type]),
            memory=VirtualEnvironmentVmMemory(dedicated=placed.memory_mib),
            operating_system=VirtualEnvironmentVmOperatingSystem(type="l26"),
            # Cloud images log to the serial console.
            serial_device=[VirtualEnvironmentVmSerialDevice(device="socket")],
            disk=[
                VirtualEnvironmentVmDisk(
                    interface="scsi0",
                    datastore_id=props.datastores.vm,
                    import_from_attribute=placed.image,
                    size=placed.disk_gib,
                    file_format="raw",
                    iothread=True,
                    discard="on",
                    ssd=True,
                )
            ],
            initialization=VirtualEnvironmentVmInitialization(
                datastore_id=props.datastores.vm,
                interface="ide2",
                ip_config=[ip_config(nic) for nic in placed.nics],
                # A literal volume id, not a reference: see NodeEnvSnippet.
                vendor_data_file_id=self.node_env.volume_id,
            ),
            depends_on=[self.node_env.file],
            lifecycle=TerraformResourceLifecycle(ignore_changes=["disk[0].import_from"]),
        )
        # One NIC per address, in topology order (untagged first, then by VLAN id): what cloud-init numbers them by.
        # bpg types network_device as a list of objects: Terraform wants every key (see TalosNode).
        devices: list[dict[str, object]] = []
        for nic in placed.nics:
            device: dict[str, object] = dict.fromkeys(NETWORK_DEVICE_KEYS, Token.null_value())
            device.update(
                bridge=nic.bridge,
                model="virtio",
                firewall=False,
                vlan_id=nic.vlan if nic.vlan is not None else Token.null_value(),
            )
            devices.append(device)
        vm.add_override("network_device", devices)
        return vm
