"""Which paths may plan and apply a terravixens stack: the guarded ones (docs/adr/0031-guarded-cdktf-path.md).

Every stack of the app declares the input variable `terravixens_guarded` (terravixens.stacks.guarded), false by
default, with a validation rule that fails unless it is true. terravixens sets it for the Terraform it runs (the
operations, and `terravixens-terraform`, the Terraform that `npx cdktf` runs in this repository), so a `terraform
plan`/`apply`/`destroy`, or a `cdktf deploy` that reaches Terraform directly, stops before it changes anything and
says the exact command to use instead.

Standard library only: `terravixens.provider_install` (imported before any virtualenv exists) reads it.
"""

from __future__ import annotations

VARIABLE = "terravixens_guarded"
ENV_NAME = f"TF_VAR_{VARIABLE}"
WRAPPER = "terravixens-terraform"
# The typed confirmation of `cdktf destroy LAYER` (cdktf's own prompt can only answer yes or no).
CONFIRM_ENV = "TERRAVIXENS_CONFIRM"


def environment() -> dict[str, str]:
    """What the Terraform terravixens runs needs beyond the user's environment to pass the stacks' requirement."""
    return {ENV_NAME: "true"}


def commands(layer: str) -> str:
    """The guarded ways to change and to review `layer`, as the refusals print them."""
    return (
        f"`npx cdktf deploy {layer}` from the repository (its .npmrc makes cdktf run Terraform through "
        f"{WRAPPER}: plan guard, verified state backup, then that saved plan) or `pipenv run terravixens deploy "
        f"{layer}`; to tear it down `pipenv run terravixens destroy {layer}`; to review a plan `pipenv run "
        f"terravixens drift {layer}` or `npx cdktf diff {layer}`"
    )


def refusal(layer: str) -> str:
    """The validation message of `terravixens_guarded` in layer `layer`'s stack."""
    return (
        f"Layer {layer} is planned and applied through terravixens only, so that the plan guard and a verified "
        f"state backup run first: use {commands(layer)}. Set {ENV_NAME}=true yourself only to run Terraform "
        f"unguarded, knowingly (docs/adr/0031-guarded-cdktf-path.md)."
    )


__all__ = ["CONFIRM_ENV", "ENV_NAME", "VARIABLE", "WRAPPER", "commands", "environment", "refusal"]
