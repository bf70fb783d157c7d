"""PG002 OneControlPlaneLeavesPerApply: at most one control plane leaves etcd in one apply — a control plane leaves
when its apply is deleted (reset) and also when its VM is deleted, replaced or forgotten while the apply stays."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.guard.checks.base import Check
from terravixens.guard.checks.roles import leaving_control_planes
from terravixens.guard.context import GuardContext
from terravixens.guard.nodes import describe
from terravixens.guard.plan import Plan


class OneControlPlaneLeavesPerApply(Check):
    code = "PG002"
    name = "OneControlPlaneLeavesPerApply"
    why = (
        "each leaving control plane is reset gracefully and leaves etcd; one at a time keeps the remaining "
        "members' quorum predictable and lets each leave finish before the next starts. A control plane whose VM "
        "goes leaves etcd too, without the graceful part."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        leaving = leaving_control_planes(plan, context)
        if len(leaving) <= 1:
            return
        unknown = [node.name for node in leaving if node.role is None]
        note = (
            f" (role of {', '.join(unknown)} unknown: neither the site nor the membership record names it, so "
            f"it counts as a control plane)"
            if unknown
            else ""
        )
        yield (
            f"{len(leaving)} control planes would leave etcd in one apply: {describe(leaving)}{note}. "
            f"`terravixens deploy` of this layer takes control planes out one per apply; or remove one control "
            f"plane from the site per deploy."
        )
