"""TV005 StoragePreventDestroy: what cannot be re-created carries prevent_destroy."""
from __future__ import annotations

from constructs import IConstruct

from terravixens.rules.base import Rule, logical_id

# Storage and identity that a destroy would lose for good: volumes, buckets, and the cluster's certificates.
# bpg 0.111 names storages both proxmox_storage_* and proxmox_virtual_environment_storage_*.
_STORAGE_KINDS = ("nfs", "cifs", "pbs", "directory", "lvm", "lvmthin", "zfspool")
PROTECTED_TYPES = frozenset({
    "talos_machine_secrets",
    "aws_s3_bucket",
    "minio_s3_bucket",
    *(f"proxmox_storage_{kind}" for kind in _STORAGE_KINDS),
    *(f"proxmox_virtual_environment_storage_{kind}" for kind in _STORAGE_KINDS),
})


class StoragePreventDestroy(Rule):
    code = "TV005"
    name = "StoragePreventDestroy"
    why = ("volumes, state buckets and cluster secrets cannot be re-created: a destroy loses data or every "
           "certificate of the cluster.")

    def visit(self, node: IConstruct) -> None:
        kind = getattr(node, "terraform_resource_type", None)
        if kind in PROTECTED_TYPES:
            lifecycle = node.lifecycle
            if lifecycle is None or not lifecycle.prevent_destroy:
                self.fail(node, f"{kind}.{logical_id(node)} has no lifecycle prevent_destroy: set it, or keep this "
                                f"resource outside terravixens' stacks.")
