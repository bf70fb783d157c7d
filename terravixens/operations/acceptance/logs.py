"""`logs`: no error-level line in the Talos service logs that carry a level (etcd, the kubelet, machined's
controller-runtime) since the last apply, in the last N lines per node and service (bounded: `talosctl logs
--tail N`; one example shown per node and service, the last). Nodes that do not answer `talosctl services` are not
read (the services check reports them)."""

from __future__ import annotations

from terravixens.operations.acceptance.base import CheckProblem, CheckResult, Context, not_checked, plural, verdict
from terravixens.operations.observe import EXAMPLE_LIMIT, LEVELLED_LOGS, Observed, Unread, shown_time

NAME = "logs"


def check(context: Context, observed: Observed) -> CheckResult:
    reading = observed.logs
    if isinstance(reading, Unread):
        return not_checked(NAME, reading)
    nodes = {node.name: node for node in observed.nodes}
    since = f"since {shown_time(reading.since)}" if reading.since else "in the lines read"
    problems: list[CheckProblem] = []
    unread: list[str] = []
    for (name, service), found in sorted(reading.errors.items()):
        node = nodes[name]
        if isinstance(found, Unread):
            unread.append(f"{node.hostname} {service} ({found.reason})")
            continue
        if found:
            example = found[-1].text
            example = example if len(example) <= EXAMPLE_LIMIT else example[: EXAMPLE_LIMIT - 1] + "…"
            problems.append(
                CheckProblem(
                    f"{node.hostname} {service}: {plural(len(found), 'error line')} {since}, the last: {example}",
                    f"`talosctl -n {node.address} logs {service}`",
                )
            )
    read = ", ".join(sorted({service for _, service in reading.errors}, key=LEVELLED_LOGS.index)) or "no log"
    if reading.since:
        ok = f"no error line in {read} {since} ({observed.since.source}); the last {reading.tail} lines of each read"
    else:
        ok = f"no error line in the last {reading.tail} lines of {read} ({observed.since.source})"
    if reading.skipped:  # the services check reports them: not read here, not hidden either
        ok += f"; not read: {', '.join(reading.skipped)} (no answer to talosctl services)"
    return verdict(NAME, problems, ok, unread)
