"""`terravixens destroy LAYER`: a whole layer torn down, never by accident.

    typed confirmation (SITE/LAYER) → synth → init → state pulled, backed up (timestamped, 0600) and verified
    restorable → plan -destroy (saved) → guard → per-node summary → apply that plan → delete it.

Refused: a plan that destroys protected storage (PG009) or the machine secrets (PG004; Terraform itself stops on
their prevent_destroy), a platform layer whose cluster runs (PG002/PG003: that is `terravixens decommission`), and
L0 while platform layers (or the `standalone` layer) still have guests on it (PG008, judged on the deployed states,
not on the site file), and an L2 layer while the layer of a nested host it creates still has guests: children are
destroyed before their parents (ADR 0025).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from terravixens.arguments import Definition, secrets_option, site_option
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.operations import summary
from terravixens.operations.backup import backup_state, pull_state
from terravixens.operations.console import Console
from terravixens.operations.files import remove_quietly
from terravixens.operations.outcome import OperationError
from terravixens.operations.steps import apply_saved, guard_context, judge, make_plan, managed_count, typed_confirmation
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace

PREVENT_DESTROY = "Instance cannot be destroyed"


@dataclass(frozen=True)
class DestroyOptions:
    confirm: str | None = None
    synth: bool = True


def children_first(ws: Workspace, tf: Terraform, console: Console, layer: str) -> None:
    """Refuses to destroy an L2 layer while a nested host it creates still has guests in their own layer."""
    for child in [found.name for found in ws.site_layers if found.guests is not None and found.guests.after == layer]:
        workdir = ws.stack_dir(child)
        console.step(child, "init", "to see whether its guests are gone")
        tf.init(workdir, child)
        count = managed_count(pull_state(tf, workdir, child)[1])
        if count:
            raise OperationError(
                f"{layer}: layer {child} still has {count} resources on a host that {layer} creates: destroy "
                f"{child} first (children before parents); nothing was destroyed",
                ExitCode.REFUSED,
            )


def destroy(ws: Workspace, layer: str, tf: Terraform, options: DestroyOptions, console: Console | None = None) -> int:
    console = console or Console()
    found = ws.layer(layer)
    layer = found.name
    typed_confirmation(
        console,
        f"{ws.site.site}/{layer}",
        options.confirm,
        f"This destroys every resource of layer {layer} of site {ws.site.site}",
    )
    journal = console.journal
    journal.expect(*(["synth"] if options.synth else []), "checks", "backup", f"destroy {layer}")
    if options.synth:
        with journal.unit("synth"):
            console.step("site", "synth", ws.site.site)
            ws.synth()
    with journal.unit("checks"):
        children_first(ws, tf, console, layer)
    with journal.unit("backup") as unit:
        workdir = ws.stack_dir(layer)
        console.step(layer, "init")
        tf.init(workdir, layer)
        journal.saw(layer, "backup")
        backup = backup_state(tf, workdir, layer, ws.site.site, ws.root, "before-destroy")
        if backup is None:
            unit.note = "no state"
        else:
            unit.note = str(backup.path.relative_to(ws.root))
    if backup is None:
        console.step(layer, "backup", "no state: nothing to destroy")
        return ExitCode.OK
    console.step(
        layer,
        "backup",
        f"{backup.path.relative_to(ws.root)} (serial {backup.info.serial}, "
        f"{backup.info.instances} resources, verified restorable)",
    )
    with journal.unit(f"destroy {layer}") as unit:
        try:
            planned = make_plan(ws, tf, console, layer, "-destroy")
        except OperationError as error:
            if PREVENT_DESTROY in str(error):
                raise OperationError(
                    f"{layer}: Terraform refuses, a resource carries prevent_destroy (machine secrets or storage). A "
                    f"platform layer is torn down with `terravixens decommission CLUSTER`; storage is never destroyed "
                    f"by terravixens.\n{error}",
                    ExitCode.REFUSED,
                ) from None
            raise
        try:
            if not planned.changed:
                console.step(layer, "plan", "nothing to destroy")
                unit.note = "nothing to destroy"
                return ExitCode.OK
            judge(console, planned, guard_context(ws, tf, console, found, planned, frozenset(), teardown=True))
            console.step(layer, "summary", summary.counts(planned.plan))
            for line in summary.lines(planned.plan):
                console.say(line)
            apply_saved(ws, tf, console, planned, "destroy", backup=backup)
        finally:
            remove_quietly(planned.path)
    console.say(
        f"destroyed {layer}; restore the state with: terravixens restore {layer} {backup.path.relative_to(ws.root)}"
    )
    return ExitCode.OK


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("layer")
    parser.add_argument("--confirm", metavar="SITE/LAYER", help="the typed confirmation, for unattended runs")
    secrets_option(parser)


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    return destroy(ws, args.layer, tf, DestroyOptions(confirm=args.confirm), console)


DESTROY = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "destroyed, or nothing to destroy"),
        (
            ExitCode.REFUSED,
            (
                f"the guard or prevent_destroy refused (a platform layer is decommissioned), a nested "
                f"host's layer still has guests, or {SYNTH_RULE}"
            ),
        ),
        (ExitCode.BAD_INPUT, "site file, unknown layer"),
        (ExitCode.DECLINED, "the typed SITE/LAYER was not given"),
        ExitCode.FAILED,
        ExitCode.BACKUP_FAILED,
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens destroy gitops-prod",
        "terravixens destroy gitops-prod --confirm homelab/gitops-prod",
    ),
)
