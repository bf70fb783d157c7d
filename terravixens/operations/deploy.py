"""`terravixens deploy [LAYER…|--all]`: per layer, in apply order —

    synth → init → plan -out (saved plan) → guard on `terraform show -json` of it (piped, never written unless
    asked) → per-node summary → confirm (or --yes) → back up the state → apply THAT saved plan → delete the plan
    → delete the Kubernetes Node objects of nodes that left (their reset leaves them behind).

A refused plan stops everything (exit 1) before anything is applied; later layers are not touched. The process
umask is 077, so the plan file and local state Terraform writes are 0600. See docs/adr/0020-operations.md.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from terravixens.catalogue import NODE_APPLY, VMS
from terravixens.guard import (GuardContext, RebootChecks, check_plan, deployed_usage, explain, refusals, site_roles,
                               site_usage)
from terravixens.guard.plan import NotAPlan, Plan, parse_plan_text
from terravixens.inputs import InputError
from terravixens.layers import HYPERVISORS
from terravixens.standalone.layout import STANDALONE
from terravixens.operations import summary
from terravixens.operations.backup import Backup, backup_state, pull_state
from terravixens.operations.console import Console
from terravixens.operations.files import remove_quietly, write_private
from terravixens.operations.kube import Kubectl, delete_nodes, kubeconfig_of
from terravixens.operations.outcome import ExitCode, OperationError
from terravixens.operations.terraform import Result, Terraform
from terravixens.operations.workspace import Workspace

PLAN_FILE = "terravixens.tfplan"


@dataclass(frozen=True)
class DeployOptions:
    yes: bool = False
    allow_reboot: frozenset[str] = frozenset()
    save_plan_json: Path | None = None
    lock_timeout: str = "0s"
    synth: bool = True


@dataclass
class LayerPlan:
    """A saved plan of one layer, ready to be judged and applied."""

    layer: str
    path: Path
    changed: bool
    plan: Plan | None = None
    text: str = ""
    log: Result | None = None
    extra_waived: frozenset[str] = field(default_factory=frozenset)


def show_progress(console: Console, layer: str):
    def on_message(message: dict) -> None:
        kind = message.get("type")
        if kind in ("apply_complete", "apply_errored") or (kind == "diagnostic" and message.get("@level") == "error"):
            console.step(layer, "apply" if kind != "diagnostic" else "error", message.get("@message", ""))
        elif kind == "diagnostic" and message.get("@level") == "warn":
            diagnostic = message.get("diagnostic") or {}
            detail = (diagnostic.get("detail") or "").strip().splitlines()
            where = f" ({diagnostic['address']})" if diagnostic.get("address") else ""
            console.step(layer, "warning", f"{diagnostic.get('summary', message.get('@message', ''))}{where}"
                                           f"{': ' + detail[0][:200] if detail else ''}")
    return on_message


def make_plan(ws: Workspace, tf: Terraform, console: Console, layer: str, *extra: str,
              lock_timeout: str = "0s") -> LayerPlan:
    """`terraform plan -out` (with -detailed-exitcode), then `terraform show -json` of it read from the pipe."""
    workdir = ws.stack_dir(layer)
    path = workdir / PLAN_FILE
    remove_quietly(path)
    console.step(layer, "plan", " ".join(extra))
    result = tf.run_json(workdir, "plan", "-input=false", "-detailed-exitcode", f"-lock-timeout={lock_timeout}",
                         f"-out={PLAN_FILE}", *extra, on_message=show_progress(console, layer))
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


def platform_states(ws: Workspace, tf: Terraform, console: Console) -> dict[str, dict]:
    """Each platform layer's deployed state (what its VMs use), and the `standalone` layer's (guests of the
    hypervisors), initialising the layer's directory if needed."""
    states = {}
    for layer in ws.platform_layers() + ([STANDALONE] if STANDALONE in ws.layers() else []):
        workdir = ws.stack_dir(layer)
        if not (workdir / ".terraform").exists():
            console.step(layer, "init", "to read what its VMs use")
            tf.init(workdir, layer)
        _, state = pull_state(tf, workdir, layer)
        if state:
            states[layer] = state
    return states


def guard_context(ws: Workspace, tf: Terraform, console: Console, layer: str, planned: LayerPlan,
                  allow_reboot: frozenset[str], teardown: bool = False) -> GuardContext:
    usage = None
    if layer == HYPERVISORS:
        usage = deployed_usage(platform_states(ws, tf, console))
        if not teardown:
            site_usage(ws.site, usage)
    return GuardContext(
        roles=site_roles(ws.site, layer) if ws.cluster_of(layer) else {},
        usage=usage,
        reboot_checks=RebootChecks.from_log(planned.log.messages) if planned.log is not None else None,
        allow_reboot=allow_reboot,
        waived=planned.extra_waived,
        teardown=teardown,
    )


def judge(console: Console, planned: LayerPlan, context: GuardContext) -> None:
    violations = check_plan(planned.plan, context)
    for violation in violations:
        console.say(f"  {violation}")
    refused = refusals(violations)
    if refused:
        for line in explain({v.code for v in refused}):
            console.say(f"  why {line}")
        remove_quietly(planned.path)
        raise OperationError(f"{planned.layer}: plan refused by the guard ({len(refused)} problem"
                             f"{'s' if len(refused) != 1 else ''}); nothing was applied", ExitCode.REFUSED)
    console.step(planned.layer, "guard", "ok" + (f" ({len(violations)} waived)" if violations else ""))


def confirm(console: Console, layer: str, what: str, yes: bool) -> None:
    if yes:
        return
    answer = console.ask(f"{what} {layer}? Only 'yes' is accepted: ")
    if answer is None:
        raise OperationError(f"{layer}: no terminal to confirm on and no --yes: nothing was applied", ExitCode.DECLINED)
    if answer.strip() != "yes":
        raise OperationError(f"{layer}: not confirmed; nothing was applied", ExitCode.DECLINED)


def apply_saved(ws: Workspace, tf: Terraform, console: Console, planned: LayerPlan, reason: str,
                backup: Backup | None | bool = True) -> None:
    """Backs the state up (verified) unless given one, then applies exactly the saved plan; the plan file is
    deleted either way."""
    workdir = ws.stack_dir(planned.layer)
    try:
        if backup is True:
            backup = backup_state(tf, workdir, planned.layer, ws.site.site, ws.root, reason)
            console.step(planned.layer, "backup", str(backup.path.relative_to(ws.root)) +
                         f" (serial {backup.info.serial}, verified)" if backup else "no state yet: nothing to back up")
        console.step(planned.layer, "apply", "the saved plan")
        result = tf.run_json(workdir, "apply", "-input=false", "-auto-approve", PLAN_FILE,
                             on_message=show_progress(console, planned.layer))
        if result.returncode != 0:
            where = f"; the state before it is in {backup.path}" if isinstance(backup, Backup) else ""
            raise OperationError(f"{planned.layer}: terraform apply failed (exit {result.returncode}){where}:\n"
                                 f"{result.tail()}", ExitCode.TERRAFORM_FAILED)
    finally:
        remove_quietly(planned.path)


def left_nodes(plan: Plan) -> list[str]:
    """Kubernetes names of the nodes whose apply the plan deletes (they left the site, and were reset): their VM's
    name in the prior state — TalosNode gives the VM and the Talos hostname the same name — else the node's key."""
    leaving = {c.node for c in plan.changes if c.type == NODE_APPLY and c.deletes and not c.creates and c.node}
    names = {r.node: r.values.get("name") for r in plan.prior_of(*VMS) if r.node in leaving}
    return sorted(names.get(node) or node for node in leaving)


def deploy_layer(ws: Workspace, tf: Terraform, console: Console, layer: str, options: DeployOptions,
                 several: bool = False, kubectl: Kubectl | None = None) -> bool:
    """Returns True when something was applied."""
    workdir = ws.stack_dir(layer)
    console.step(layer, "init")
    tf.init(workdir, layer)
    planned = make_plan(ws, tf, console, layer, lock_timeout=options.lock_timeout)
    try:
        if options.save_plan_json is not None:
            target = options.save_plan_json if not several else options.save_plan_json.with_name(
                f"{options.save_plan_json.stem}-{layer}{options.save_plan_json.suffix}")
            write_private(target, planned.text)
            console.step(layer, "plan json", f"written to {target} (0600: it holds sensitive values)")
        if not planned.changed:
            console.step(layer, "plan", "no changes")
            remove_quietly(planned.path)
            return False
        judge(console, planned, guard_context(ws, tf, console, layer, planned, options.allow_reboot))
        console.step(layer, "summary", summary.counts(planned.plan))
        for line in summary.lines(planned.plan):
            console.say(line)
        confirm(console, layer, "Apply these changes to", options.yes)
        apply_saved(ws, tf, console, planned, "deploy")
    finally:
        remove_quietly(planned.path)
    gone = left_nodes(planned.plan)
    if gone:  # a Talos reset leaves the Node object behind, NotReady for ever
        delete_nodes(kubectl or Kubectl(), kubeconfig_of(tf, workdir), gone, console, layer)
    console.step(layer, "done")
    return True


def deploy(ws: Workspace, layers: Sequence[str] | None, tf: Terraform, options: DeployOptions,
           console: Console | None = None, kubectl: Kubectl | None = None) -> int:
    console = console or Console()
    selected = ws.layers(layers)
    if options.synth:
        console.step("site", "synth", f"{ws.site.site}: {', '.join(ws.layers())}")
        ws.synth()
    applied = [layer for layer in selected
               if deploy_layer(ws, tf, console, layer, options, len(selected) > 1, kubectl)]
    console.say(f"deployed: {', '.join(applied) or 'nothing (no changes)'}")
    return ExitCode.OK
