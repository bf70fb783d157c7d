"""Hypervisor (L0): one Proxmox host's bridges, its Talos disk images, its storage and an optional automation user."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdktf import TerraformOutput, TerraformResource, TerraformResourceLifecycle, TerraformVariable
from constructs import Construct

from terravixens._bindings.proxmox.download_file import DownloadFile
from terravixens._bindings.proxmox.network_linux_bridge import NetworkLinuxBridge
from terravixens._bindings.proxmox.user_token import UserToken
from terravixens._bindings.proxmox.virtual_environment_role import VirtualEnvironmentRole
from terravixens._bindings.proxmox.virtual_environment_user import VirtualEnvironmentUser, VirtualEnvironmentUserAcl
from terravixens.config.model import ApiUser
from terravixens.config.model import Hypervisor as HypervisorSpec
from terravixens.config.storage import CifsShare, NfsShare, PbsDatastore, Storage, ZfsPool, password_variable
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
        self.storages = {
            storage_id: pin(
                self._storage(spec.node_name, storage_id, storage),
                hypervisor_id(props.name, "storage", storage_id),
            )
            for storage_id, storage in sorted(spec.storage.items())
        }
        if spec.api_user is not None:
            self._api_user(props.name, spec.api_user)

    def _storage(self, node_name: str, storage_id: str, storage: Storage) -> TerraformResource:
        """One storage definition, on this hypervisor only (`nodes`), kept with prevent_destroy (rule TV005).

        Proxmox deletes a definition without touching the pool or the share's files, but every disk on it becomes
        unreachable: removing one from the site is a plain destroy, which the guard's PG010 refuses while a node
        uses it. A password (CIFS, PBS) is a sensitive variable the deploy's environment fills (TF_VAR_…): the JSON
        holds its name, never its value (ADR 0044)."""
        # Imported here: most hypervisors declare no storage, and each binding costs a synth its import.
        from terravixens._bindings.proxmox.storage_cifs import StorageCifs
        from terravixens._bindings.proxmox.storage_nfs import StorageNfs
        from terravixens._bindings.proxmox.storage_pbs import StoragePbs
        from terravixens._bindings.proxmox.storage_zfspool import StorageZfspool

        construct_id = f"storage_{storage_id}"
        lifecycle = TerraformResourceLifecycle(prevent_destroy=True)
        if isinstance(storage, ZfsPool):
            return StorageZfspool(
                self,
                construct_id,
                id=storage_id,
                nodes=[node_name],
                zfs_pool=storage.pool,
                content=sorted(storage.content),
                thin_provision=storage.thin_provision,
                blocksize=storage.blocksize,
                lifecycle=lifecycle,
            )
        if isinstance(storage, NfsShare):
            return StorageNfs(
                self,
                construct_id,
                id=storage_id,
                nodes=[node_name],
                server=storage.server,
                export=storage.export,
                content=sorted(storage.content),
                options=storage.options,
                lifecycle=lifecycle,
            )
        password = self._password(storage_id, storage)
        if isinstance(storage, CifsShare):
            return StorageCifs(
                self,
                construct_id,
                id=storage_id,
                nodes=[node_name],
                server=storage.server,
                share=storage.share,
                subdirectory=storage.subdirectory,
                domain=storage.domain,
                username=storage.username,
                password=password.string_value,
                content=sorted(storage.content),
                lifecycle=lifecycle,
            )
        return StoragePbs(
            self,
            construct_id,
            id=storage_id,
            nodes=[node_name],
            server=storage.server,
            datastore=storage.datastore,
            namespace=storage.namespace,
            username=storage.username,
            password=password.string_value,
            fingerprint=storage.fingerprint,
            content=["backup"],
            lifecycle=lifecycle,
        )

    def _password(self, storage_id: str, storage: CifsShare | PbsDatastore) -> TerraformVariable:
        name = password_variable(storage_id)
        what = "SMB user" if isinstance(storage, CifsShare) else "Proxmox Backup Server user or API token"
        return pin(
            TerraformVariable(
                self,
                name,
                type="string",
                sensitive=True,
                nullable=False,
                description=f"Password of storage {storage_id}'s {what} {storage.username}: TF_VAR_{name} in the "
                f"deploy's environment, never in the site file or the synthesized JSON.",
            ),
            name,
        )

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
