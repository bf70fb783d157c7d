"""Synth-time safety rules: the reason terravixens exists. Each rule is an Aspect in its own module.

`apply_rules(stack)` attaches all of them; a violation is an error annotation that fails `cdktf synth` with the
rule's code, name, the offending address, the fix and the reason. See docs/adr/0005-synth-time-safety-rules.md.
"""
from __future__ import annotations

from cdktf import Aspects, TerraformStack

from terravixens.rules.bootstrap_once import BootstrapOnce
from terravixens.rules.no_secret_literals import NoSecretLiterals
from terravixens.rules.no_template_sequences import NoTemplateSequences
from terravixens.rules.odd_control_planes import OddControlPlaneQuorum
from terravixens.rules.reset_scoped_to_node import ResetScopedToNode
from terravixens.rules.stable_logical_ids import StableLogicalIds
from terravixens.rules.storage_prevent_destroy import StoragePreventDestroy

ALL_RULES = (
    OddControlPlaneQuorum,
    ResetScopedToNode,
    StableLogicalIds,
    BootstrapOnce,
    StoragePreventDestroy,
    NoSecretLiterals,
    NoTemplateSequences,
)


def apply_rules(stack: TerraformStack) -> None:
    for rule in ALL_RULES:
        Aspects.of(stack).add(rule())


__all__ = ["ALL_RULES", "apply_rules", *(rule.__name__ for rule in ALL_RULES)]
