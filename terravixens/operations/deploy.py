"""`terravixens deploy [LAYER…|--all]`: per layer, in apply order —

    synth → init → plan -out (saved plan) → guard on `terraform show -json` of it (piped, never written unless
    asked) → per-node summary → confirm (or --yes) → back up the state → apply THAT saved plan → delete the plan
    → delete the Kubernetes Node objects of nodes that left (their reset leaves them behind).

A refused plan stops everything (exit 1) before anything is applied; later layers are not touched. The process
umask is 077, so the plan file and local state Terraform writes are 0600. See docs/adr/0020-operations.md.

A platform layer whose plan takes several control planes out of etcd (or replaces control planes, or removes more
workers than --worker-batch) is not applied in one go: terravixens.operations.scale_in runs it as a sequence of
guarded applies, one control plane per apply (docs/adr/0037-control-plane-scale-in-sequencing.md).
`--dry-run` stops every layer after its guard and summary (and a scale-in after showing its steps).

`--check`: once a cluster's platform and gitops layers (those being deployed) are done, the acceptance check of that
cluster (terravixens.operations.acceptance, ADR 0039); problems stop the deploy with CHECK_FAILED (6).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from terravixens.arguments import (
    Definition,
    allow_reboot_option,
    batch,
    duration,
    no_snapshot_option,
    secrets_option,
    site_option,
)
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.layers import Layer
from terravixens.operations import acceptance, scale_in, summary
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy
from terravixens.operations.files import remove_quietly, require_new_file, write_new
from terravixens.operations.kube import Kubectl, delete_nodes, kubeconfig_of
from terravixens.operations.scale_in import ScaleInOptions
from terravixens.operations.steps import (
    PLAN_FILE,
    LayerPlan,
    apply_saved,
    confirm,
    guard_context,
    judge,
    left_nodes,
    make_plan,
)
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace

SAVE_PLAN_JSON = "--save-plan-json"


@dataclass(frozen=True)
class DeployOptions:
    yes: bool = False
    allow_reboot: frozenset[str] = frozenset()
    save_plan_json: Path | None = None
    lock_timeout: str = "0s"
    synth: bool = True
    dry_run: bool = False
    scale_in: ScaleInOptions = field(default_factory=ScaleInOptions)
    check: acceptance.CheckOptions | None = None  # --check: the acceptance check after each cluster's layers


def plan_json_path(options: DeployOptions, layer: str, several: bool) -> Path | None:
    """Where --save-plan-json writes `layer`'s plan: the path itself, or PATH-STEM-<layer>.SUFFIX for several layers."""
    target = options.save_plan_json
    if target is None or not several:
        return target
    return target.with_name(f"{target.stem}-{layer}{target.suffix}")


def deploy_layer(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    found: Layer,
    options: DeployOptions,
    several: bool = False,
    kubectl: Kubectl | None = None,
) -> bool:
    """Returns True when something was applied."""
    layer = found.name
    workdir = ws.stack_dir(layer)
    console.step(layer, "init")
    tf.init(workdir, layer)
    planned = make_plan(ws, tf, console, layer, lock_timeout=options.lock_timeout)
    try:
        target = plan_json_path(options, layer, several)
        if target is not None:
            write_new(target, planned.text, SAVE_PLAN_JSON)
            console.step(layer, "plan json", f"written to {target} (0600: it holds sensitive values)")
        if not planned.changed:
            console.step(layer, "plan", "no changes")
            remove_quietly(planned.path)
            return False
        sequence = scale_in.sequence_of(ws.site, found, planned.plan, options.scale_in.worker_batch)
        if sequence is not None:  # several control planes leave (or join first): one guarded apply per step
            how = scale_in.SequenceRun(
                options.scale_in, options.yes, options.allow_reboot, options.lock_timeout, options.dry_run
            )
            return scale_in.run(ws, tf, console, planned, sequence, how, kubectl)
        judge(console, planned, guard_context(ws, tf, console, found, planned, options.allow_reboot))
        console.step(layer, "summary", summary.counts(planned.plan))
        for line in summary.lines(planned.plan):
            console.say(line)
        if options.dry_run:
            console.step(layer, "dry run", "nothing applied")
            return False
        confirm(console, layer, "Apply these changes to", options.yes)
        apply_saved(ws, tf, console, planned, "deploy")
    finally:
        remove_quietly(planned.path)
    gone = left_nodes(planned.plan)
    if gone:  # a Talos reset leaves the Node object behind, NotReady for ever
        delete_nodes(kubectl or Kubectl(), kubeconfig_of(tf, workdir), gone, console, layer)
    console.step(layer, "done")
    return True


def deploy(
    ws: Workspace,
    layers: Sequence[str] | None,
    tf: Terraform,
    options: DeployOptions,
    console: Console | None = None,
    kubectl: Kubectl | None = None,
) -> int:
    console = console or Console()
    chosen = ws.layers(layers)
    selected = [layer.name for layer in chosen]
    several = len(selected) > 1
    for layer in selected:  # before anything runs: a plan is never written over an existing file
        target = plan_json_path(options, layer, several)
        if target is not None:
            require_new_file(target, SAVE_PLAN_JSON)
    started = datetime.now(UTC)
    # --check after a dry run would look at a cluster nothing was applied to: not run (said by the dry run's line).
    checks = acceptance.checked_after(chosen) if options.check is not None and not options.dry_run else {}
    journal = console.journal
    journal.expect(
        *(["synth"] if options.synth else []),
        *(unit for layer in selected for unit in [layer, *([f"check {checks[layer]}"] if layer in checks else [])]),
    )
    if options.synth:
        with journal.unit("synth"):
            console.step("site", "synth", f"{ws.site.site}: {', '.join(ws.site_layers.names)}")
            ws.synth()
    for layer in selected:  # before Terraform runs: a missing credential is its variable's name, not a provider error
        tf.require_credentials(ws.stack_dir(layer), layer)
    applied = []
    for found in chosen:
        layer = found.name
        with journal.unit(layer) as unit:
            if deploy_layer(ws, tf, console, found, options, several, kubectl):
                applied.append(layer)
            else:
                unit.note = "dry run" if options.dry_run else "no changes"
        if layer in checks and options.check is not None:
            acceptance.after_deploy(ws, tf, console, checks[layer], options.check, kubectl, started)
    if options.dry_run:
        console.say(f"dry run: nothing applied ({', '.join(selected)} planned)")
    else:
        console.say(f"deployed: {', '.join(applied) or 'nothing (no changes)'}")
    return ExitCode.OK


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("layers", nargs="*", metavar="LAYER", help="layers to deploy, in apply order (default: all)")
    parser.add_argument("--all", action="store_true", help="every layer of the site (the default without LAYER)")
    parser.add_argument("--yes", action="store_true", help="apply without asking (the guard still runs)")
    allow_reboot_option(parser)
    parser.add_argument(
        "--save-plan-json",
        metavar="PATH",
        help="also write the plan's JSON to this new file (0600; it holds secrets; never overwritten)",
    )
    parser.add_argument("--lock-timeout", default="0s", help="wait this long for a state lock (e.g. 60s)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="plan, guard and show what would run (a scale-in: its steps), apply nothing",
    )
    secrets_option(parser)
    steps = parser.add_argument_group(
        "scale-in",
        "a platform layer whose plan takes control planes out of etcd runs as steps: new nodes first, then one "
        "control plane per apply, each with an etcd snapshot, talosctl health and the etcd members read back "
        "(ADR 0037)",
    )
    steps.add_argument(
        "--worker-batch",
        type=batch,
        default=None,
        metavar="N",
        help="workers that leave go N per apply, each batch health-checked (default: all in one apply)",
    )
    no_snapshot_option(steps, "before each scale-in step that changes etcd")
    steps.add_argument(
        "--talosconfig",
        help="talosctl client configuration (default: the platform layer's talosconfig output, 0600, removed after)",
    )
    steps.add_argument("--talosctl", default="talosctl", help="the talosctl binary (the scale-in steps, and --check)")
    steps.add_argument(
        "--talosctl-timeout",
        type=duration,
        default="10m",
        metavar="DURATION",
        help="deadline of each talosctl call (health waits up to it), e.g. 90s, 10m (default 10m)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="after each cluster's platform and gitops layers: `terravixens check CLUSTER`; its problems exit 6",
    )
    parser.add_argument(
        "--check-wait",
        default="5m",
        metavar="DURATION",
        help="with --check: keep checking (every 10s) while something fails, up to this long (default 5m; 0: once)",
    )
    parser.add_argument(
        "--check-timeout",
        default="60s",
        metavar="DURATION",
        help="with --check: deadline of each talosctl call, and how long `talosctl health` waits (default 60s)",
    )


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    options = DeployOptions(
        yes=args.yes,
        allow_reboot=frozenset(args.allow_reboot),
        lock_timeout=args.lock_timeout,
        save_plan_json=Path(args.save_plan_json) if args.save_plan_json else None,
        dry_run=args.dry_run,
        scale_in=ScaleInOptions(
            worker_batch=args.worker_batch,
            snapshot=SnapshotPolicy(skip_reason=args.no_snapshot),
            talosctl=args.talosctl,
            talosconfig=args.talosconfig,
            timeout=args.talosctl_timeout,
        ),
        check=acceptance.check_options(args, "--check-wait") if args.check else None,
    )
    return deploy(ws, None if args.all else args.layers, tf, options, console)


DEPLOY = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "applied, or no changes, or --dry-run (nothing applied)"),
        (
            ExitCode.REFUSED,
            (
                f"the plan guard refused a layer's plan or a scale-in step's, a step's plan is not the step, or "
                f"{SYNTH_RULE}; that step and later layers untouched"
            ),
        ),
        (
            ExitCode.BAD_INPUT,
            (
                "site file, unknown layer, secrets file, --save-plan-json names an existing file, or a scale-in "
                "without a talosconfig"
            ),
        ),
        ExitCode.DECLINED,
        (
            ExitCode.FAILED,
            (
                "terraform failed (the state before it is in the backup printed) or is missing; or in a scale-in, "
                "talosctl health or the etcd members before or after a step are not what it expects: the last line "
                "says which steps are done; run it again once fixed, it resumes; or --check could not read the "
                "cluster after its apply"
            ),
        ),
        (
            ExitCode.BACKUP_FAILED,
            (
                "a state backup, or the etcd snapshot before a scale-in step, could not be taken and verified: "
                "that step applied nothing"
            ),
        ),
        (ExitCode.CHECK_FAILED, "--check found problems after the apply (one line each, with what to do)"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens deploy --dry-run",
        "terravixens deploy hypervisors platform-prod --yes",
        "terravixens deploy platform-prod --check",
    ),
)


__all__ = [
    "DEPLOY",
    "PLAN_FILE",
    "DeployOptions",
    "LayerPlan",
    "arguments",
    "command",
    "deploy",
    "deploy_layer",
    "plan_json_path",
]
