"""TV002 ResetScopedToNode: every reset-capable resource belongs to exactly one node and reads no other node.

A node is a Talos node (TalosNode, ids `node_<name>_<part>`) or a standalone node (StandaloneVm or
StandaloneContainer, ids `sa_<name>_<part>`, ADR 0025); the two kinds are told apart, so a standalone node and a
cluster node of the same name are still two nodes.
"""

from __future__ import annotations

import json
from typing import Any

from terravixens.catalogue import RESET_CAPABLE
from terravixens.expressions import references, remote_outputs
from terravixens.logical_ids import owner_of, standalone_owner_of
from terravixens.rules.base import Rule
from terravixens.rules.view import Block, StackView, imported_class

OWNERS = "a TalosNode, StandaloneVm or StandaloneContainer"
# (module, class) of the standalone nodes' constructs: looked for only once imported (imported_class).
STANDALONE_OWNERS = (
    ("terravixens.constructs.standalone_vm", "StandaloneVm"),
    ("terravixens.constructs.standalone_container", "StandaloneContainer"),
)


def node_owner(view: StackView, block: Block) -> tuple[str, str] | None:
    """('node', name) for a block inside a TalosNode, ('standalone', name) inside a standalone construct, else None."""
    from terravixens.constructs.talos_node import TalosNode

    talos = view.owner(block, TalosNode)
    if talos is not None:
        return "node", talos.node_name
    for kind in STANDALONE_OWNERS:
        found = imported_class(*kind)
        standalone = view.owner(block, found) if found is not None else None
        if standalone is not None:
            return "standalone", standalone.node_name
    return None


def id_owner(logical: str) -> tuple[str, str] | None:
    """The node a logical id names (ADR 0006, ADR 0025), else None."""
    talos, standalone = owner_of(logical), standalone_owner_of(logical)
    if talos is not None:
        return "node", talos
    if standalone is not None:
        return "standalone", standalone
    return None


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _bare_addresses(block: Block) -> list[str]:
    """The addresses a block names without `${…}`: depends_on and lifecycle.replace_triggered_by (type.id[.attr],
    data.type.id) — read as the references they are. A replace_triggered_by on another node's resource replaces
    this one whenever that resource changes."""
    named = [*_listed(block.body.get("depends_on")), *_listed(block.nested("lifecycle").get("replace_triggered_by"))]
    return [item for item in named if isinstance(item, str) and "${" not in item]


class ResetScopedToNode(Rule):
    code = "TV002"
    name = "ResetScopedToNode"
    why = (
        "a resource that resets or deletes a machine must belong to one node, and must not read another "
        "node's attributes: otherwise a change to node Y could reset or replace node X."
    )

    def check(self, view: StackView) -> None:
        for block in view.blocks:
            owner = node_owner(view, block)
            if owner is None:
                if block.type in RESET_CAPABLE:
                    written = " (it has no construct path: a stack-level override wrote it)" if block.pathless else ""
                    self.fail_block(
                        view,
                        block,
                        f"{block.type}.{block.logical_id} is not inside {OWNERS}{written}: "
                        f"create it through one of them so that it belongs to exactly one "
                        f"node.",
                    )
                continue
            if block.type in RESET_CAPABLE:
                self._one_machine(view, block, owner)
            targets = references(block.body) | references([f"${{{item}}}" for item in _bare_addresses(block)])
            reads = [(target, "") for target in targets]
            for remote_state, output in sorted(remote_outputs(block.body)):
                # A cross-stack reference: the other stack's output names what it reads.
                origin = view.cross_stack_output(remote_state, output)
                if origin is not None:
                    reads += [(target, f" (through stack {origin[0]!r})") for target in references(origin[1])]
            for (target_type, target_id), through in sorted(reads):
                other = id_owner(target_id)
                if other is not None and other != owner:
                    self.fail_block(
                        view,
                        block,
                        f"{block.type}.{block.logical_id} of {owner[0]} {owner[1]!r} reads "
                        f"{target_type}.{target_id} of {other[0]} {other[1]!r}{through}: give "
                        f"it only cluster-level inputs and its own node's attributes.",
                    )

    def _one_machine(self, view: StackView, block: Block, owner: tuple[str, str]) -> None:
        """A node's machine, its configuration apply or its reset is one block for one machine: counted or iterated,
        it would be several, and removing one of them (an index shifts, a key goes) would reset a machine that
        stays. Count 0 or 1 is one machine or none."""
        for key in ("count", "for_each"):
            if key not in block.body:
                continue
            value = block.body[key]
            if key == "count" and value in (0, 1) and not isinstance(value, bool):
                continue
            self.fail_block(
                view,
                block,
                f"{block.type}.{block.logical_id} of {owner[0]} {owner[1]!r} sets {key} to "
                f"{json.dumps(value)[:60]}: one node is one machine; add a node to the "
                f"site (or a construct) for each machine instead.",
            )
