"""TV002 ResetScopedToNode: every reset-capable resource belongs to exactly one node and reads no other node."""
from __future__ import annotations

from terravixens.catalogue import RESET_CAPABLE
from terravixens.logical_ids import owner_of
from terravixens.rules.base import Rule, references
from terravixens.rules.view import StackView


class ResetScopedToNode(Rule):
    code = "TV002"
    name = "ResetScopedToNode"
    why = ("a resource that resets or deletes a machine must belong to one node, and must not read another "
           "node's attributes: otherwise a change to node Y could reset or replace node X.")

    def check(self, view: StackView) -> None:
        from terravixens.constructs.talos_node import TalosNode

        for block in view.blocks:
            owner = view.owner(block, TalosNode)
            if owner is None:
                if block.type in RESET_CAPABLE:
                    self.fail_block(view, block, f"{block.type}.{block.logical_id} is not inside a TalosNode: create "
                                                 f"it through TalosNode so that it belongs to exactly one node.")
                continue
            own = owner.node_name
            targets = references(block.body) | {tuple(item.split(".", 1)) for item in block.body.get("depends_on", [])}
            for target_type, target_id in sorted(targets):
                other = owner_of(target_id)
                if other is not None and other != own:
                    self.fail_block(view, block, f"{block.type}.{block.logical_id} of node {own!r} reads "
                                                 f"{target_type}.{target_id} of node {other!r}: give it only "
                                                 f"cluster-level inputs and its own node's attributes.")
