"""PG001 StayingNodeKept: no VM or configuration apply of a node that stays is replaced."""
from __future__ import annotations

from terravixens.catalogue import NODE_APPLY, NODE_MACHINES
from terravixens.guard.checks.base import Check


class StayingNodeKept(Check):
    code = "PG001"
    name = "StayingNodeKept"
    why = ("a replaced apply resets (wipes) its node and a replaced VM is destroyed: a node that stays in the site "
           "must only ever be updated in place.")

    def violations(self, plan, context):
        for change in plan.changes_of(*NODE_MACHINES):
            if not change.replaced:
                continue
            node = change.node or change.address
            what = "wiped" if change.type == NODE_APPLY else "destroyed and re-created"
            yield (f"{change.address} would be replaced: node {node!r} stays in the site but would be {what}. Find "
                   f"the attribute that forces it (terraform plan shows '# forces replacement') and revert it.")
