"""PG003 ControlPlaneRemains: at least one of today's control planes stays."""
from __future__ import annotations

from terravixens.guard.checks.base import Check
from terravixens.guard.checks.roles import leaving_applies, prior_control_planes


class ControlPlaneRemains(Check):
    code = "PG003"
    name = "ControlPlaneRemains"
    why = ("new control planes cannot join a cluster whose members all left: that is a new cluster, and the data "
           "in etcd is gone. Tearing a cluster down is `terravixens decommission`.")

    def violations(self, plan, context):
        today = prior_control_planes(plan, context)
        if not today:
            return
        leaving = {c.address for c in leaving_applies(plan)}
        if not set(today) - leaving:
            yield (f"no control plane of the current cluster would remain ({', '.join(sorted(today))} all leave): new "
                   f"control planes cannot join a cluster whose members all left. Keep at least one, or tear the "
                   f"cluster down with `terravixens decommission`.")
