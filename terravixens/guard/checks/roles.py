"""Which of today's node applies belong to control planes: from the site file and terravixens' membership record."""
from __future__ import annotations

from terravixens.catalogue import NODE_APPLY
from terravixens.guard.context import GuardContext
from terravixens.guard.plan import Plan
from terravixens.roles import Role


def role_today(node: str | None, plan: Plan, context: GuardContext) -> str | None:
    """The role recorded at the last apply (the membership record in the prior state), else the site's; None when
    neither knows the node (a node that left the site before terravixens recorded roles by name)."""
    if node is None:
        return None
    return plan.recorded_roles().get(node) or context.roles.get(node)


def prior_control_planes(plan: Plan, context: GuardContext) -> dict[str, str]:
    """Apply address -> node, for today's applies whose node is a control plane."""
    return {r.address: r.node for r in plan.prior_of(NODE_APPLY)
            if role_today(r.node, plan, context) == Role.CONTROLPLANE}


def leaving_applies(plan: Plan) -> list:
    return [c for c in plan.changes_of(NODE_APPLY) if c.deletes and not c.creates]
