"""TV004 BootstrapOnce: one bootstrap per cluster, and nothing can make it run again."""
from __future__ import annotations

from terravixens.catalogue import BOOTSTRAP
from terravixens.rules.base import Rule
from terravixens.rules.view import StackView


class BootstrapOnce(Rule):
    code = "TV004"
    name = "BootstrapOnce"
    why = ("bootstrapping etcd a second time splits the cluster: a platform stack holds one bootstrap whose "
           "lifecycle ignores all changes, so a new control-plane set or address never re-runs it.")

    def check(self, view: StackView) -> None:
        found = view.blocks_of({BOOTSTRAP})
        if len(found) > 1:
            self.fail(view.stack, f"stack {view.name!r} has {len(found)} bootstraps "
                                  f"({', '.join(sorted(block.logical_id for block in found))}): keep one per cluster.")
        for block in found:
            # As Terraform reads it: the JSON, so an override of the lifecycle counts too.
            if (block.body.get("lifecycle") or {}).get("ignore_changes") != "all":
                self.fail_block(view, block, f"{BOOTSTRAP}.{block.logical_id} does not ignore all changes: set "
                                             f"lifecycle ignore_changes='all'.")
