"""`talos`: `talosctl health` passes, run inside the cluster through a control plane with the site's nodes given
(etcd healthy and consistent, apid, kubelets, boot sequence done, every Kubernetes Node reporting and Ready, the
control-plane static pods and components, CoreDNS)."""

from __future__ import annotations

from terravixens.operations.acceptance.base import CheckProblem, CheckResult, Context, Status, not_checked
from terravixens.operations.observe import Observed, Unread
from terravixens.roles import Role

NAME = "talos"


def check(context: Context, observed: Observed) -> CheckResult:
    health = observed.health
    if isinstance(health, Unread):
        return not_checked(NAME, health)
    through = f"{health.through.hostname} ({health.through.address})"
    if health.ok:
        control_planes = sum(1 for n in observed.nodes if n.role is Role.CONTROLPLANE)
        return CheckResult(
            NAME,
            Status.OK,
            f"talosctl health through {through}: every check passed ({control_planes} control planes, "
            f"{len(observed.nodes) - control_planes} workers)",
        )
    return CheckResult(
        NAME,
        Status.PROBLEM,
        "",
        (
            CheckProblem(
                f"talosctl health through {through} failed: {health.detail}",
                f"watch it with `talosctl -n {health.through.address} health`; on the node it names, "
                f"`talosctl -n NODE services` and `talosctl -n NODE dmesg`",
            ),
        ),
    )
