"""PG004 ClusterIdentityKept: the machine secrets are never destroyed or replaced; a bootstrapped cluster is never
bootstrapped again."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.catalogue import BOOTSTRAP, MACHINE_SECRETS
from terravixens.guard.checks.base import Check
from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan


class ClusterIdentityKept(Check):
    code = "PG004"
    name = "ClusterIdentityKept"
    why = (
        "the machine secrets hold every certificate and key of the cluster, and a second bootstrap splits etcd: "
        "either one ends the cluster."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        bootstrapped = bool(plan.prior_of(BOOTSTRAP))
        for change in plan.changes_of(MACHINE_SECRETS):
            if change.deletes:
                yield (
                    f"{change.address} would be {'replaced' if change.creates else 'destroyed'}: the cluster's "
                    f"certificates and keys would be lost. Restore the cluster in the site file."
                )
        for change in plan.changes_of(BOOTSTRAP):
            if change.creates and (bootstrapped or change.replaced):
                yield (
                    f"{change.address} would bootstrap etcd again on a cluster that was bootstrapped: keep the "
                    f"bootstrap resource's address and its ignore_changes = all."
                )
