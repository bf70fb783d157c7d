"""TV005 StoragePreventDestroy: what cannot be re-created carries prevent_destroy."""
from __future__ import annotations

from constructs import IConstruct

from terravixens.catalogue import MACHINE_SECRETS, PROTECTED
from terravixens.rules.base import Rule, enclosing, logical_id

# Kept under its old name: library users import it from here.
PROTECTED_TYPES = PROTECTED


class StoragePreventDestroy(Rule):
    code = "TV005"
    name = "StoragePreventDestroy"
    why = ("volumes, state buckets and cluster secrets cannot be re-created: a destroy loses data or every "
           "certificate of the cluster.")

    def visit(self, node: IConstruct) -> None:
        from terravixens.constructs.cluster_config import ClusterConfig

        kind = getattr(node, "terraform_resource_type", None)
        if kind == MACHINE_SECRETS:
            owner = enclosing(node, ClusterConfig)
            if owner is not None and owner.props.release_secrets:
                return  # released on purpose by `terravixens decommission --destroy-secrets`, in its own synth
        if kind in PROTECTED_TYPES:
            lifecycle = node.lifecycle
            if lifecycle is None or not lifecycle.prevent_destroy:
                self.fail(node, f"{kind}.{logical_id(node)} has no lifecycle prevent_destroy: set it, or keep this "
                                f"resource outside terravixens' stacks.")
