"""PG003 ControlPlaneRemains: at least one of today's control planes stays, with its apply and its machine."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.guard.checks.base import Check
from terravixens.guard.checks.roles import control_planes_today
from terravixens.guard.context import GuardContext
from terravixens.guard.nodes import DISRUPTED, describe
from terravixens.guard.plan import Plan


class ControlPlaneRemains(Check):
    code = "PG003"
    name = "ControlPlaneRemains"
    why = (
        "new control planes cannot join a cluster whose members all left: that is a new cluster, and the data "
        "in etcd is gone. Tearing a cluster down is `terravixens decommission`."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        today = control_planes_today(plan, context)
        if today and all(node.fate in DISRUPTED for node in today):
            yield (
                f"no control plane of the current cluster would remain ({describe(today)}; all leave): new "
                f"control planes cannot join a cluster whose members all left. Keep at least one, or tear the "
                f"cluster down with `terravixens decommission`."
            )
