"""PG006 BootstrapOnlyForNewCluster: a running cluster is neither bootstrapped nor loses its bootstrap record."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.catalogue import BOOTSTRAP, NODE_APPLY
from terravixens.guard.checks.base import Check, staying_applies
from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan


class BootstrapOnlyForNewCluster(Check):
    code = "PG006"
    name = "BootstrapOnlyForNewCluster"
    why = (
        "bootstrap creates a new etcd: on nodes that already form a cluster it splits it. The bootstrap "
        "resource in state is what stops the next plan from bootstrapping again."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        running = {r.address for r in plan.prior_of(NODE_APPLY)}
        staying = staying_applies(plan)
        bootstrapped = bool(plan.prior_of(BOOTSTRAP))
        for change in plan.changes_of(BOOTSTRAP):
            if change.creates and not change.deletes and running and not bootstrapped:
                yield (
                    f"{change.address} would bootstrap a cluster whose nodes already run ({len(running)} applies "
                    f"in state) but whose bootstrap record is missing: restore the state from a backup instead "
                    f"(`terravixens restore LAYER BACKUP`)."
                )
            if (change.forgets or (change.deletes and not change.creates)) and staying:
                verb = "forgotten" if change.forgets else "destroyed"
                yield (
                    f"{change.address} would be {verb} while {len(staying)} node applies stay: the next plan "
                    f"would bootstrap the running cluster again. Keep it until the cluster is decommissioned."
                )
