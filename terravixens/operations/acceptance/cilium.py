"""`cilium`: the Cilium agents' DaemonSet (kube-system/cilium) has rolled out its latest spec and every agent it
schedules is ready: `observedGeneration == generation`, `numberReady == updatedNumberScheduled ==
desiredNumberScheduled`, nothing unavailable (Kubernetes' DaemonSetStatus; research 07)."""

from __future__ import annotations

from terravixens.operations.acceptance.base import CheckProblem, CheckResult, Context, Status, not_checked
from terravixens.operations.observe import Absent, Observed, Unread

NAME = "cilium"
PODS = "`kubectl -n kube-system get pods -l k8s-app=cilium -o wide`, `kubectl -n kube-system logs ds/cilium`"


def check(context: Context, observed: Observed) -> CheckResult:
    found = observed.cilium
    if isinstance(found, Unread):
        return not_checked(NAME, found)
    if isinstance(found, Absent) or not found:
        return CheckResult(
            NAME,
            Status.PROBLEM,
            "",
            (
                CheckProblem(
                    "no DaemonSet kube-system/cilium",
                    f"Cilium is the gitops layer's: terravixens deploy {context.gitops}",
                ),
            ),
        )
    daemonset = found[0]
    status = daemonset.get("status") or {}
    generation = (daemonset.get("metadata") or {}).get("generation")
    desired = int(status.get("desiredNumberScheduled") or 0)
    ready = int(status.get("numberReady") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    unavailable = int(status.get("numberUnavailable") or 0)
    problems = []
    if status.get("observedGeneration") != generation:
        problems.append(
            CheckProblem(
                f"the cilium DaemonSet is at generation {generation}, its controller has seen "
                f"{status.get('observedGeneration', 'none')}",
                "wait a moment and check again; if it stays, `kubectl -n kube-system describe ds cilium`",
            )
        )
    if desired == 0:
        problems.append(
            CheckProblem("the cilium DaemonSet schedules no agent", "`kubectl -n kube-system describe ds cilium`")
        )
    if ready < desired or unavailable:
        problems.append(CheckProblem(f"{ready} of {desired} Cilium agents ready ({unavailable} unavailable)", PODS))
    if updated < desired:
        problems.append(CheckProblem(f"{updated} of {desired} Cilium agents run the DaemonSet's current spec", PODS))
    if problems:
        return CheckResult(NAME, Status.PROBLEM, "", tuple(problems))
    return CheckResult(
        NAME,
        Status.OK,
        f"DaemonSet kube-system/cilium: {ready} of {desired} agents ready, generation {generation} rolled out",
    )
