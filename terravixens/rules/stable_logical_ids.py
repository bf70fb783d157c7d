"""TV003 StableLogicalIds: logical ids derive from stable node names, never from positions, roles or path hashes.

Inside a TalosNode an id is `node_<name>_<part>`; inside a StandaloneVm or StandaloneContainer it is
`sa_<name>_<part>` (ADR 0006, ADR 0025).
"""

from __future__ import annotations

import re

from terravixens.logical_ids import node_id, owner_of, standalone_id, standalone_owner_of
from terravixens.rules.base import Rule
from terravixens.rules.reset_scoped_to_node import node_owner
from terravixens.rules.view import StackView

PATH_HASH = re.compile(r"_[0-9A-F]{8}$")
ROLE_WORDS = re.compile(r"control[-_]?plane|worker|(?:^|_)cp(?:_|$)|(?:^|_)wk(?:_|$)")
POSITION = re.compile(r"_\d+(?:_|$)")
ID_OF = {"node": (node_id, owner_of), "standalone": (standalone_id, standalone_owner_of)}


class StableLogicalIds(Rule):
    code = "TV003"
    name = "StableLogicalIds"
    why = (
        "a logical id is a Terraform address: when it changes, Terraform destroys and re-creates the resource. "
        "Ids from list positions or roles change when a node is added, removed or promoted."
    )

    def check(self, view: StackView) -> None:
        for block in view.blocks:
            current = block.logical_id
            if PATH_HASH.search(current):
                self.fail_block(
                    view, block, f"{current!r} is cdktf's path-derived id: pin it with terravixens.logical_ids.pin()."
                )
                continue
            owner = node_owner(view, block)
            if owner is None:
                continue
            kind, name = owner
            make_id, owner_from_id = ID_OF[kind]
            expected_prefix = make_id(name, "")
            if owner_from_id(current) != name or not current.startswith(expected_prefix):
                self.fail_block(
                    view, block, f"{current!r} belongs to {kind} {name!r} but is not named {expected_prefix}<part>."
                )
                continue
            part = current[len(expected_prefix) :]
            if ROLE_WORDS.search(part) or POSITION.search("_" + part):
                self.fail_block(
                    view, block, f"{current!r} carries a role or a position ({part!r}): name it by what it is."
                )
