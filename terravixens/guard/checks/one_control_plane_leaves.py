"""PG002 OneControlPlaneLeavesPerApply: at most one control plane leaves etcd in one apply."""
from __future__ import annotations

from terravixens.guard.checks.base import Check
from terravixens.guard.checks.roles import leaving_applies, role_today
from terravixens.roles import Role


class OneControlPlaneLeavesPerApply(Check):
    code = "PG002"
    name = "OneControlPlaneLeavesPerApply"
    why = ("each leaving control plane is reset gracefully and leaves etcd; one at a time keeps the remaining "
           "members' quorum predictable and lets each leave finish before the next starts.")

    def violations(self, plan, context):
        leaving, unknown = [], []
        for change in leaving_applies(plan):
            role = role_today(change.node, plan, context)
            if role == Role.CONTROLPLANE:
                leaving.append(change.address)
            elif role is None:
                # No record and not in the site: counted as a control plane, the safe side.
                leaving.append(change.address)
                unknown.append(change.node or change.address)
        if len(leaving) > 1:
            first = sorted(leaving)[0]
            note = (f" (role of {', '.join(sorted(unknown))} unknown: neither the site nor the membership record "
                    f"names it, so it counts as a control plane)" if unknown else "")
            yield (f"{len(leaving)} control planes would leave etcd in one apply ({', '.join(sorted(leaving))}){note}: "
                   f"apply one first with `terraform apply -target={first}`, then plan again.")
