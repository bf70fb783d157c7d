"""Synth-time safety rules: the reason terravixens exists. Each rule is a named class in its own module.

`apply_rules(stack)` runs all of them once over the whole stack, after every Aspect (a stack validation, see
RuleSet); a violation is an error annotation that fails `cdktf synth` with the rule's code, name, the offending
address, the fix and the reason. See docs/adr/0005-synth-time-safety-rules.md and docs/adr/0027-synth-speed.md.
"""

from __future__ import annotations

from cdktf import TerraformStack

from terravixens.rules import overrides
from terravixens.rules.base import Rule
from terravixens.rules.bootstrap_once import BootstrapOnce
from terravixens.rules.no_secret_literals import NoSecretLiterals
from terravixens.rules.no_template_sequences import NoTemplateSequences
from terravixens.rules.odd_control_planes import OddControlPlaneQuorum
from terravixens.rules.reset_scoped_to_node import ResetScopedToNode
from terravixens.rules.ruleset import RuleSet, refuse_skipped_validations
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
    """Every rule over `stack` at synth. Stack-level overrides added to it from now on are recorded for TV007
    (terravixens.rules.overrides; a terravixens stack records them from its creation)."""
    overrides.record(stack)
    stack.node.add_validation(RuleSet(stack, [rule() for rule in ALL_RULES]))
    codes = f"{ALL_RULES[0].code}-{ALL_RULES[-1].code}"  # derived: adding a rule touches ALL_RULES only
    refuse_skipped_validations(stack, f"terravixens' safety rules ({codes})", "none would run")


__all__ = ["ALL_RULES", "Rule", "RuleSet", "apply_rules", "refuse_skipped_validations"]
__all__ += [rule.__name__ for rule in ALL_RULES]  # the rule classes, named once: adding a rule touches ALL_RULES only
