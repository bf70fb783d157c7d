"""Which nodes are today's control planes, and which of them leave etcd: from the per-node view (roles from the
membership record, else the site file; a running member whose role neither knows counts as a control plane)."""

from __future__ import annotations

from terravixens.guard.context import GuardContext
from terravixens.guard.nodes import NodeView, node_view
from terravixens.guard.plan import Plan


def leaving_control_planes(plan: Plan, context: GuardContext) -> list[NodeView]:
    """Running members counted as control planes whose apply or machine the plan takes away (left, replaced or
    lost): each one leaves etcd, whatever the site says about it."""
    return node_view(plan, context).control_planes_leaving()


def control_planes_today(plan: Plan, context: GuardContext) -> list[NodeView]:
    return node_view(plan, context).control_planes_today()
