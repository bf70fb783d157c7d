"""PG008 HypervisorKeepsWhatNodesUse: L0 does not delete a bridge, image or automation user still in use."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.catalogue import API_ACCESS, BRIDGES, IMAGES
from terravixens.guard.checks.base import Check
from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan


def _users(found: set[str]) -> str:
    listed = sorted(found)
    return ", ".join(listed[:4]) + (f" and {len(listed) - 4} more" if len(listed) > 4 else "")


class HypervisorKeepsWhatNodesUse(Check):
    code = "PG008"
    name = "HypervisorKeepsWhatNodesUse"
    why = (
        "L0 is applied before the platform layers: deleting a bridge cuts the VMs on it off the network, "
        "deleting the image a node boots from breaks its next creation, and deleting the automation user "
        "locks the platform layers out of Proxmox."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        usage = context.usage
        if usage is None:
            return
        for change in plan.changes:
            if not change.deletes:
                continue
            values = change.before
            if change.type in BRIDGES:
                users = usage.bridge_users(values.get("node_name"), values.get("name"))
                if users:
                    yield (
                        f"{change.address} would {'replace' if change.creates else 'delete'} bridge "
                        f"{values.get('name')!r} on {values.get('node_name')!r}, used by {_users(users)}: move "
                        f"those VMs off it and deploy their platform layer first, then remove the bridge."
                    )
            elif change.type in IMAGES and not change.creates:
                users = usage.image_users(values.get("node_name"), values.get("datastore_id"), values.get("file_name"))
                if users:
                    yield (
                        f"{change.address} would delete image {values.get('file_name')!r} on "
                        f"{values.get('node_name')!r}, which {_users(users)} boots from: keep the Talos version "
                        f"in use on that hypervisor, or move the nodes first."
                    )
            elif change.type in API_ACCESS and usage.api_user:
                yield (
                    f"{change.address} would be {'replaced' if change.creates else 'deleted'} while the platform "
                    f"layers manage {len(usage.api_user)} VMs ({_users(usage.api_user)}): their Proxmox "
                    f"credentials would stop working. Decommission or destroy the platform layers first."
                )
