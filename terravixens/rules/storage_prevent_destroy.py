"""TV005 StoragePreventDestroy: what cannot be re-created carries prevent_destroy."""

from __future__ import annotations

from terravixens.catalogue import MACHINE_SECRETS, PROTECTED
from terravixens.rules.base import Rule
from terravixens.rules.view import StackView

# Kept under its old name: library users import it from here.
PROTECTED_TYPES = PROTECTED


class StoragePreventDestroy(Rule):
    code = "TV005"
    name = "StoragePreventDestroy"
    why = (
        "volumes, state buckets and cluster secrets cannot be re-created: a destroy loses data or every "
        "certificate of the cluster."
    )

    def check(self, view: StackView) -> None:
        from terravixens.constructs.cluster_config import ClusterConfig

        for block in view.blocks_of(PROTECTED_TYPES):
            if block.type == MACHINE_SECRETS:
                owner = view.owner(block, ClusterConfig)
                if owner is not None and owner.props.release_secrets:
                    continue  # released on purpose by `terravixens decommission --destroy-secrets`, in its own synth
            if block.nested("lifecycle").get("prevent_destroy") is not True:
                self.fail_block(
                    view,
                    block,
                    f"{block.type}.{block.logical_id} has no lifecycle prevent_destroy: set "
                    f"it, or keep this resource outside terravixens' stacks.",
                )
