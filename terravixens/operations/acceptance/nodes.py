"""`nodes`: every node of the site is a Kubernetes Node (its hostname), Ready, with its role (Talos labels control
planes `node-role.kubernetes.io/control-plane`) and the site's labels (Talos writes machine.nodeLabels); no Node
the site does not know."""

from __future__ import annotations

from terravixens.operations.acceptance.base import CheckProblem, CheckResult, Context, not_checked, plural, verdict
from terravixens.operations.observe import Observed, Unread
from terravixens.roles import Role

NAME = "nodes"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


def check(context: Context, observed: Observed) -> CheckResult:
    found = observed.kube_nodes
    if isinstance(found, Unread):
        return not_checked(NAME, found)
    by_name = {node.name: node for node in found}
    problems = []
    redeploy = f"Talos writes the site's labels and roles onto the Node: terravixens deploy {context.platform}"
    for node in observed.nodes:
        kube = by_name.get(node.hostname)
        if kube is None:
            problems.append(
                CheckProblem(
                    f"no Kubernetes Node {node.hostname} (site node {node.name}, {node.address})",
                    f"its kubelet has not registered: `talosctl -n {node.address} logs kubelet`",
                )
            )
            continue
        if kube.ready != "True":
            problems.append(
                CheckProblem(
                    f"Node {node.hostname} is not Ready (Ready {kube.ready}: {kube.reason})",
                    f"`kubectl describe node {node.hostname}`, `talosctl -n {node.address} service kubelet`",
                )
            )
        if kube.control_plane != (node.role is Role.CONTROLPLANE):
            has = "carries" if kube.control_plane else "lacks"
            problems.append(
                CheckProblem(
                    f"Node {node.hostname} {has} the {CONTROL_PLANE_LABEL} label but is a {node.role} in the site",
                    f"`talosctl -n {node.address} get machinetype` says what the machine is; the site and the "
                    f"machine must agree",
                )
            )
        for key, value in sorted(node.labels.items()):
            if key not in kube.labels:
                problems.append(CheckProblem(f"Node {node.hostname} has no label {key}={value}", redeploy))
            elif kube.labels[key] != value:
                problems.append(
                    CheckProblem(
                        f"Node {node.hostname} has label {key}={kube.labels[key]}, the site says {key}={value}",
                        redeploy,
                    )
                )
    known = {node.hostname for node in observed.nodes}
    for name in sorted(set(by_name) - known):
        problems.append(
            CheckProblem(
                f"Node {name} is not a node of the site",
                f"a node removed from the site leaves its Node behind if its reset did not run: once its machine "
                f"is gone, `kubectl delete node {name}`",
            )
        )
    return verdict(
        NAME, problems, f"{plural(len(observed.nodes), 'Node')} Ready with the site's roles and labels, no other Node"
    )
