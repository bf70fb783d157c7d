"""Shared plumbing of the safety rules: naming, messages, and reading what a stack will synthesize."""

from __future__ import annotations

import jsii
from cdktf import Annotations, IAspect, TerraformElement, TerraformStack
from constructs import IConstruct

from terravixens.rules.ruleset import RuleSet, refuse_skipped_validations
from terravixens.rules.view import Block, StackView


@jsii.implements(IAspect)
class Rule:
    """A named synth-time rule. Subclasses set `code`, `name` and `why`, and implement `check(view)` over one stack.

    `terravixens.rules.apply_rules` runs every rule once per stack, after all Aspects (a stack validation). A rule
    is also an Aspect on its own: `Aspects.of(stack).add(StableLogicalIds())` checks that stack too, and also after
    all Aspects: cdktf visits a stack before anything in it, so a check at the visit would miss what the other
    Aspects change or add below it; the visit adds the rule as a validation of the stack instead. Attached to a
    construct below a stack, a rule would see no stack: it fails synth and says where to attach it.
    """

    code = "TV000"
    name = "Rule"
    why = ""

    def check(self, view: StackView) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def visit(self, node: IConstruct) -> None:
        state = self.__dict__.setdefault("_aspect", {"stacks": set(), "refused": False})
        if isinstance(node, TerraformStack):
            if id(node) not in state["stacks"]:
                state["stacks"].add(id(node))
                node.node.add_validation(RuleSet(node, [self]))
                refuse_skipped_validations(node, f"rule {self.code} {self.name}", "it would not run")
        elif not state["stacks"] and not state["refused"]:
            # cdktf visits the construct an Aspect is attached to first: no stack before it, so it is below one.
            state["refused"] = True
            self.fail(
                node,
                f"the rule is attached as an Aspect to {node.node.path!r}, below its stack, where it "
                f"judges nothing: attach it to the stack (Aspects.of(stack).add(...)) or call "
                f"terravixens.rules.apply_rules(stack).",
            )

    def message(self, detail: str) -> str:
        return f"[{self.code} {self.name}] {detail} Why: {self.why}"

    def fail(self, node: IConstruct, detail: str) -> None:
        Annotations.of(node).add_error(self.message(detail))

    def fail_block(self, view: StackView, block: Block, detail: str) -> None:
        """The error is attached to the construct that wrote the block (cdktf prints its path before the message)."""
        self.fail(view.construct_at(block.path), detail)


def logical_id(element: TerraformElement) -> str:
    """The id the element is synthesized under, overrides included (Stack.get_logical_id ignores overrides)."""
    return element.friendly_unique_id
