"""How the rules run over a stack: once, as one validation of the stack, after every Aspect.

Below the rules themselves (terravixens.rules.base imports this module to attach a rule used as an Aspect; the
package's `apply_rules` attaches all of them), so nothing here imports a rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import jsii
from cdktf import Annotations, App, TerraformStack
from constructs import IValidation

from terravixens.rules.view import StackView


class RuleCheck(Protocol):
    """What RuleSet runs: a rule (terravixens.rules.base.Rule) or anything that judges a StackView the same way."""

    def check(self, view: StackView) -> None: ...


@jsii.implements(IValidation)
class RuleSet:
    """Every rule over one stack, in one pass: a validation of the stack, so cdktf calls it once per synth (after
    every Aspect, on the finished tree) instead of once per rule and construct as Aspects are. Violations are error
    annotations on the offending construct; the list returned to cdktf stays empty, so synth fails with the rules'
    messages ("Encountered Annotations with level ERROR") as before."""

    def __init__(self, stack: TerraformStack, rules: Sequence[RuleCheck]):
        self.stack = stack
        self.rules = tuple(rules)

    def validate(self) -> list[str]:
        view = StackView(self.stack)
        for rule in self.rules:
            rule.check(view)
        return []


def refuse_skipped_validations(stack: TerraformStack, rules: str, consequence: str) -> None:
    """An App built with skip_validation=True runs no validation, so no rule: synth fails instead of passing the
    stack unjudged (an error annotation stops synth whether validations run or not)."""
    try:
        skipped = App.of(stack).skip_validation
    except RuntimeError:  # a stack outside an App: no app.synth() will run it either way
        return
    if skipped:
        Annotations.of(stack).add_error(
            f"{rules} run as a validation of stack {stack.node.id!r}, and its App skips "
            f"validations (skip_validation=True), so {consequence}: build the App "
            f"without skip_validation."
        )
