"""A named plan check: code, name and why, like the synth-time rules (terravixens.rules.base.Rule)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan


@dataclass(frozen=True)
class Violation:
    code: str
    name: str
    message: str
    waived: bool = False

    def __str__(self) -> str:
        return f"[{self.code} {self.name}] {'(waived) ' if self.waived else ''}{self.message}"


class Check:
    """Subclasses set `code`, `name` and `why`, and implement `violations`."""

    code = "PG000"
    name = "Check"
    why = ""

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, plan: Plan, context: GuardContext) -> list[Violation]:
        return [
            Violation(self.code, self.name, message, self.code in context.waived)
            for message in self.violations(plan, context)
        ]


def staying_applies(plan: Plan) -> set[str]:
    """Addresses of today's node applies that this plan keeps (neither deleted nor forgotten; a deposed object's
    delete leaves the current apply in place)."""
    from terravixens.catalogue import NODE_APPLY

    gone = {c.address for c in plan.changes if c.type == NODE_APPLY and c.removes_current and not c.creates}
    return {r.address for r in plan.prior_of(NODE_APPLY)} - gone
