"""PG005 SecretsMatchRunningNodes: no new machine secrets, and no forgotten ones, while nodes run on today's."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.catalogue import MACHINE_SECRETS
from terravixens.guard.checks.base import Check, staying_applies
from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan


class SecretsMatchRunningNodes(Check):
    code = "PG005"
    name = "SecretsMatchRunningNodes"
    why = (
        "running nodes trust the certificates of today's secrets: new secrets would push configurations the "
        "cluster rejects, and forgotten secrets make the next plan create new ones."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        running = staying_applies(plan)
        if not running:
            return
        nodes = ", ".join(sorted(running)[:3]) + ("…" if len(running) > 3 else "")
        for change in plan.changes_of(MACHINE_SECRETS):
            if change.creates and not change.deletes:
                yield (
                    f"{change.address} would be created while {len(running)} node applies run on today's secrets "
                    f"({nodes}): a state lost its secrets or the address changed. Restore the state from a backup "
                    f"(`terravixens restore LAYER BACKUP`); never mint new ones under running nodes."
                )
            if change.forgets:
                yield (
                    f"{change.address} would be forgotten while {len(running)} node applies use it ({nodes}): the "
                    f"next plan would create new secrets. Remove the `removed` block."
                )
