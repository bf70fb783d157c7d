"""Which paths may plan and apply a terravixens stack: the guarded ones (docs/adr/0031-guarded-cdktf-path.md).

Every stack of the app declares the input variable `terravixens_guarded` (terravixens.stacks.guarded), false by
default, with a validation rule that fails unless it is true. terravixens sets it for the Terraform it runs (the
operations, and `terravixens-terraform`, the Terraform that `bin/cdktf` runs in this repository), so a `terraform
plan`/`apply`/`destroy`, or a `cdktf deploy` that reaches Terraform directly, stops before it changes anything and
says the exact command to use instead.

The commands every message names are spelled here, once, as a new shell runs them from the checkout (`bin/terravixens`,
`bin/cdktf`: ADR 0049): this variable's validation message (in every synthesized stack) and the wrapper's refusals
(terravixens.tfwrap) both read them.

Standard library only: `terravixens.provider_install` (imported before any virtualenv exists) reads it.
"""

from __future__ import annotations

VARIABLE = "terravixens_guarded"
ENV_NAME = f"TF_VAR_{VARIABLE}"
WRAPPER = "terravixens-terraform"
# The typed confirmation of `cdktf destroy LAYER` (cdktf's own prompt can only answer yes or no).
CONFIRM_ENV = "TERRAVIXENS_CONFIRM"
# How a new shell runs terravixens and cdktf from the checkout (ADR 0049): what every message names.
TERRAVIXENS = "bin/terravixens"
CDKTF = "bin/cdktf"


def environment() -> dict[str, str]:
    """What the Terraform terravixens runs needs beyond the user's environment to pass the stacks' requirement."""
    return {ENV_NAME: "true"}


def commands(layer: str) -> str:
    """The guarded ways to change and to review `layer`, as the refusals print them."""
    return (
        f"`{CDKTF} deploy {layer}` from the repository (it runs Terraform through {WRAPPER}: plan guard, verified "
        f"state backup, then that saved plan) or `{TERRAVIXENS} deploy {layer}`; to tear it down `{TERRAVIXENS} "
        f"destroy {layer}`; to review a plan `{TERRAVIXENS} drift {layer}` or `{CDKTF} diff {layer}`"
    )


def refusal(layer: str) -> str:
    """The validation message of `terravixens_guarded` in layer `layer`'s stack."""
    return (
        f"Layer {layer} is planned and applied through terravixens only, so that the plan guard and a verified "
        f"state backup run first: use {commands(layer)}. Set {ENV_NAME}=true yourself only to run Terraform "
        f"unguarded, knowingly (docs/adr/0031-guarded-cdktf-path.md)."
    )


__all__ = [
    "CDKTF",
    "CONFIRM_ENV",
    "ENV_NAME",
    "TERRAVIXENS",
    "VARIABLE",
    "WRAPPER",
    "commands",
    "environment",
    "refusal",
]
