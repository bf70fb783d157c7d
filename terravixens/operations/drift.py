"""`terravixens drift [LAYER…]`: does what runs still match the site? Per layer, `terraform plan
-detailed-exitcode` (read-only: `-lock=false`, the saved plan deleted at once), then a summary per layer and per
node of what the plan would change, the addresses that were changed outside Terraform (refresh saw it) listed
first. Exit codes are a monitor's (MonitorExit): 0 in sync, 2 drift, 1 error.
"""

from __future__ import annotations

from collections.abc import Sequence

from terravixens.operations import summary
from terravixens.operations.console import Console
from terravixens.operations.files import remove_quietly
from terravixens.operations.outcome import MonitorExit
from terravixens.operations.steps import make_plan
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace


def outside_changes(messages: list[dict]) -> list[str]:
    """'address (what)' for each `resource_drift` message of the plan log: changed outside Terraform."""
    found = []
    for message in messages:
        if message.get("type") == "resource_drift":
            change = message.get("change") or {}
            resource = change.get("resource") or {}
            found.append(f"{resource.get('addr', '?')} ({change.get('action', 'changed')})")
    return sorted(set(found))


def drift(
    ws: Workspace, layers: Sequence[str] | None, tf: Terraform, console: Console | None = None, synth: bool = True
) -> int:
    console = console or Console()
    selected = ws.layers(layers)
    journal = console.journal
    journal.expect(*(["synth"] if synth else []), *selected)
    if synth:
        with journal.unit("synth"):
            console.step("site", "synth", ws.site.site)
            ws.synth()
    drifted = []
    for layer in selected:
        with journal.unit(layer) as unit:
            if _drift_layer(ws, tf, console, layer):
                drifted.append(layer)
                unit.note = "drift"
            else:
                unit.note = "in sync"
    console.say(f"drift in: {', '.join(drifted)}" if drifted else "no drift")
    return MonitorExit.FOUND if drifted else MonitorExit.IN_SYNC


def _drift_layer(ws: Workspace, tf: Terraform, console: Console, layer: str) -> bool:
    """Plans `layer` read-only and prints what would change; True when something would."""
    workdir = ws.stack_dir(layer)
    tf.init(workdir, layer)
    planned = make_plan(ws, tf, console, layer, "-lock=false")
    remove_quietly(planned.path)
    # Refresh reports every attribute the provider reads back differently (computed ones too); what matters is
    # what the plan would change, so only those addresses are listed as changed outside Terraform.
    changing = {c.address for c in planned.plan.changes if summary.verb(c) not in ("no-op", "read")}
    outside = [
        line
        for line in outside_changes(planned.log.messages if planned.log else [])
        if line.split(" ", 1)[0] in changing
    ]
    if not planned.changed:
        console.step(layer, "drift", "in sync")
        return False
    console.step(
        layer,
        "drift",
        summary.counts(planned.plan) + (f"; changed outside Terraform: {len(outside)}" if outside else ""),
    )
    for line in outside:
        console.say(f"  outside Terraform: {line}")
    for line in summary.lines(planned.plan):
        console.say(line)
    return True


__all__ = ["drift", "outside_changes"]
