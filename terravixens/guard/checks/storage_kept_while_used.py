"""PG010 StorageKeptWhileUsed: L0 does not delete (or replace) a storage definition a node's disk lives on."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.catalogue import STORAGES
from terravixens.guard.checks.base import Check
from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan


def _users(found: set[str]) -> str:
    listed = sorted(found)
    return ", ".join(listed[:4]) + (f" and {len(listed) - 4} more" if len(listed) > 4 else "")


class StorageKeptWhileUsed(Check):
    code = "PG010"
    name = "StorageKeptWhileUsed"
    why = (
        "a Proxmox storage definition is how every disk on a ZFS pool, NAS share or backup server is reached: "
        "deleting it leaves the data in place but the VMs on it cannot start, migrate or be backed up. Removing "
        "storage no node uses is fine; removing storage a node (in the site or deployed) still uses is refused, and "
        "so is removing it while what the deployed nodes use is not known."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        for change in plan.changes_of(*STORAGES):
            if not change.deletes:
                continue
            storage = change.before.get("id")
            verb = "replace" if change.creates else "delete"
            if context.usage is None:
                # Fail closed: without the site and the deployed states nobody can say the storage is unused.
                yield (
                    f"{change.address} would {verb} storage {storage!r}, and the guard was not told who uses it: "
                    f"plan through `terravixens deploy hypervisors` (or `terravixens plan-guard` with --site and each "
                    f"--deployed-state)."
                )
                continue
            users = context.usage.storage_users(storage)
            if users:
                yield (
                    f"{change.address} would {verb} storage {storage!r}, where {_users(users)} "
                    f"{'has' if len(users) == 1 else 'have'} a disk: move those disks (or the nodes) to another "
                    f"storage and deploy their layer first, then remove the storage."
                )
            elif not context.usage.deployed_known:
                # Fail closed: the site's nodes do not use it, but nobody said what the deployed machines use.
                yield (
                    f"{change.address} would {verb} storage {storage!r}: no node of the site file has a disk on it, "
                    f"but the guard was not told what the deployed VMs and containers use (no --deployed-state): "
                    f"give each platform layer's and the standalone layer's `terraform state pull` with "
                    f"--deployed-state, or plan through `terravixens deploy hypervisors`."
                )
