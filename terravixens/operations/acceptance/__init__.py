"""The acceptance check of a running cluster, one module per check, in the order they are printed (ADR 0039):

    talos          talosctl health passes (inside the cluster, through a control plane, the site's nodes given)
    services       every node answers; its Talos services run (etcd on control planes, the kubelet everywhere)
    nodes          every site node a Kubernetes Node, Ready, with its role and labels; no Node the site does not know
    cilium         the Cilium agents' DaemonSet rolled out, every agent ready
    l2             the site's LoadBalancer pools and the L2 announcement policy without error conditions
    flux           Flux's GitRepositories and Kustomizations Ready for their current generation
    logs           no error-level line in etcd, kubelet, controller-runtime logs since the last apply (bounded)
    certificates   the talosconfig's and kubeconfig's client certificates valid for more than 30 days
    backups        newest offsite etcd backup younger than two runs of its schedule (with etcd_backup only; ADR 0059)

A step module (like terravixens.operations.steps): `terravixens check` and `deploy --check` run it; it imports no
command. What is read is read once per pass (terravixens.operations.observe); with a wait, a failing pass is
repeated until every check passes or the wait is over.

The verdict, for a monitor: 2 (FOUND) when a check found a problem — found wins, because a definite problem is
never hidden behind a reading that failed elsewhere; else 1 (ERROR) when a check could not look; else 0.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from terravixens import runner
from terravixens.exitcodes import ExitCode, MonitorExit
from terravixens.layers import Layer
from terravixens.operations.acceptance import (
    backups,
    certificates,
    cilium,
    flux,
    l2,
    logs,
    nodes,
    services,
    talos_health,
)
from terravixens.operations.acceptance.base import AcceptanceCheck, CheckProblem, CheckResult, Context, Status
from terravixens.operations.console import Console
from terravixens.operations.kube import Kubectl
from terravixens.operations.observe import DEFAULT_TAIL, Since, cluster_access, observe, shown_time, since_default
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl

ALL_CHECKS: tuple[tuple[str, AcceptanceCheck], ...] = (
    (talos_health.NAME, talos_health.check),
    (services.NAME, services.check),
    (nodes.NAME, nodes.check),
    (cilium.NAME, cilium.check),
    (l2.NAME, l2.check),
    (flux.NAME, flux.check),
    (logs.NAME, logs.check),
    (certificates.NAME, certificates.check),
    (backups.NAME, backups.check),
)
DEFAULT_TIMEOUT = 60
VERDICT = {MonitorExit.IN_SYNC: "ok", MonitorExit.FOUND: "problems", MonitorExit.ERROR: "not checked"}
WAIT_INTERVAL = 10.0


@dataclass(frozen=True)
class CheckOptions:
    """`talosconfig`/`kubeconfig`: files to use instead of the platform layer's outputs; `since`: the start of the
    log window (None: the last apply, see terravixens.operations.observe); `tail`: lines read per log and node;
    `wait`: seconds to keep checking again (every `interval`) while something fails; `talosctl`: its binary;
    `timeout`: each talosctl call's deadline, and how long `talosctl health` waits."""

    talosconfig: str | None = None
    kubeconfig: str | None = None
    since: Since | None = None
    tail: int = DEFAULT_TAIL
    wait: float = 0
    interval: float = WAIT_INTERVAL
    talosctl: str = "talosctl"
    timeout: int = DEFAULT_TIMEOUT
    secrets: str | None = None  # the secrets file: the offsite backups' bucket keys (etcd_backup.<cluster>)


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
    """A duration that may be 0 (`--wait 0`: one pass); a bad one is BAD_INPUT naming `option`."""
    try:
        return runner.parse_duration(text, zero=True, maximum=runner.MAX_DEADLINE)
    except ValueError as error:
        raise OperationError(f"{option}: {error}", ExitCode.BAD_INPUT) from None


def check_options(args: argparse.Namespace, wait_option: str) -> CheckOptions:
    """The options of `check`'s or `deploy --check`'s arguments. Durations are parsed here, not by argparse: a bad
    one is BAD_INPUT (ERROR for the monitor), never argparse's 2 (which `check` reserves for a problem found)."""
    timeout_option = "--check-timeout" if wait_option == "--check-wait" else "--timeout"  # deploy's, check's
    return CheckOptions(
        talosconfig=getattr(args, "talosconfig", None),
        kubeconfig=getattr(args, "kubeconfig", None),
        since=parse_since(args.since) if getattr(args, "since", None) else None,
        tail=getattr(args, "tail", DEFAULT_TAIL),
        wait=parse_wait(getattr(args, wait_option.lstrip("-").replace("-", "_")), wait_option),
        talosctl=args.talosctl,
        timeout=parse_wait(args.check_timeout, timeout_option) or 1,
        secrets=getattr(args, "backup_secrets", None) or getattr(args, "secrets", None),
    )


@dataclass(frozen=True)
class Report:
    site: str
    cluster: str
    since: Since
    results: list[CheckResult]
    passes: int = 1
    checked_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def named(self, status: Status) -> list[str]:
        return [r.check for r in self.results if r.status is status]

    @property
    def exit_code(self) -> MonitorExit:
        if self.named(Status.PROBLEM):
            return MonitorExit.FOUND
        if self.named(Status.NOT_CHECKED):
            return MonitorExit.ERROR
        return MonitorExit.IN_SYNC

    def problems(self) -> list[CheckProblem]:
        return [problem for result in self.results for problem in result.problems]

    def lines(self) -> list[str]:
        return [line for result in self.results for line in result.lines()]

    def summary(self) -> str:
        """One line: what passed, what found problems, what could not look."""
        problems, unread = self.named(Status.PROBLEM), self.named(Status.NOT_CHECKED)
        if not problems and not unread:
            return f"check {self.cluster}: every check passed ({', '.join(self.named(Status.OK))})"
        parts = []
        if problems:
            count = len(self.problems())
            parts.append(f"{count} problem{'s' if count != 1 else ''} ({', '.join(problems)})")
        if unread:
            parts.append(f"not checked: {', '.join(unread)}")
        parts.append(f"ok: {', '.join(self.named(Status.OK)) or 'none'}")
        return f"check {self.cluster}: " + "; ".join(parts)

    def document(self) -> dict[str, Any]:
        """`terravixens check --json`: the same verdict as one JSON document."""
        verdict = {MonitorExit.IN_SYNC: "ok", MonitorExit.FOUND: "problems", MonitorExit.ERROR: "not checked"}
        return {
            "site": self.site,
            "cluster": self.cluster,
            "checked_at": shown_time(self.checked_at),
            "logs_since": shown_time(self.since.when) if self.since.when else None,
            "logs_since_source": self.since.source,
            "result": verdict[self.exit_code],
            "exit_code": int(self.exit_code),
            "checks": [
                {
                    "check": r.check,
                    "status": str(r.status),
                    "summary": r.summary,
                    "problems": [{"what": p.what, "fix": p.fix} for p in r.problems],
                }
                for r in self.results
            ],
            "summary": self.summary(),
        }


def judge(context: Context, observed: Any) -> list[CheckResult]:
    """Every check's verdict; `backups` only for a cluster whose site has etcd_backup (none to judge otherwise, and an
    `ok` would claim backups that do not exist)."""
    return [check(context, observed) for name, check in ALL_CHECKS if name != backups.NAME or backups.applies(context)]


def run(
    ws: Workspace,
    tf: Terraform,
    cluster_name: str,
    options: CheckOptions,
    kubectl: Kubectl | None = None,
    progress: Callable[[str], None] = lambda _: None,
    fallback_since: Since | None = None,
) -> Report:
    """Observes the cluster and judges it; with `options.wait`, observes again while something fails."""
    if cluster_name not in ws.site.clusters:
        raise OperationError(
            f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}", ExitCode.BAD_INPUT
        )
    since = options.since or since_default(ws, cluster_name)
    if since.when is None and fallback_since is not None:
        since = fallback_since
    talosctl = Talosctl(options.talosctl, timeout=options.timeout)
    kubectl = kubectl or Kubectl()
    deadline = time.monotonic() + options.wait
    passes = 0
    with cluster_access(ws, tf, cluster_name, options.talosconfig, options.kubeconfig, options=True) as access:
        while True:
            passes += 1
            observed = observe(
                ws.site, cluster_name, access, talosctl, kubectl, since, options.tail, progress, options.secrets
            )
            context = Context(
                cluster_name,
                ws.site.clusters[cluster_name],
                datetime.now(UTC),
                platform=ws.platform_layer(cluster_name).name,
                gitops=ws.gitops_layer(cluster_name).name,
            )
            report = Report(ws.site.site, cluster_name, since, judge(context, observed), passes)
            left = deadline - time.monotonic()
            if report.exit_code == MonitorExit.IN_SYNC or left <= 0:
                return report
            progress(f"{report.summary()}; again in {min(options.interval, left):.0f}s")
            time.sleep(min(options.interval, left))


# --------------------------------------------------------------------------------------------------- deploy --check
def checked_after(selected: Sequence[Layer]) -> dict[str, str]:
    """layer -> cluster, for the layer after which `deploy --check` checks a cluster: the last of the cluster's
    layers being deployed (Nodes are Ready only once Cilium, the gitops layer's, runs)."""
    last: dict[str, str] = {}
    for layer in selected:
        if layer.cluster is not None:
            last[layer.cluster] = layer.name
    return {layer: cluster for cluster, layer in last.items()}


def after_deploy(
    ws: Workspace,
    tf: Terraform,
    console: Console,
    cluster_name: str,
    options: CheckOptions,
    kubectl: Kubectl | None,
    started: datetime,
) -> None:
    """`deploy --check`: the check once the cluster's layers are applied (the journal unit `check CLUSTER`), its lines
    printed. A problem stops the deploy with CHECK_FAILED (what was applied stays applied), a check that could not
    look with FAILED; later layers are not deployed either way."""
    name = f"check {cluster_name}"
    console.step(name, "check", f"waiting up to {options.wait:.0f}s for every check to pass" if options.wait else "")

    def progress(text: str) -> None:
        if text.startswith("check "):  # a pass that found something, and the next one's time
            console.step(name, "check", text)
        else:
            console.journal.saw(name, text)

    with console.journal.unit(name) as unit:  # done once it has judged: its verdict is the unit's note
        report = run(
            ws,
            tf,
            cluster_name,
            options,
            kubectl,
            progress=progress,
            fallback_since=Since(started, "the start of this deploy: no state backup of the cluster here yet"),
        )
        unit.note = VERDICT[report.exit_code]
    for line in report.lines():
        console.say(f"  {line}")
    if report.exit_code == MonitorExit.FOUND:
        raise OperationError(
            f"{report.summary()}: what was applied stays applied; fix what the lines above say, then "
            f"`terravixens check {cluster_name}`",
            ExitCode.CHECK_FAILED,
        )
    if report.exit_code == MonitorExit.ERROR:
        raise OperationError(
            f"{report.summary()}: what was applied stays applied; run `terravixens check {cluster_name}` once the "
            f"cluster can be read",
            ExitCode.FAILED,
        )
    console.step(name, "check", report.summary())


__all__ = [
    "ALL_CHECKS",
    "VERDICT",
    "CheckOptions",
    "CheckProblem",
    "CheckResult",
    "Context",
    "Report",
    "Status",
    "after_deploy",
    "check_options",
    "checked_after",
    "judge",
    "parse_since",
    "parse_wait",
    "run",
]
