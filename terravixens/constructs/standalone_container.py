"""StandaloneContainer: one standalone LXC container (type `ct`) from a template, and the hookscript that gives
it its node.env."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from cdktf import TerraformVariable
from constructs import Construct

from terravixens._bindings.proxmox.virtual_environment_container import (
    VirtualEnvironmentContainer,
    VirtualEnvironmentContainerCpu,
    VirtualEnvironmentContainerDisk,
    VirtualEnvironmentContainerFeatures,
    VirtualEnvironmentContainerInitialization,
    VirtualEnvironmentContainerInitializationIpConfig,
    VirtualEnvironmentContainerInitializationIpConfigIpv4,
    VirtualEnvironmentContainerInitializationIpConfigIpv6,
    VirtualEnvironmentContainerMemory,
    VirtualEnvironmentContainerNetworkInterface,
    VirtualEnvironmentContainerOperatingSystem,
)
from terravixens.config.model import Datastores
from terravixens.constructs.node_env_snippet import NodeEnvSnippet, NodeEnvSnippetProps
from terravixens.logical_ids import pin, standalone_id
from terravixens.standalone.node_env import NO_TRUST, Trust
from terravixens.standalone.topology import Nic, PlacedGuest

# Proxmox VE's container OS types, recognised from the template's file name as PVE names its templates
# (`debian-12-standard_…`, `ubuntu-24.04-standard_…`, `rockylinux-9-default_…`). bpg's default, `unmanaged`,
# makes PVE skip setting up the hostname and network inside the container, and PVE would report another type.
OS_TYPES = (
    ("debian", "debian"),
    ("devuan", "devuan"),
    ("ubuntu", "ubuntu"),
    ("centos", "centos"),
    ("rockylinux", "centos"),
    ("almalinux", "centos"),
    ("fedora", "fedora"),
    ("opensuse", "opensuse"),
    ("archlinux", "archlinux"),
    ("alpine", "alpine"),
    ("gentoo", "gentoo"),
    ("nixos", "nixos"),
)


def os_type_of(template: str) -> str:
    """The OS type of a template volume id (`local:vztmpl/debian-12-…`), `unmanaged` when not recognised."""
    name = template.rsplit("/", 1)[-1].lower()
    return next((kind for prefix, kind in OS_TYPES if name.startswith(prefix)), "unmanaged")


@dataclass(frozen=True)
class StandaloneContainerProps:
    """placed: the node from terravixens.standalone.topology; proxmox_node: the Proxmox node it runs on;
    tokens: the stack's sensitive `node_tokens` variable."""

    placed: PlacedGuest
    proxmox_node: str
    datastores: Datastores
    spec_server: str
    tokens: TerraformVariable
    # The site's private CA and plain-http allowance, written into node.env (node_env.Trust).
    trust: Trust = NO_TRUST
    # systemd in an unprivileged container needs nesting (its own namespaces); a privileged one does not.
    nesting: bool | None = None
    swap_mib: int = 512
    # None: from the template's file name (os_type_of).
    os_type: str | None = None


def ip_config(nic: Nic) -> VirtualEnvironmentContainerInitializationIpConfig:
    if ipaddress.ip_interface(nic.address).version == 6:
        return VirtualEnvironmentContainerInitializationIpConfig(
            ipv6=VirtualEnvironmentContainerInitializationIpConfigIpv6(address=nic.address, gateway=nic.gateway)
        )
    return VirtualEnvironmentContainerInitializationIpConfig(
        ipv4=VirtualEnvironmentContainerInitializationIpConfigIpv4(address=nic.address, gateway=nic.gateway)
    )


class StandaloneContainer(Construct):
    """The container (`sa_<name>_ct`) and its hookscript (`sa_<name>_node_env`), and nothing of any other node.

    Safety properties (each pinned by a test):
    - logical ids come from the node's name only;
    - unprivileged unless the site says otherwise (`unprivileged: false`);
    - no ssh key or password in `initialization.user_account` (bpg replaces a container when they change): users
      and keys come from the spec (pulled);
    - the hookscript is referred to by its constant volume id and updates in place: a token rotation or a posture
      change replaces the hookscript file only, and the container receives the new node.env at its next start.
    """

    def __init__(self, scope: Construct, id: str, props: StandaloneContainerProps):
        super().__init__(scope, id)
        self.props = props
        placed = props.placed
        if placed.type != "ct" or placed.template is None:
            raise ValueError(
                f"standalone node {placed.name!r} is a {placed.type!r} with template "
                f"{placed.template!r}: a StandaloneContainer is a 'ct' node with a template; create "
                f"a 'vm' or 'pve' with StandaloneVm"
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
                carrier="hookscript",
            ),
        )
        self.container = pin(self._container(), standalone_id(placed.name, "ct"))

    def _container(self) -> VirtualEnvironmentContainer:
        props, placed = self.props, self.props.placed
        unprivileged = placed.unprivileged is not False
        nesting = unprivileged if props.nesting is None else props.nesting
        template = placed.template
        if template is None:  # the site rules refuse a ct node without one
            raise ValueError(
                f"standalone container {placed.name!r} has no template: give it standalone.nodes."
                f"{placed.name}.template (a vztmpl volume id)"
            )
        return VirtualEnvironmentContainer(
            self,
            "ct",
            node_name=props.proxmox_node,
            vm_id=placed.vm_id,
            # No description: PVE returns a container's description with a newline added, a diff on every plan.
            tags=sorted({"terravixens", "standalone", "ct", *placed.tags}),
            unprivileged=unprivileged,
            start_on_boot=True,
            started=True,
            operating_system=VirtualEnvironmentContainerOperatingSystem(
                template_file_id=template, type=props.os_type or os_type_of(template)
            ),
            cpu=VirtualEnvironmentContainerCpu(cores=placed.cores),
            memory=VirtualEnvironmentContainerMemory(dedicated=placed.memory_mib, swap=props.swap_mib),
            disk=VirtualEnvironmentContainerDisk(datastore_id=props.datastores.vm, size=placed.disk_gib),
            features=VirtualEnvironmentContainerFeatures(nesting=True) if nesting else None,
            network_interface=[
                VirtualEnvironmentContainerNetworkInterface(
                    name=f"eth{index}", bridge=nic.bridge, vlan_id=nic.vlan, firewall=False
                )
                for index, nic in enumerate(placed.nics)
            ],
            initialization=VirtualEnvironmentContainerInitialization(
                hostname=placed.name,
                ip_config=[ip_config(nic) for nic in placed.nics],
            ),
            # A literal volume id, not a reference: see NodeEnvSnippet.
            hook_script_file_id=self.node_env.volume_id,
            depends_on=[self.node_env.file],
        )
