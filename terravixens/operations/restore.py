"""`terravixens restore LAYER BACKUP`: put a state backup back (the current state is backed up first).

Restoring state does not bring destroyed infrastructure back: the next plan shows what the backup lists but
Proxmox no longer has, and `terravixens deploy` re-creates it.
"""

from __future__ import annotations

from pathlib import Path

from terravixens.operations.backup import read_backup, restore_state
from terravixens.operations.console import Console
from terravixens.operations.outcome import ExitCode
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
    [layer] = ws.layers([layer])
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
