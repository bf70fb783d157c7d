"""The steps every operation is made of: plan (saved), judge (the plan guard), confirm, back up and apply the saved
plan, read the state's addresses — and the journal of what an operation has done and not done yet.

Commands (deploy, destroy, restore, decommission, remove-dead-member, drift) import these steps, never each other:
a step changes in one place and every command that takes it changes with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from terravixens.catalogue import NODE_APPLY, VMS
from terravixens.exitcodes import ExitCode
from terravixens.guard import (
    GuardContext,
    RebootChecks,
    check_plan,
    deployed_usage,
    explain,
    refusals,
    site_roles,
    site_usage,
)
from terravixens.guard.plan import NotAPlan, Plan, parse_plan_text
from terravixens.inputs import InputError
from terravixens.layers import Layer
from terravixens.logical_ids import node_id
from terravixens.operations.backup import Backup, backup_state, local_state, pull_state
from terravixens.operations.console import Console
from terravixens.operations.files import remove_quietly
from terravixens.operations.journal import Journal, Unit
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Result, Terraform
from terravixens.operations.workspace import Workspace

PLAN_FILE = "terravixens.tfplan"


# ----------------------------------------------------------------------------------------------------- plan
@dataclass
class LayerPlan:
    """A saved plan of one layer, ready to be judged and applied."""

    layer: str
    path: Path
    changed: bool
    plan: Plan
    text: str = ""
    log: Result | None = None
    extra_waived: frozenset[str] = field(default_factory=frozenset)


def show_progress(console: Console, layer: str) -> Callable[[dict[str, Any]], None]:
    def on_message(message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind in ("apply_complete", "apply_errored") or (kind == "diagnostic" and message.get("@level") == "error"):
            console.step(layer, "apply" if kind != "diagnostic" else "error", message.get("@message", ""))
        elif kind == "diagnostic" and message.get("@level") == "warn":
            diagnostic = message.get("diagnostic") or {}
            detail = (diagnostic.get("detail") or "").strip().splitlines()
            where = f" ({diagnostic['address']})" if diagnostic.get("address") else ""
            console.step(
                layer,
                "warning",
                f"{diagnostic.get('summary', message.get('@message', ''))}{where}"
                f"{': ' + detail[0][:200] if detail else ''}",
            )

    return on_message


def make_plan(
    ws: Workspace, tf: Terraform, console: Console, layer: str, *extra: str, lock_timeout: str = "0s"
) -> LayerPlan:
    """`terraform plan -out` (with -detailed-exitcode), then `terraform show -json` of it read from the pipe."""
    workdir = ws.stack_dir(layer)
    path = workdir / PLAN_FILE
    remove_quietly(path)
    tf.require_credentials(workdir, layer)
    console.step(layer, "plan", " ".join(extra))
    result = tf.run_json(
        workdir,
        "plan",
        "-input=false",
        "-detailed-exitcode",
        f"-lock-timeout={lock_timeout}",
        f"-out={PLAN_FILE}",
        *extra,
        on_message=show_progress(console, layer),
    )
    if result.returncode not in (0, 2):
        remove_quietly(path)
        tf.check(result, "plan", layer)
    shown = tf.run(workdir, "show", "-json", "-no-color", PLAN_FILE)
    if shown.returncode != 0:
        remove_quietly(path)
        tf.check(shown, "show", layer)
    try:
        _, plan = parse_plan_text(shown.stdout, f"{layer}/{PLAN_FILE}")
    except (NotAPlan, InputError) as error:
        remove_quietly(path)
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    return LayerPlan(layer, path, result.returncode == 2, plan, shown.stdout, result)


# ---------------------------------------------------------------------------------------------------- judge
def platform_states(ws: Workspace, tf: Terraform, console: Console, judged: Layer) -> dict[str, dict[str, Any]]:
    """The deployed state of each layer whose guests use L0 (GuardFacts.guests_on_l0: the platform layers, the
    `standalone` layer's guests of the hypervisors), for the guard of `judged` (a layer with GuardFacts.l0_usage).

    Only the layer asked for is initialised: a local state is read where it lies (`terraform init` of a platform
    layer installs talos, which the offline mirror does not hold: the hypervisors layer deploys offline). An S3 state
    is pulled, initialising the layer's directory if needed; a provider that init cannot install stops with one line
    naming it and why it was needed."""
    states = {}
    for guests in ws.site_layers.guests_on_l0():
        layer = guests.name
        workdir = ws.stack_dir(layer)
        local = local_state(workdir, layer)
        if local is not None:
            state = local[1]
        else:
            if not (workdir / ".terraform").exists():
                console.step(layer, "init", "to read what its VMs use")
                try:
                    tf.init(workdir, layer)
                except OperationError as error:
                    raise OperationError(
                        f"{judged.name}: its guard reads {layer}'s state (what its VMs use), and {error}", error.code
                    ) from None
            _, state = pull_state(tf, workdir, layer)
        if state:
            states[layer] = state
    return states


def guard_context(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    layer: Layer,
    planned: LayerPlan,
    allow_reboot: frozenset[str],
    teardown: bool = False,
) -> GuardContext:
    """What the guard knows of `layer` besides its plan, from the layer's declared facts (terravixens.layers
    GuardFacts): the roles of its cluster's nodes, and what the site's guests use on L0 when its plan is judged
    against that."""
    usage = None
    if layer.guard.l0_usage:
        usage = deployed_usage(platform_states(ws, tf, console, layer))
        if not teardown:
            site_usage(ws.site, usage)
    return GuardContext(
        roles=site_roles(ws.site, layer),
        usage=usage,
        reboot_checks=RebootChecks.from_log(planned.log.messages) if planned.log is not None else None,
        allow_reboot=allow_reboot,
        waived=planned.extra_waived,
        teardown=teardown,
    )


def judge(console: Console, planned: LayerPlan, context: GuardContext) -> None:
    """The plan guard on the saved plan: a refusal deletes the plan and stops the operation (REFUSED)."""
    console.journal.saw(planned.layer, "guard")
    violations = check_plan(planned.plan, context)
    for violation in violations:
        console.say(f"  {violation}")
    refused = refusals(violations)
    if refused:
        for line in explain({v.code for v in refused}):
            console.say(f"  why {line}")
        remove_quietly(planned.path)
        raise OperationError(
            f"{planned.layer}: plan refused by the guard ({len(refused)} problem"
            f"{'s' if len(refused) != 1 else ''}); nothing was applied",
            ExitCode.REFUSED,
        )
    console.step(planned.layer, "guard", "ok" + (f" ({len(violations)} waived)" if violations else ""))


# -------------------------------------------------------------------------------------------------- confirm
def confirm(console: Console, layer: str, what: str, yes: bool) -> None:
    """`yes` typed at a terminal (or --yes); no terminal and no --yes is a refusal to guess (DECLINED)."""
    if yes:
        return
    console.journal.saw(layer, "confirm")
    answer = console.ask(f"{what} {layer}? Only 'yes' is accepted: ")
    if answer is None:
        raise OperationError(f"{layer}: no terminal to confirm on and no --yes: nothing was applied", ExitCode.DECLINED)
    if answer.strip() != "yes":
        raise OperationError(f"{layer}: not confirmed; nothing was applied", ExitCode.DECLINED)


def typed_confirmation(console: Console, expected: str, given: str | None, what: str) -> None:
    """What cannot be undone asks for its own name (SITE/LAYER, SITE/CLUSTER), typed or given with --confirm."""
    answer = given if given is not None else console.ask(f"{what}: type {expected} to confirm: ")
    if answer is None:
        raise OperationError(f"no terminal to confirm on: pass --confirm {expected}", ExitCode.DECLINED)
    if answer.strip() != expected:
        raise OperationError(
            f"confirmation {answer.strip()!r} is not {expected!r}: nothing was destroyed", ExitCode.DECLINED
        )


# ---------------------------------------------------------------------------------------------------- apply
def apply_saved(
    ws: Workspace, tf: Terraform, console: Console, planned: LayerPlan, reason: str, backup: Backup | bool | None = True
) -> None:
    """Backs the state up (verified) unless given one, then applies exactly the saved plan; the plan file is
    deleted either way."""
    workdir = ws.stack_dir(planned.layer)
    try:
        if backup is True:
            console.journal.saw(planned.layer, "backup")
            backup = backup_state(tf, workdir, planned.layer, ws.site.site, ws.root, reason)
            console.step(
                planned.layer,
                "backup",
                str(backup.path.relative_to(ws.root)) + f" (serial {backup.info.serial}, verified)"
                if backup
                else "no state yet: nothing to back up",
            )
        console.step(planned.layer, "apply", "the saved plan")
        result = tf.run_json(
            workdir,
            "apply",
            "-input=false",
            "-auto-approve",
            PLAN_FILE,
            on_message=show_progress(console, planned.layer),
        )
        if result.returncode != 0:
            where = f"; the state before it is in {backup.path}" if isinstance(backup, Backup) else ""
            raise OperationError(
                f"{planned.layer}: terraform apply failed (exit {result.returncode}){where}:\n{result.tail()}",
                ExitCode.FAILED,
            )
    finally:
        remove_quietly(planned.path)


# ---------------------------------------------------------------------------------------------------- state
def state_addresses(tf: Terraform, ws: Workspace, layer: str) -> list[str]:
    result = tf.state_list(ws.stack_dir(layer))
    if result.returncode != 0:
        tf.check(result, "state list", layer)
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def managed_count(state: dict[str, Any] | None) -> int:
    return sum(
        len(r.get("instances") or [])
        for r in (state or {}).get("resources") or []
        if isinstance(r, dict) and r.get("mode", "managed") == "managed"
    )


def apply_address(node: str) -> str:
    """The address of a node's configuration apply (its reset runs when it is destroyed)."""
    return f"{NODE_APPLY}.{node_id(node, 'apply')}"


def left_nodes(plan: Plan) -> list[str]:
    """Kubernetes names of the nodes whose apply the plan deletes (they left the site, and were reset): their VM's
    name in the prior state — TalosNode gives the VM and the Talos hostname the same name — else the node's key."""
    leaving = {c.node for c in plan.changes if c.type == NODE_APPLY and c.deletes and not c.creates and c.node}
    names = {r.node: r.values.get("name") for r in plan.prior_of(*VMS) if r.node in leaving}
    return sorted(names.get(node) or node for node in leaving)


__all__ = [
    "PLAN_FILE",
    "Journal",
    "LayerPlan",
    "Unit",
    "apply_address",
    "apply_saved",
    "confirm",
    "guard_context",
    "judge",
    "left_nodes",
    "make_plan",
    "managed_count",
    "platform_states",
    "show_progress",
    "state_addresses",
    "typed_confirmation",
]
