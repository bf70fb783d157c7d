"""PG009 ProtectedStorageKept: no volume or state bucket is destroyed (storage definitions: PG010)."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.catalogue import PROTECTED_STORAGE
from terravixens.guard.checks.base import Check
from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan


class ProtectedStorageKept(Check):
    code = "PG009"
    name = "ProtectedStorageKept"
    why = (
        "volumes and state buckets hold data that no apply can bring back; they carry prevent_destroy (TV005), and "
        "the guard refuses a plan that would delete one anyway. A Proxmox storage definition only points at data: "
        "PG010 judges it on who uses it."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        for change in plan.changes_of(*PROTECTED_STORAGE):
            if change.deletes:
                yield (
                    f"{change.address} would be {'replaced' if change.creates else 'destroyed'}, and its data with "
                    f"it: keep it in the site, or remove it from Terraform's state first (`terraform state rm`) "
                    f"if it must outlive terravixens."
                )
