"""TV004 BootstrapOnce: one bootstrap per cluster, and nothing can make it run again."""

from __future__ import annotations

import json

from terravixens.catalogue import BOOTSTRAP
from terravixens.rules.base import Rule
from terravixens.rules.view import StackView


class BootstrapOnce(Rule):
    code = "TV004"
    name = "BootstrapOnce"
    why = (
        "bootstrapping etcd a second time splits the cluster: a platform stack holds one bootstrap whose "
        "lifecycle ignores all changes, so a new control-plane set or address never re-runs it."
    )

    def check(self, view: StackView) -> None:
        found = view.blocks_of({BOOTSTRAP})
        if len(found) > 1:
            self.fail(
                view.stack,
                f"stack {view.name!r} has {len(found)} bootstraps "
                f"({', '.join(sorted(block.logical_id for block in found))}): keep one per cluster.",
            )
        for block in found:
            # One block is several bootstraps when it is counted or iterated: the count of blocks alone would pass it.
            for key in ("count", "for_each"):
                value = block.body.get(key)
                if key in block.body and not (key == "count" and value in (0, 1) and not isinstance(value, bool)):
                    self.fail_block(
                        view,
                        block,
                        f"{BOOTSTRAP}.{block.logical_id} sets {key} to "
                        f"{json.dumps(value)[:60]}: a bootstrap block must be one bootstrap; "
                        f"decide in Python whether the stack holds it.",
                    )
            # As Terraform reads it: the JSON, so an override of the lifecycle counts too.
            if block.nested("lifecycle").get("ignore_changes") != "all":
                self.fail_block(
                    view,
                    block,
                    f"{BOOTSTRAP}.{block.logical_id} does not ignore all changes: set lifecycle ignore_changes='all'.",
                )
