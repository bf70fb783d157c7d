"""Synth-time safety rules: the reason terravixens exists. Each rule is a named class in its own module.

`apply_rules(stack)` runs all of them once over the whole stack, after every Aspect (a stack validation, see
RuleSet); a violation is an error annotation that fails `cdktf synth` with the rule's code, name, the offending
address, the fix and the reason. See docs/adr/0005-synth-time-safety-rules.md and docs/adr/0027-synth-speed.md.
"""
from __future__ import annotations

from collections.abc import Sequence

import jsii
from cdktf import Annotations, App, TerraformStack
from constructs import IValidation

from terravixens.rules.base import Rule
from terravixens.rules.bootstrap_once import BootstrapOnce
from terravixens.rules.no_secret_literals import NoSecretLiterals
from terravixens.rules.no_template_sequences import NoTemplateSequences
from terravixens.rules.odd_control_planes import OddControlPlaneQuorum
from terravixens.rules.reset_scoped_to_node import ResetScopedToNode
from terravixens.rules.stable_logical_ids import StableLogicalIds
from terravixens.rules.storage_prevent_destroy import StoragePreventDestroy
from terravixens.rules.view import StackView

ALL_RULES = (
    OddControlPlaneQuorum,
    ResetScopedToNode,
    StableLogicalIds,
    BootstrapOnce,
    StoragePreventDestroy,
    NoSecretLiterals,
    NoTemplateSequences,
)


@jsii.implements(IValidation)
class RuleSet:
    """Every rule over one stack, in one pass: a validation of the stack, so cdktf calls it once per synth (after
    every Aspect, on the finished tree) instead of once per rule and construct as Aspects are. Violations are error
    annotations on the offending construct; the list returned to cdktf stays empty, so synth fails with the rules'
    messages ("Encountered Annotations with level ERROR") as before."""

    def __init__(self, stack: TerraformStack, rules: Sequence[Rule]):
        self.stack = stack
        self.rules = tuple(rules)

    def validate(self) -> list[str]:
        view = StackView(self.stack)
        for rule in self.rules:
            rule.check(view)
        return []


def apply_rules(stack: TerraformStack) -> None:
    stack.node.add_validation(RuleSet(stack, [rule() for rule in ALL_RULES]))
    refuse_skipped_validations(stack, "terravixens' safety rules (TV001-TV007)", "none would run")


def refuse_skipped_validations(stack: TerraformStack, rules: str, consequence: str) -> None:
    """An App built with skip_validation=True runs no validation, so no rule: synth fails instead of passing the
    stack unjudged (an error annotation stops synth whether validations run or not)."""
    try:
        skipped = App.of(stack).skip_validation
    except RuntimeError:  # a stack outside an App: no app.synth() will run it either way
        return
    if skipped:
        Annotations.of(stack).add_error(f"{rules} run as a validation of stack {stack.node.id!r}, and its App skips "
                                        f"validations (skip_validation=True), so {consequence}: build the App "
                                        f"without skip_validation.")


__all__ = ["ALL_RULES", "RuleSet", "apply_rules", *(rule.__name__ for rule in ALL_RULES)]
