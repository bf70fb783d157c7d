"""`terravixens check CLUSTER`: is the running cluster what the site promises? Talos health, the Talos services, every
site node a Ready Kubernetes Node with its role and labels (and no other Node), Cilium and its L2 announcements,
Flux's sources and kustomizations, error-level lines in the Talos service logs since the last apply, and the client
certificates of the talosconfig and kubeconfig (terravixens.operations.acceptance: one module per check).

Read-only, a monitor (MonitorExit, like drift): 0 every check passed, 2 a check found a problem (found wins), 1 a
check could not look (or a bad site, option, unknown cluster). One line per check — `ok`, each `problem` with what
to do, or `not checked` with why — then one summary line; `--json` prints the same as one JSON document
(`terravixens/check/v1`, terravixens.output) and nothing else on stdout. The talosconfig and kubeconfig are the
platform layer's outputs (synth and init first) unless both are given.
See docs/adr/0039-acceptance-check-and-talos-drift.md.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from terravixens import runner
from terravixens.operations.acceptance import VERDICT, CheckOptions, run
from terravixens.operations.console import Console
from terravixens.operations.kube import Kubectl
from terravixens.operations.observe import Since, shown_time
from terravixens.operations.outcome import ExitCode, OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.output import dumps

ZERO = re.compile(r"^0+[smh]?$")


@dataclass(frozen=True)
class CheckCommand:
    """`check`'s own options around the checks': `json` output, and whether to synthesize first (to read the
    platform layer's outputs)."""

    json: bool = False
    synth: bool = True


def parse_since(text: str, now: datetime | None = None) -> Since:
    """`--since`: a duration back from now (`30m`, `2h`) or a UTC time (`2026-01-10T10:02:00Z`)."""
    now = now or datetime.now(UTC)
    try:
        return Since(now - timedelta(seconds=runner.parse_duration(text)), f"--since {text.strip()}")
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise OperationError(
            f"--since {text!r}: give a duration back from now (30m, 2h) or a time like 2026-01-10T10:02:00Z",
            ExitCode.BAD_INPUT,
        ) from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return Since(when, f"--since {shown_time(when)}")


def parse_wait(text: str, option: str) -> int:
    """A duration that may be 0 (`--wait 0`: one pass)."""
    if ZERO.match(text.strip()):
        return 0
    try:
        return runner.parse_duration(text)
    except ValueError as error:
        raise OperationError(f"{option}: {error}", ExitCode.BAD_INPUT) from None


def check(
    ws: Workspace,
    cluster_name: str,
    tf: Terraform,
    options: CheckOptions,
    console: Console | None = None,
    command: CheckCommand = CheckCommand(),
    kubectl: Kubectl | None = None,
) -> int:
    console = console or Console()
    if cluster_name not in ws.site.clusters:
        raise OperationError(
            f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}", ExitCode.BAD_INPUT
        )
    # --json: stdout holds the document only; progress still tells the journal where the check is.
    progress = Console(out=io.StringIO(), journal=console.journal) if command.json else console
    outputs = options.talosconfig is None or options.kubeconfig is None
    unit = f"check {cluster_name}"
    journal = console.journal
    journal.expect(*(["synth"] if command.synth and outputs else []), unit)
    if command.synth and outputs:
        with journal.unit("synth"):
            progress.step("site", "synth", f"{ws.site.site}: to read the platform layer's outputs")
            ws.synth()

    def seen(text: str) -> None:
        if text.startswith("check "):  # --wait: a pass that found something, and when the next one runs
            progress.step(unit, "again", text)
        else:
            journal.saw(unit, text)

    with journal.unit(unit) as done:
        report = run(ws, tf, cluster_name, options, kubectl, progress=seen)
        done.note = VERDICT[report.exit_code]
    if command.json:
        console.say(dumps("check", report.document()))
    else:
        for line in report.lines():
            console.say(line)
        console.say(report.summary())
    return report.exit_code


__all__ = ["CheckCommand", "CheckOptions", "check", "parse_since", "parse_wait"]
