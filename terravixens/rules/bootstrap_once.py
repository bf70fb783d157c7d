"""TV004 BootstrapOnce: one bootstrap per cluster, and nothing can make it run again."""
from __future__ import annotations

from cdktf import TerraformStack
from constructs import IConstruct

from terravixens.catalogue import BOOTSTRAP
from terravixens.rules.base import Rule, logical_id


class BootstrapOnce(Rule):
    code = "TV004"
    name = "BootstrapOnce"
    why = ("bootstrapping etcd a second time splits the cluster: a platform stack holds one bootstrap whose "
           "lifecycle ignores all changes, so a new control-plane set or address never re-runs it.")

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, TerraformStack):
            found = [child for child in node.node.find_all()
                     if getattr(child, "terraform_resource_type", None) == BOOTSTRAP]
            if len(found) > 1:
                self.fail(node, f"stack {node.node.id!r} has {len(found)} bootstraps "
                                f"({', '.join(sorted(logical_id(item) for item in found))}): keep one per cluster.")
            return
        if getattr(node, "terraform_resource_type", None) == BOOTSTRAP:
            lifecycle = node.lifecycle
            if lifecycle is None or lifecycle.ignore_changes != "all":
                self.fail(node, f"{BOOTSTRAP}.{logical_id(node)} does not ignore all changes: set "
                                f"lifecycle ignore_changes='all'.")
