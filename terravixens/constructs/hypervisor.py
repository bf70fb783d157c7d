"""Hypervisor (L0): one Proxmox host's bridges, its Talos disk images and an optional automation user."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdktf import TerraformOutput
from constructs import Construct

from terravixens._bindings.proxmox.download_file import DownloadFile
from terravixens._bindings.proxmox.network_linux_bridge import NetworkLinuxBridge
from terravixens._bindings.proxmox.user_token import UserToken
from terravixens._bindings.proxmox.virtual_environment_role import VirtualEnvironmentRole
from terravixens._bindings.proxmox.virtual_environment_user import VirtualEnvironmentUser, VirtualEnvironmentUserAcl
from terravixens.config.model import ApiUser
from terravixens.config.model import Hypervisor as HypervisorSpec
from terravixens.logical_ids import hypervisor_id, pin
from terravixens.talos.image import disk_image_file_name, disk_image_url, schematic_id


@dataclass(frozen=True)
class HypervisorProps:
    """name: the hypervisor's key in the site file; talos_versions: every Talos version a VM on it boots from."""

    name: str
    spec: HypervisorSpec
    talos_versions: frozenset[str] = field(default_factory=frozenset)


class Hypervisor(Construct):
    """Bridges, one downloaded Talos disk image per Talos version in use, and optionally an API user and token.

    Image file names carry the schematic and the version, so an upgrade adds a file beside the old one; VMs keep
    the disk they imported (see TalosNode), so removing an unused image never touches a VM.
    """

    def __init__(self, scope: Construct, id: str, props: HypervisorProps):
        super().__init__(scope, id)
        spec = props.spec
        self.bridges = {
            name: pin(
                NetworkLinuxBridge(
                    self,
                    f"bridge_{name}",
                    node_name=spec.node_name,
                    name=name,
                    ports=bridge.ports,
                    vlan_aware=bridge.vlan_aware,
                    vids=" ".join(str(vlan) for vlan in sorted(bridge.vlans)) if bridge.vlans else None,
                    comment=bridge.comment,
                ),
                hypervisor_id(props.name, "bridge", name),
            )
            for name, bridge in sorted(spec.bridges.items())
        }
        image = spec.talos_image
        # content_type "import" (PVE 8.4+): a disk image that VMs import at creation (disk.import_from). Proxmox
        # verifies the factory's TLS certificate (`verify`, pinned rather than left to the provider's default) and,
        # where the site pins one, the image's SHA-256: the public Image Factory publishes none (ADR 0031).
        self.images = {
            version: pin(
                DownloadFile(
                    self,
                    f"image_{version}",
                    node_name=spec.node_name,
                    datastore_id=spec.datastores.images,
                    content_type="import",
                    url=disk_image_url(image, version),
                    file_name=disk_image_file_name(image, version),
                    overwrite=False,
                    verify=True,
                    checksum=image.sha256.get(version),  # None: not written
                    checksum_algorithm="sha256" if version in image.sha256 else None,
                ),
                hypervisor_id(props.name, "image", version.replace(".", "-"), schematic_id(image)[:12]),
            )
            for version in sorted(props.talos_versions)
        }
        if spec.api_user is not None:
            self._api_user(props.name, spec.api_user)

    def _api_user(self, name: str, user: ApiUser) -> None:
        role = pin(
            VirtualEnvironmentRole(self, "role", role_id=user.role_id, privileges=sorted(user.privileges)),
            hypervisor_id(name, "role"),
        )
        account = pin(
            VirtualEnvironmentUser(
                self,
                "user",
                user_id=user.user_id,
                comment="terravixens automation",
                acl=[VirtualEnvironmentUserAcl(path="/", role_id=role.role_id, propagate=True)],
            ),
            hypervisor_id(name, "user"),
        )
        token = pin(
            UserToken(
                self,
                "token",
                user_id=account.user_id,
                token_name=user.token_name,
                privileges_separation=False,
                comment="terravixens automation",
            ),
            hypervisor_id(name, "token"),
        )
        pin(TerraformOutput(self, "token_value", value=token.value, sensitive=True), hypervisor_id(name, "api_token"))
