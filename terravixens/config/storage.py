"""The storage a hypervisor declares (L0): ZFS pools, NAS shares (NFS, CIFS) and Proxmox Backup Server datastores.

    hypervisors:
      pve1:
        storage:
          tank:    {type: zfspool, pool: tank/vmdata}
          nas:     {type: nfs, server: nas.lab.internal, export: /srv/vm, content: [images, backup]}
          share:   {type: cifs, server: nas.lab.internal, share: vms, username: pve}
          backups: {type: pbs, server: pbs.lab.internal, datastore: main, username: backup@pbs,
                    fingerprint: "AB:CD:…"}

Each entry becomes one Proxmox storage definition (an entry of the cluster's storage.cfg) available on that
hypervisor only. A storage definition points at data; it does not hold it: Proxmox deletes the definition, never
the pool or the share's files. Nodes name their storage (`storage:` of a cluster node or a standalone node) and the
site rules check it exists on their hypervisor with the content they need (terravixens.config.site_rules.storage).

No password lives here: CIFS and PBS passwords come from Terraform variables (`TF_VAR_<variable>` in the deploy's
environment, `password_variable(id)`), so the synthesized JSON holds their names only (ADR 0044).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from terravixens.config.fields import Strict
from terravixens.inputs import shown

# pve-storage-id (PVE::JSONSchema): a letter, then letters, digits, '-', '_' or '.', ending with a letter or digit.
STORAGE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]$")
# A host name or an address, as storage.cfg's `server` takes it (no scheme, no port, no path).
SERVER = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$|^[0-9A-Fa-f:]+$")
# pbs `fingerprint`: the SHA-256 of the server's certificate, 32 hex bytes joined by ':' (as PBS' dashboard shows it).
FINGERPRINT = re.compile(r"^([0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$")
# A ZFS dataset: pool[/dataset…] (zfs(8) component names).
ZFS_DATASET = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*(/[A-Za-z0-9_.:-]+)*$")

Content = Literal["images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import"]


def _zfs_default() -> list[ZfsContent]:
    return ["images", "rootdir"]


def _images() -> list[Content]:
    return ["images"]


# What each content type holds: a VM disk needs `images`, a container's root disk `rootdir`.
ZfsContent = Literal["images", "rootdir"]
VM_DISKS: Content = "images"
CONTAINER_DISKS: Content = "rootdir"


def storage_id(value: str) -> str:
    if len(value) > 100 or not STORAGE_ID.match(value):
        raise ValueError(
            f"{shown(value)} is not a Proxmox storage id: start with a letter, then letters, digits, '-', '_' or "
            f"'.', ending with a letter or digit (e.g. 'tank' or 'nas-vm')"
        )
    return value


def server(value: str) -> str:
    if not SERVER.match(value):
        raise ValueError(
            f"{shown(value)} is not a server: give a host name or an address only, without scheme, port or path "
            f"(e.g. 'nas.lab.internal')"
        )
    return value


def absolute_path(value: str) -> str:
    if not value.startswith("/") or ".." in value.split("/") or "," in value:
        raise ValueError(
            f"{shown(value)} is not an absolute export path: write it as the server exports it, e.g. /srv/vm"
        )
    return value


def fingerprint(value: str) -> str:
    if not FINGERPRINT.match(value):
        raise ValueError(
            f"{shown(value)} is not a SHA-256 certificate fingerprint: give 32 hexadecimal bytes joined by ':', as "
            f"the Proxmox Backup Server dashboard shows it (`proxmox-backup-manager cert info` on the server)"
        )
    return value.lower()


def optional_fingerprint(value: str | None) -> str | None:
    return None if value is None else fingerprint(value)


def zfs_dataset(value: str) -> str:
    if not ZFS_DATASET.match(value):
        raise ValueError(f"{shown(value)} is not a ZFS pool or dataset: write POOL or POOL/DATASET, e.g. tank/vmdata")
    return value


# Kubernetes names: a Secret's (RFC 1123 subdomain) and a namespace's (RFC 1123 label).
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def secret_name(value: str) -> str:
    if len(value) > 253 or not SUBDOMAIN.match(value):
        raise ValueError(
            f"{shown(value)} is not a Kubernetes Secret name: lowercase letters, digits, '-' and '.', starting and "
            f"ending with a letter or digit (e.g. 'csi-storage-credentials')"
        )
    return value


def namespace_name(value: str) -> str:
    if not LABEL.match(value):
        raise ValueError(
            f"{shown(value)} is not a Kubernetes namespace: at most 63 lowercase letters, digits and '-', starting "
            f"and ending with a letter or digit (e.g. 'kube-system')"
        )
    return value


StorageId = Annotated[str, AfterValidator(storage_id)]
Server = Annotated[str, AfterValidator(server)]


class ZfsPool(Strict):
    """A ZFS pool (or a dataset of one) the hypervisor already has; Proxmox makes a volume per disk in it."""

    type: Literal["zfspool"] = Field(description="`zfspool`.")
    pool: Annotated[str, AfterValidator(zfs_dataset)] = Field(description="The pool or dataset, e.g. `tank/vmdata`.")
    content: list[ZfsContent] = Field(
        default_factory=_zfs_default,
        description="`images` (VM disks) and/or `rootdir` (container disks): what ZFS storage holds.",
    )
    thin_provision: bool | None = Field(None, description="Sparse volumes (Proxmox' default: off).")
    blocksize: str | None = Field(None, description="Volume block size, e.g. `16k` (Proxmox' default: 16k).")


class NfsShare(Strict):
    """An NFS export, which Proxmox mounts on each node it is available on."""

    type: Literal["nfs"] = Field(description="`nfs`.")
    server: Server = Field(description="The NFS server, a host name or an address.")
    export: Annotated[str, AfterValidator(absolute_path)] = Field(description="The export, e.g. `/srv/vm`.")
    content: list[Content] = Field(default_factory=_images, description="What the storage may hold.")
    options: str | None = Field(None, description="NFS mount options, e.g. `vers=4.2`.")


class CifsShare(Strict):
    """An SMB/CIFS share. Its password is the Terraform variable `storage_password_<id>` (never in this file)."""

    type: Literal["cifs"] = Field(description="`cifs`.")
    server: Server = Field(description="The SMB server, a host name or an address.")
    share: str = Field(description="The share's name.")
    subdirectory: str | None = Field(None, description="A folder inside the share to use instead of its root.")
    domain: str | None = Field(None, description="The SMB domain, if the server wants one.")
    username: str = Field(description="The SMB user (its password: `TF_VAR_storage_password_<id>` at deploy).")
    content: list[Content] = Field(default_factory=_images, description="What the storage may hold.")


class PbsDatastore(Strict):
    """A Proxmox Backup Server datastore, for backups only. Its password (or API token secret) is the Terraform
    variable `storage_password_<id>`."""

    type: Literal["pbs"] = Field(description="`pbs`.")
    server: Server = Field(description="The Proxmox Backup Server, a host name or an address.")
    datastore: str = Field(description="The datastore on the server.")
    namespace: str | None = Field(None, description="A namespace in the datastore.")
    username: str = Field(
        description="`USER@REALM` or an API token `USER@REALM!TOKEN` (its secret: `TF_VAR_storage_password_<id>`)."
    )
    fingerprint: Annotated[str | None, AfterValidator(optional_fingerprint)] = Field(
        None,
        description="SHA-256 fingerprint of the server's certificate; needed unless a CA the hypervisor trusts "
        "signed it.",
    )


Storage = Annotated[ZfsPool | NfsShare | CifsShare | PbsDatastore, Field(discriminator="type")]
STORAGE_TYPES = frozenset({"zfspool", "nfs", "cifs", "pbs"})
WITH_PASSWORD = (CifsShare, PbsDatastore)


def contents(storage: ZfsPool | NfsShare | CifsShare | PbsDatastore) -> frozenset[str]:
    """What a storage may hold (a PBS datastore: backups only)."""
    return frozenset(["backup"]) if isinstance(storage, PbsDatastore) else frozenset(storage.content)


def password_variable(storage: str) -> str:
    """The Terraform variable holding a CIFS or PBS storage's password: `storage_password_<id>`, '.' and '-' as '_'
    (a Terraform identifier; TF_VAR_ names survive every shell)."""
    return "storage_password_" + re.sub(r"[^A-Za-z0-9_]", "_", storage)


__all__ = [
    "CONTAINER_DISKS",
    "STORAGE_TYPES",
    "VM_DISKS",
    "WITH_PASSWORD",
    "CifsShare",
    "Content",
    "CsiSecret",
    "NfsShare",
    "PbsDatastore",
    "Storage",
    "StorageId",
    "ZfsPool",
    "contents",
    "password_variable",
]


class CsiSecret(Strict):
    """The Secret a CSI driver reads its storage credentials from (an NFS/SMB driver's mount credentials, a
    TrueNAS/democratic-csi driver's API key…), written by the gitops layer from the secrets file's `csi.<cluster>`
    through a write-only attribute: in neither the synthesized JSON, the plan nor the state (ADR 0044)."""

    name: Annotated[str, AfterValidator(secret_name)] = Field(
        "csi-storage-credentials", description="Name of the Secret the CSI driver's chart refers to."
    )
    namespace: Annotated[str, AfterValidator(namespace_name)] = Field(
        "kube-system",
        description="Namespace of the Secret; one other than kube-system is created by the gitops layer (the fleet "
        "repository must not declare it too).",
    )
    credentials_revision: int = Field(
        1,
        ge=1,
        description="Bump after changing `csi.<cluster>` in the secrets file: the Secret is written through a "
        "write-only attribute, so Terraform re-sends it only when this number changes.",
    )
