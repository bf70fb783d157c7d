"""`terravixens check CLUSTER`: is the running cluster what the site promises? Talos health, the Talos services, every
site node a Ready Kubernetes Node with its role and labels (and no other Node), Cilium and its L2 announcements,
Flux's sources and kustomizations, error-level lines in the Talos service logs since the last apply, the client
certificates of the talosconfig and kubeconfig, and the age of the newest offsite etcd backup when the site has
etcd_backup (read with --secrets; terravixens.operations.acceptance: one module per check).

Read-only, a monitor (MonitorExit, like drift): 0 every check passed, 2 a check found a problem (found wins), 1 a
check could not look (or a bad site, option, unknown cluster). One line per check — `ok`, each `problem` with what
to do, or `not checked` with why — then one summary line; `--json` prints the same as one JSON document
(`terravixens/check/v1`, terravixens.output) and nothing else on stdout. The talosconfig and kubeconfig are the
platform layer's outputs (synth and init first) unless both are given.
See docs/adr/0039-acceptance-check-and-talos-drift.md.
"""

from __future__ import annotations

import argparse
import io
from dataclasses import dataclass

from terravixens.arguments import Definition, backup_secrets_option, json_option, site_option
from terravixens.exitcodes import ExitCode, MonitorExit, codes
from terravixens.operations.acceptance import VERDICT, CheckOptions, check_options, run
from terravixens.operations.console import Console
from terravixens.operations.kube import Kubectl
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.output import dumps


@dataclass(frozen=True)
class CheckCommand:
    """`check`'s own options around the checks': `json` output, and whether to synthesize first (to read the
    platform layer's outputs)."""

    json: bool = False
    synth: bool = True


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


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("cluster")
    json_option(parser, " (terravixens/check/v1: the verdict and each check's problems)")
    backup_secrets_option(parser)  # the offsite backups' bucket keys (etcd_backup.<cluster>), for the backups check
    parser.add_argument(
        "--since",
        metavar="DURATION|TIME",
        help="the log check's window: a duration back from now (30m) or a UTC time (2026-01-10T10:02:00Z); "
        "default: the last apply (the newest state backup of the cluster's layers)",
    )
    parser.add_argument(
        "--wait",
        default="0",
        metavar="DURATION",
        help="keep checking (every 10s) while something fails, up to this long (default 0: once)",
    )
    parser.add_argument("--talosconfig", metavar="FILE", help="default: the platform layer's talosconfig output")
    parser.add_argument("--kubeconfig", metavar="FILE", help="default: the platform layer's kubeconfig output")
    parser.add_argument("--talosctl", default="talosctl", help="the talosctl binary")
    parser.add_argument("--kubectl", help="the kubectl binary (default: $KUBECTL or kubectl)")
    parser.add_argument(
        "--timeout",
        dest="check_timeout",
        default="60s",
        metavar="DURATION",
        help="deadline of each talosctl call, and how long `talosctl health` waits (default 60s); kubectl's: "
        "$TERRAVIXENS_KUBECTL_TIMEOUT",
    )
    parser.add_argument("--tail", type=int, default=300, metavar="N", help="lines read per log and node (default 300)")


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    kubectl = Kubectl(args.kubectl) if args.kubectl else None
    if args.json:  # check() prints its document, and only that, on the console it is given: stdout
        console = Console(journal=console.journal)
    options = check_options(args, "--wait")
    return check(ws, args.cluster, tf, options, console, CheckCommand(json=args.json), kubectl)


CHECK = Definition(
    arguments,
    command,
    codes(
        (MonitorExit.IN_SYNC, "every check passed"),
        (
            MonitorExit.ERROR,
            (
                "a check could not look (no talosconfig or kubeconfig, talosctl or kubectl missing, failing or "
                "unanswered) and none found a problem; or a bad site, option or cluster name"
            ),
        ),
        (MonitorExit.FOUND, "a check found a problem: one line each, with what to do (found wins)"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens check prod",
        "terravixens check prod --wait 5m --json",
    ),
)


__all__ = ["CHECK", "CheckCommand", "CheckOptions", "arguments", "check", "command"]
