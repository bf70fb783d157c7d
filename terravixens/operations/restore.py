"""`terravixens restore LAYER BACKUP`: put a state backup back (the current state is backed up first).

Restoring state does not bring destroyed infrastructure back: the next plan shows what the backup lists but
Proxmox no longer has, and `terravixens deploy` re-creates it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from terravixens.arguments import Definition, site_option
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.operations.backup import read_backup, restore_state
from terravixens.operations.console import Console
from terravixens.operations.steps import typed_confirmation
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace


def restore(
    ws: Workspace,
    layer: str,
    backup: Path,
    tf: Terraform,
    confirm: str | None = None,
    any_lineage: bool = False,
    synth: bool = True,
    console: Console | None = None,
) -> int:
    console = console or Console()
    layer = ws.layer(layer).name
    read_backup(Path(backup))  # a file that is not a state is bad input before anything runs
    typed_confirmation(
        console,
        f"{ws.site.site}/{layer}",
        confirm,
        f"This replaces the state of layer {layer} of site {ws.site.site} with {backup}",
    )
    journal = console.journal
    journal.expect(*(["synth"] if synth else []), f"restore {layer}")
    if synth:
        with journal.unit("synth"):
            console.step("site", "synth", ws.site.site)
            ws.synth()
    with journal.unit(f"restore {layer}"):
        workdir = ws.stack_dir(layer)
        tf.init(workdir, layer)
        previous, restored = restore_state(tf, workdir, layer, ws.site.site, ws.root, Path(backup), any_lineage)
        if previous is not None:
            console.step(layer, "backup", f"the replaced state is in {previous.path.relative_to(ws.root)}")
        console.step(layer, "restore", f"state of serial {restored.serial} ({restored.instances} resources) pushed")
    return ExitCode.OK


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("layer")
    parser.add_argument("backup", help="a file under state-backups/ (or any `terraform state pull` output)")
    parser.add_argument("--confirm", metavar="SITE/LAYER")
    parser.add_argument("--any-lineage", action="store_true", help="accept a backup of another state lineage")


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    return restore(
        ws, args.layer, Path(args.backup), tf, confirm=args.confirm, any_lineage=args.any_lineage, console=console
    )


RESTORE = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "the backup is the layer's state; the replaced one is backed up"),
        (ExitCode.REFUSED, SYNTH_RULE),
        (ExitCode.BAD_INPUT, "not a state, or another lineage without --any-lineage"),
        (ExitCode.DECLINED, "the typed SITE/LAYER was not given"),
        (ExitCode.FAILED, "terraform init or state push failed"),
        ExitCode.BACKUP_FAILED,
        ExitCode.INTERRUPTED,
    ),
    examples=("terravixens restore platform-prod state-backups/homelab/platform-prod/20260110T100200Z.tfstate",),
)
