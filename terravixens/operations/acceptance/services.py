"""`services`: every node answers `talosctl services`, and each Talos service runs: etcd on every control plane,
the kubelet on every node, nothing Failed or failing its health check."""

from __future__ import annotations

from terravixens.operations.acceptance.base import (
    CheckProblem,
    CheckResult,
    Context,
    not_checked,
    plural,
    verdict,
    where,
)
from terravixens.operations.observe import Observed, Unread
from terravixens.roles import Role

NAME = "services"
# One-shot services end Finished; the others run.
SETTLED = ("Running", "Finished")


def check(context: Context, observed: Observed) -> CheckResult:
    answered = {name: rows for name, rows in observed.services.items() if not isinstance(rows, Unread)}
    if not answered:
        first = next(iter(observed.services.values()), Unread("talosctl services", "no node"))
        return not_checked(NAME, first if isinstance(first, Unread) else Unread("talosctl services", "no node"))
    problems = []
    for node in observed.nodes:
        rows = observed.services.get(node.name)
        if isinstance(rows, Unread) or rows is None:
            why = rows.reason if isinstance(rows, Unread) else "no answer"
            problems.append(
                CheckProblem(
                    f"{where(node)} does not answer talosctl ({why})",
                    f"is it up? `talosctl -n {node.address} version`, its console in Proxmox",
                )
            )
            continue
        present = {row.id for row in rows}
        wanted = ["kubelet"] + (["etcd"] if node.role is Role.CONTROLPLANE else [])
        for service in wanted:
            if service not in present:
                problems.append(
                    CheckProblem(
                        f"{where(node)} runs no {service} service",
                        f"`talosctl -n {node.address} get machinetype` (is it a {node.role}?), "
                        f"`talosctl -n {node.address} dmesg`",
                    )
                )
        for row in rows:
            # An extension service without a health check reports HEALTH Fail while it runs (talos#9839).
            failing = row.health == "Fail" and not (row.id.startswith("ext-") and row.state == "Running")
            if row.state not in SETTLED or failing:
                problems.append(
                    CheckProblem(
                        f"{where(node)}: service {row.id} is {row.state}, health {row.health}"
                        f"{' (' + row.last_event + ')' if row.last_event else ''}",
                        f"`talosctl -n {node.address} service {row.id}`, `talosctl -n {node.address} logs {row.id}`",
                    )
                )
    control_planes = sum(1 for n in observed.nodes if n.role is Role.CONTROLPLANE)
    return verdict(
        NAME,
        problems,
        f"{plural(len(answered), 'node')} answered: every service Running or Finished (etcd on "
        f"{plural(control_planes, 'control plane')}, the kubelet on every node)",
    )
