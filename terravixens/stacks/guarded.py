"""What every stack of the terravixens app carries so that only a guarded path plans and applies it.

One function, one line in each stack class. Library users who build their own stacks from our constructs carry
nothing of this: it is the app's promise (docs/adr/0031-guarded-cdktf-path.md), not a construct's.
"""

from __future__ import annotations

from cdktf import TerraformStack, TerraformVariable, TerraformVariableValidationConfig

from terravixens.guarded_path import VARIABLE, refusal
from terravixens.logical_ids import pin


def require_guarded_path(stack: TerraformStack) -> TerraformVariable:
    """Declares `terravixens_guarded` (bool, default false) with a validation that fails unless it is true.

    A variable validation, not a resource precondition: Terraform checks it in every plan — `destroy`,
    `-refresh-only` and `import` included — before anything is written, and it adds nothing to the state. The
    message names the layer and the exact commands to use instead.
    """
    layer = stack.node.id
    return pin(
        TerraformVariable(
            stack,
            VARIABLE,
            type="bool",
            default=False,
            nullable=False,
            description=f"Set by terravixens (operations, terravixens-terraform) for the Terraform it runs: {layer} is "
            f"planned and applied after the plan guard and a verified state backup.",
            validation=[
                TerraformVariableValidationConfig(
                    condition=f"${{var.{VARIABLE}}}",
                    error_message=refusal(layer),
                )
            ],
        ),
        VARIABLE,
    )
