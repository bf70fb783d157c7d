"""TalosNode: one Talos VM on Proxmox and the application of its machine configuration, reset when it leaves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cdktf import TerraformResourceLifecycle
from constructs import Construct

from terravixens.catalogue import NODE_APPLY, NODE_VM
from terravixens.config.model import Cluster
from terravixens.config.placement import PlacedNode
from terravixens.constructs import python_blocks
from terravixens.constructs.build import address, locate, location_of, null
from terravixens.constructs.cluster_config import ClusterConfig
from terravixens.logical_ids import node_id, pin
from terravixens.talos.image import disk_image_file_id
from terravixens.talos.patches import node_patch

if TYPE_CHECKING:  # the bindings are imported when the elements are created (most synths write them from Python)
    from terravixens._bindings.proxmox.virtual_environment_vm import VirtualEnvironmentVm
    from terravixens._bindings.talos.machine_configuration_apply import MachineConfigurationApply

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
DESCRIPTION = "Talos node managed by terravixens"
# The binding arguments named otherwise than their Terraform attribute (a clash with a construct's own members).
BINDING_NAMES = {"import_from": "import_from_attribute", "node": "node_attribute"}
E = TypeVar("E")
IGNORED_IMAGE = "disk[0].import_from"


def _binding_arguments(body: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """A block's keys as its binding's keyword arguments."""
    return {BINDING_NAMES.get(key, key): value for key, value in body.items() if key not in skip}


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

    In the app's stacks (terravixens.stacks.LayerStack) the two resources are written from Python, the JSON their
    bindings write, and become elements when something needs them (`vm`, `apply`, an Aspect of the stack, a rule
    error, `python_blocks.materialize(stack)`): see terravixens.constructs.python_blocks. `materialize()` creates them.
    """

    def __init__(self, scope: Construct, id: str, props: TalosNodeProps):
        super().__init__(scope, id)
        locate(self, scope, id)
        self.props = props
        placed = props.placed
        self.node_name = placed.name
        self.address = placed.address
        self.first_contact = placed.first_contact
        self._patch = node_patch(placed, props.cluster)
        self._vm: VirtualEnvironmentVm | None = None
        self._apply: MachineConfigurationApply | None = None
        # In the app's stacks, the two resources are written from Python until something needs their elements
        # (terravixens.constructs.python_blocks); elsewhere (a user's own stack) they are elements from the start.
        self._registry = python_blocks.blocks_for(scope)
        blocks = self._python_blocks(scope, id) if self._registry is not None else None
        if self._registry is None or blocks is None:
            self._registry = None
            self.materialize()
        else:
            self._registry.add(self, blocks)

    @property
    def vm(self) -> VirtualEnvironmentVm:
        """The node's VM (`proxmox_virtual_environment_vm.node_<name>_vm`)."""
        self._elements()
        return self._created(self._vm)

    @property
    def apply(self) -> MachineConfigurationApply:
        """The application of its machine configuration (`talos_machine_configuration_apply.node_<name>_apply`)."""
        self._elements()
        return self._created(self._apply)

    @property
    def written_from_python(self) -> bool:
        """True while its resources are blocks written from Python (no cdktf element yet)."""
        return self._vm is None

    def apply_reference(self) -> str:
        """What a depends_on names for the apply: its element's reference, or its address while written from Python."""
        if self._apply is not None:
            return self._apply.fqn
        return f"{NODE_APPLY}.{node_id(self.node_name, 'apply')}"

    def _elements(self) -> None:
        """Its resources as elements: every node of its stack becomes elements at once (python_blocks)."""
        if self._vm is None:
            if self._registry is not None:
                self._registry.materialize()
            self.materialize()

    def _created(self, element: E | None) -> E:
        if element is None:  # materialize() creates both; never reached
            raise RuntimeError(f"TalosNode {self.node_name!r} has no elements")
        return element

    def materialize(self) -> None:
        """Create the VM and the apply as cdktf elements (once)."""
        if self._vm is not None:
            return
        from terravixens._bindings.proxmox.virtual_environment_vm import VirtualEnvironmentVm
        from terravixens._bindings.talos.machine_configuration_apply import MachineConfigurationApply

        placed = self.props.placed
        self._vm = pin(self._new_vm(), node_id(placed.name, "vm"))
        body = self._apply_body(address(VirtualEnvironmentVm, node_id(placed.name, "vm")))
        self._apply = pin(
            MachineConfigurationApply(
                self,
                "apply",
                **_binding_arguments(body, skip=("depends_on", "lifecycle")),
                depends_on=[self._vm],
                lifecycle=TerraformResourceLifecycle(**body["lifecycle"]),
            ),
            node_id(placed.name, "apply"),
        )

    # --------------------------------------------------------------------------------- what both ways share
    # The one place to touch for an attribute of the node's VM or apply: its body below. The element is created
    # from it (`_new_vm`, `materialize`) and the block from Python is it (`_python_blocks`), key for key as cdktf
    # writes it (keys sorted, unset arguments left out); tests/test_python_blocks.py compares the bytes both ways.
    def _vm_body(self) -> dict[str, Any]:
        """The VM's block as synth writes it (without cdktf's "//" metadata)."""
        placed = self.props.placed
        node, hypervisor = placed.node, placed.hypervisor
        datastore, image = self._disk_source()
        return {
            "agent": {"enabled": self._agent_enabled(), "trim": True},
            "bios": "seabios",
            "boot_order": ["scsi0"],
            "cpu": {"cores": node.cpu, "type": "host"},
            "description": DESCRIPTION,
            "disk": [
                {
                    "datastore_id": datastore,
                    "discard": "on",
                    "file_format": "raw",
                    "import_from": image,
                    "interface": "scsi0",
                    "iothread": True,
                    "size": node.disk_gib,
                    "ssd": True,
                }
            ],
            "lifecycle": {"ignore_changes": [IGNORED_IMAGE]},
            "machine": "q35",
            "memory": {"dedicated": node.memory_mib},
            "migrate": True,
            "name": placed.hostname,
            "network_device": [self._network_device(None)],
            "node_name": hypervisor.node_name,
            "on_boot": True,
            "operating_system": {"type": "l26"},
            "scsi_hardware": "virtio-scsi-single",
            "serial_device": [{"device": "socket"}],
            "started": True,
            "stop_on_destroy": True,
            "tags": self._tags(),
            "vm_id": node.vm_id,
        }

    def _apply_body(self, vm_address: str) -> dict[str, Any]:
        """The apply's block as synth writes it; `vm_address` is the VM's `<type>.<logical id>`."""
        props, placed = self.props, self.props.placed
        return {
            "apply_mode": props.apply_mode,
            "client_configuration": props.cluster_config.client_configuration(),
            "config_patches": [self._patch],
            "depends_on": [vm_address],
            # node == endpoint: talosctl reaches the machine where it answers today. A new managed address is
            # configured by this very apply, so it cannot be the target of it (ADR 0008).
            "endpoint": self.first_contact,
            # A replaced VM (new vm_id) is a new machine: reset the old one gracefully, then configure the new one.
            "lifecycle": {"replace_triggered_by": [f"{vm_address}.id"]},
            "machine_configuration_input": props.cluster_config.machine_configuration(placed.role),
            "node": self.first_contact,
            "on_destroy": self._on_destroy(),
        }

    def _tags(self) -> list[str]:
        # Proxmox stores tags lowercased and sorted; anything else diffs forever.
        return sorted({tag.lower() for tag in ["talos", "terravixens", *self.props.placed.node.tags]})

    def _agent_enabled(self) -> bool:
        return any(name.endswith("qemu-guest-agent") for name in self.props.placed.hypervisor.talos_image.extensions)

    def _disk_source(self) -> tuple[str, str]:
        """(datastore of the system disk, the image it is imported from)."""
        placed, cluster = self.props.placed, self.props.cluster
        node, hypervisor = placed.node, placed.hypervisor
        # The node's own storage (site rule: declared on its hypervisor, holding images), else the default.
        datastore = node.storage or hypervisor.datastores.vm
        image = disk_image_file_id(hypervisor.talos_image, cluster.talos_version, hypervisor.datastores.images)
        return datastore, image

    def _network_device(self, null_value: object) -> dict[str, object]:
        # A trunk: VLAN interfaces are configured inside Talos, so changing a VLAN never touches the VM.
        # bpg types network_device as a list of objects: Terraform wants every key, so unset ones are null
        # (the binding would drop them, and `terraform validate` refuses the result).
        node, cluster = self.props.placed.node, self.props.cluster
        device: dict[str, object] = dict.fromkeys(NETWORK_DEVICE_KEYS, null_value)
        device.update(bridge=node.bridge or cluster.bridge, model="virtio", firewall=False)
        if node.mac_address is not None:
            # bpg updates the NIC in place (no new VM); null lets Proxmox choose, and keeps what it chose (ADR 0024).
            device["mac_address"] = node.mac_address
        return device

    def _on_destroy(self) -> dict[str, bool]:
        props = self.props
        return {"reset": props.reset_on_destroy, "graceful": props.reset_graceful, "reboot": props.reboot_after_reset}

    # ---------------------------------------------------------------------------------------- as elements
    def _new_vm(self) -> VirtualEnvironmentVm:
        from terravixens._bindings.proxmox.virtual_environment_vm import (
            VirtualEnvironmentVm,
            VirtualEnvironmentVmDisk,
            VirtualEnvironmentVmSerialDevice,
        )

        body = self._vm_body()
        # The binding's arguments are the body's keys (BINDING_NAMES: the few the binding renames); a nested block
        # is a dict the binding's config turns into its struct, a list of blocks is built here; network_device is an
        # override (the binding would drop its nulls), lifecycle a meta-argument.
        arguments = _binding_arguments(body, skip=("network_device", "lifecycle"))
        arguments["disk"] = [VirtualEnvironmentVmDisk(**_binding_arguments(disk)) for disk in body["disk"]]
        arguments["serial_device"] = [VirtualEnvironmentVmSerialDevice(**item) for item in body["serial_device"]]
        vm = VirtualEnvironmentVm(self, "vm", **arguments, lifecycle=TerraformResourceLifecycle(**body["lifecycle"]))
        vm.add_override("network_device", [self._network_device(null())])
        return vm

    # ------------------------------------------------------------------------------- as blocks from Python
    def _python_blocks(self, scope: Construct, id: str) -> list[python_blocks.PythonBlock] | None:
        """The two blocks exactly as the elements above write them, or None when they are not plain data here
        (a cluster configuration in another stack: its references need cdktf's cross-stack wiring)."""
        props, placed = self.props, self.props.placed
        location = location_of(props.cluster_config)
        if location is None or location[0] is not scope or self._registry is None:
            return None
        client = props.cluster_config.client_configuration()
        machine_configuration = props.cluster_config.machine_configuration(placed.role)
        vm_id, apply_id = node_id(placed.name, "vm"), node_id(placed.name, "apply")
        # The types by name: asking a binding for its type would load its Node.js module (the VM's is 0.9 MB) for
        # nothing (tests/test_python_blocks.py checks they are the bindings' types).
        vm, apply = self._vm_body(), self._apply_body(f"{NODE_VM}.{vm_id}")
        tokens = frozenset([*client.values(), machine_configuration])
        if not (python_blocks.plain(vm, tokens) and python_blocks.plain(apply, tokens)):
            return None
        if None in (props.apply_mode, *self._on_destroy().values()):
            return None  # an unset argument is left out by the binding: let it write the block
        path = f"{self._registry.path}/{id.replace('/', '--')}"
        return [
            python_blocks.PythonBlock("resource", NODE_VM, vm_id, f"{path}/vm", vm, self, ("network_device",)),
            python_blocks.PythonBlock(
                "resource",
                NODE_APPLY,
                apply_id,
                f"{path}/apply",
                apply,
                self,
                tokens=tokens,
            ),
        ]
