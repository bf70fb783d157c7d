"""TV002 ResetScopedToNode: every reset-capable resource belongs to exactly one node and reads no other node."""
from __future__ import annotations

from constructs import IConstruct

from terravixens.catalogue import RESET_CAPABLE
from terravixens.logical_ids import owner_of
from terravixens.rules.base import Rule, enclosing, is_terraform_block, logical_id, references, resolved


class ResetScopedToNode(Rule):
    code = "TV002"
    name = "ResetScopedToNode"
    why = ("a resource that resets or deletes a machine must belong to one node, and must not read another "
           "node's attributes: otherwise a change to node Y could reset or replace node X.")

    def visit(self, node: IConstruct) -> None:
        from terravixens.constructs.talos_node import TalosNode

        if not is_terraform_block(node):
            return
        owner = enclosing(node, TalosNode)
        kind = getattr(node, "terraform_resource_type", "")
        if owner is None:
            if kind in RESET_CAPABLE:
                self.fail(node, f"{kind}.{logical_id(node)} is not inside a TalosNode: create it through TalosNode "
                                f"so that it belongs to exactly one node.")
            return
        own = owner.node_name
        config = resolved(node)
        body = next(iter(next(iter(config.values())).values()))[logical_id(node)]
        targets = references(body) | {tuple(item.split(".", 1)) for item in body.get("depends_on", [])}
        for target_type, target_id in sorted(targets):
            other = owner_of(target_id)
            if other is not None and other != own:
                self.fail(node, f"{kind}.{logical_id(node)} of node {own!r} reads {target_type}.{target_id} of node "
                                f"{other!r}: give it only cluster-level inputs and its own node's attributes.")
