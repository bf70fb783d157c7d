"""The Kubernetes objects the checks read, as their writers leave them: a Talos kubelet's Node, the DaemonSet
controller's status of Cilium's agents, Cilium's LB IPAM and L2 announcement conditions, source-controller's and
kustomize-controller's status (written from their sources: kubelet's setters, pkg/lbipam and pkg/l2announcer in
cilium/cilium v1.18, internal/controller in fluxcd/source-controller and fluxcd/kustomize-controller v1.7).

Each builder returns the object as the API returns it (metadata.generation, status): tests/fake_kubectl.py prints
them as they are, and `put` writes them into a real API server (tests/control_plane.py) as their writers do — the
object applied (server-side) until the server's own metadata.generation is the one asked for (each step a real spec
change), then its status through the status subresource. The real server judges every shape here against its
OpenAPI schema (the CRDs' and the built-in types'): a field a writer never sets, or a missing required one, fails.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

STAMP = "2026-01-10T10:00:00Z"
REVISION = "main@sha1:132f4e719209eb10b9485302f8593fc0e680f4fc"
GIT_URL = "ssh://git@git.lab.internal/platform/fleet.git"
CILIUM_IMAGE = "quay.io/cilium/cilium:v1.18.4@sha256:49d87af187eeeb9e9e3ec2bc6bd372261a0b5cb2d845659463ba7cc10fe9e45f"
# resource (plural.group, "nodes"/"daemonsets.apps" for the built-in ones) -> kind
RESOURCES = {
    "nodes": "Node",
    "daemonsets.apps": "DaemonSet",
    "ciliumloadbalancerippools.cilium.io": "CiliumLoadBalancerIPPool",
    "ciliuml2announcementpolicies.cilium.io": "CiliumL2AnnouncementPolicy",
    "gitrepositories.source.toolkit.fluxcd.io": "GitRepository",
    "kustomizations.kustomize.toolkit.fluxcd.io": "Kustomization",
}


def _uid(name: str) -> str:
    return f"{hashlib.sha256(name.encode()).hexdigest()[:8]}-0000-4000-8000-000000000000"


# ----------------------------------------------------------------------------------------------------------- Node
def node(
    name: str,
    address: str,
    *,
    control_plane: bool = False,
    ready: str = "True",
    labels: dict[str, str] | None = None,
    talos: str = "v1.11.5",
    kubelet: str = "v1.34.2",
) -> dict[str, Any]:
    """A Node as a Talos kubelet registers it: hostname/os/arch labels, Talos' control-plane role label and taint,
    the extension labels Talos adds (`extensions.talos.dev/<name>`, never the schematic), the four conditions, the
    addresses, capacity and node info the kubelet's status setters write."""
    reasons = {
        "True": ("KubeletReady", "kubelet is posting ready status"),
        "False": (
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady",
        ),
        "Unknown": ("NodeStatusUnknown", "Kubelet stopped posting node status."),
    }[ready]
    every = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "extensions.talos.dev/qemu-guest-agent": "10.0.2",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        **({"node-role.kubernetes.io/control-plane": ""} if control_plane else {}),
        **(labels or {}),
    }
    conditions = [
        {"type": kind, "status": "False", "reason": reason, "message": message}
        for kind, reason, message in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ] + [{"type": "Ready", "status": ready, "reason": reasons[0], "message": reasons[1]}]
    for condition in conditions:
        condition.update(lastHeartbeatTime=STAMP, lastTransitionTime=STAMP)
    resources = {
        "cpu": "4",
        "ephemeral-storage": "61255492Ki",
        "hugepages-2Mi": "0",
        "memory": "8141544Ki",
        "pods": "110",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "talos.dev/owned-labels": "[]",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": STAMP,
            "labels": every,
            "name": name,
            "resourceVersion": "4211",
            "uid": _uid(name),
        },
        "spec": {
            "podCIDR": "10.244.0.0/24",
            "podCIDRs": ["10.244.0.0/24"],
            **(
                {"taints": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}]}
                if control_plane
                else {}
            ),
        },
        "status": {
            "addresses": [{"address": address, "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
            "allocatable": dict(resources),
            "capacity": dict(resources),
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": _uid(f"boot {name}"),
                "containerRuntimeVersion": "containerd://2.1.5",
                "kernelVersion": "6.12.57-talos",
                "kubeProxyVersion": "",
                "kubeletVersion": kubelet,
                "machineID": hashlib.sha256(f"machine {name}".encode()).hexdigest()[:32],
                "operatingSystem": "linux",
                "osImage": f"Talos ({talos})",
                "systemUUID": _uid(f"system {name}"),
            },
        },
    }


# ------------------------------------------------------------------------------------------------------ DaemonSet
def daemonset(
    name: str = "cilium",
    namespace: str = "kube-system",
    *,
    desired: int,
    ready: int | None = None,
    generation: int = 3,
    observed: int | None = None,
    updated: int | None = None,
) -> dict[str, Any]:
    """Cilium's agents' DaemonSet (the chart's shape, trimmed to what the API requires) with its status as the
    DaemonSet controller writes it (`numberUnavailable` and `conditions` omitted when zero or empty: omitempty)."""
    ready = desired if ready is None else ready
    status: dict[str, Any] = {
        "currentNumberScheduled": desired,
        "desiredNumberScheduled": desired,
        "numberAvailable": ready,
        "numberMisscheduled": 0,
        "numberReady": ready,
        "observedGeneration": generation if observed is None else observed,
        "updatedNumberScheduled": desired if updated is None else updated,
    }
    if desired - ready:
        status["numberUnavailable"] = desired - ready
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"generation": generation, "labels": {"k8s-app": name}, "name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {
                "metadata": {"labels": {"k8s-app": name}},
                "spec": {
                    "containers": [{"name": "cilium-agent", "image": CILIUM_IMAGE, "command": ["cilium-agent"]}],
                    "hostNetwork": True,
                    "serviceAccountName": name,
                },
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
        },
        "status": status,
    }


# ---------------------------------------------------------------------------------------------------------- Cilium
def ip_pool(
    name: str,
    cidrs: list[str],
    *,
    total: int,
    used: int = 0,
    conflict: str | None = None,
    disabled: bool = False,
    version: str = "v2alpha1",
) -> dict[str, Any]:
    """A CiliumLoadBalancerIPPool with the conditions Cilium's LB IPAM operator writes (pkg/lbipam): counts as
    `Unknown`/`noreason` conditions whose message is the number, a conflict as `cilium.io/PoolConflict` True."""
    conditions = [
        {"type": "cilium.io/IPsTotal", "status": "Unknown", "reason": "noreason", "message": str(total)},
        {"type": "cilium.io/IPsAvailable", "status": "Unknown", "reason": "noreason", "message": str(total - used)},
        {"type": "cilium.io/IPsUsed", "status": "Unknown", "reason": "noreason", "message": str(used)},
    ]
    if conflict:
        conditions.append(
            {"type": "cilium.io/PoolConflict", "status": "True", "reason": "cidr_overlap", "message": conflict}
        )
    for condition in conditions:
        condition.update(lastTransitionTime="2026-01-10T10:05:00Z", observedGeneration=1)
    return {
        "apiVersion": f"cilium.io/{version}",
        "kind": "CiliumLoadBalancerIPPool",
        "metadata": {"generation": 1, "name": name},
        "spec": {"blocks": [{"cidr": cidr} for cidr in cidrs], "disabled": disabled},
        "status": {"conditions": conditions},
    }


def l2_policy(name: str = "terravixens-l2", *, error: tuple[str, str] | None = None) -> dict[str, Any]:
    """A CiliumL2AnnouncementPolicy (v2alpha1 in Cilium 1.16–1.18): healthy ones carry no condition; the agent sets
    `io.cilium/bad-*` error conditions (status True, reason `error`) when a selector or regex does not parse."""
    status: dict[str, Any] = {}
    if error:
        status["conditions"] = [
            {
                "type": error[0],
                "status": "True",
                "reason": "error",
                "message": error[1],
                "lastTransitionTime": "2026-01-10T10:05:00Z",
                "observedGeneration": 1,
            }
        ]
    return {
        "apiVersion": "cilium.io/v2alpha1",
        "kind": "CiliumL2AnnouncementPolicy",
        "metadata": {"generation": 1, "name": name},
        "spec": {"interfaces": ["^eth0\\.120$"], "loadBalancerIPs": True},
        "status": status,
    }


# ------------------------------------------------------------------------------------------------------------ Flux
def _conditions(ready: str, reason: str, message: str, observed: int, extra: list[tuple[str, str]]) -> list[dict]:
    """Flux's conditions (fluxcd/pkg/runtime/conditions): Ready, and while a failed reconciliation is retried,
    Reconciling True with reason ProgressingWithRetry (kustomize-controller's finalizeStatus); `extra`: more True
    conditions with Ready's reason and message (source-controller's ArtifactInStorage)."""
    conditions = [
        {"type": kind, "status": "True", "reason": reason, "message": message} for kind, _ in extra if ready == "True"
    ]
    conditions.insert(0, {"type": "Ready", "status": ready, "reason": reason, "message": message})
    if ready != "True":
        conditions.append(
            {
                "type": "Reconciling",
                "status": "True",
                "reason": "ProgressingWithRetry",
                "message": "reconciliation in progress" if ready == "Unknown" else message,
            }
        )
    for condition in conditions:
        condition.update(lastTransitionTime="2026-01-10T10:06:00Z", observedGeneration=observed)
    return conditions


def git_repository(
    name: str = "flux-system",
    namespace: str = "flux-system",
    *,
    ready: str = "True",
    reason: str = "Succeeded",
    message: str | None = None,
    generation: int = 1,
    observed: int | None = None,
    suspend: bool = False,
) -> dict[str, Any]:
    """A GitRepository as the flux-sync chart renders it, its status as source-controller writes it: Ready and
    ArtifactInStorage True/Succeeded `stored artifact for revision '…'` and the artifact (digest, path and URL in the
    controller's storage); failures e.g. False/AuthenticationFailed."""
    observed = generation if observed is None else observed
    status: dict[str, Any] = {
        "conditions": _conditions(
            ready,
            reason,
            message or f"stored artifact for revision '{REVISION}'",
            observed,
            [("ArtifactInStorage", "")],
        ),
        "observedGeneration": observed,
    }
    if ready == "True":
        digest = hashlib.sha256(REVISION.encode()).hexdigest()
        path = f"gitrepository/{namespace}/{name}/{REVISION.rsplit(':', 1)[1]}.tar.gz"
        status["artifact"] = {
            "digest": f"sha256:{digest}",
            "lastUpdateTime": "2026-01-10T10:06:00Z",
            "path": path,
            "revision": REVISION,
            "size": 48213,
            "url": f"http://source-controller.flux-system.svc.cluster.local./{path}",
        }
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"generation": generation, "name": name, "namespace": namespace},
        "spec": {
            "interval": "10m",
            "url": GIT_URL,
            "ref": {"branch": "main"},
            "secretRef": {"name": name},
            **({"suspend": True} if suspend else {}),
        },
        "status": status,
    }


def kustomization(
    name: str = "flux-system",
    namespace: str = "flux-system",
    *,
    ready: str = "True",
    reason: str = "ReconciliationSucceeded",
    message: str | None = None,
    generation: int = 1,
    observed: int | None = None,
    suspend: bool = False,
) -> dict[str, Any]:
    """A Kustomization as the flux-sync chart renders it, its status as kustomize-controller writes it (Ready
    True/ReconciliationSucceeded `Applied revision: …`; failures e.g. False/BuildFailed, HealthCheckFailed)."""
    observed = generation if observed is None else observed
    status: dict[str, Any] = {
        "conditions": _conditions(ready, reason, message or f"Applied revision: {REVISION}", observed, []),
        "observedGeneration": observed,
        "lastAttemptedRevision": REVISION,
    }
    if ready == "True":
        status["lastAppliedRevision"] = REVISION
        status["inventory"] = {"entries": []}
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"generation": generation, "name": name, "namespace": namespace},
        "spec": {
            "interval": "10m",
            "path": "./clusters/prod",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": name},
            "decryption": {"provider": "sops", "secretRef": {"name": "sops-age"}},
            **({"suspend": True} if suspend else {}),
        },
        "status": status,
    }


# --------------------------------------------------------------------------------------------- into a real server
SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")


def _generation_step(document: dict[str, Any], step: int) -> dict[str, Any]:
    """The object with one spec field changed for step `step` (each a real spec change: metadata.generation + 1)."""
    changed = copy.deepcopy(document)
    spec = changed["spec"]
    if changed["kind"] == "DaemonSet":
        spec["template"]["metadata"].setdefault("annotations", {})["terravixens.test/rollout"] = str(step)
    elif "interval" in spec:
        spec["interval"] = f"{step + 1}m30s"
    else:
        raise ValueError(f"no generation steps for a {changed['kind']}")
    return changed


def put(server: Any, document: dict[str, Any]) -> dict[str, Any]:
    """One object written into a real API server (tests/control_plane.py ControlPlane) as its writers do: the object
    applied until the server's metadata.generation is the one the builder gave (each step a spec change), then its
    status through the status subresource. The object as the server returns it."""
    manifest = copy.deepcopy(document)
    status = manifest.pop("status", None)
    metadata = manifest["metadata"]
    wanted = metadata.get("generation")
    for field in SERVER_FIELDS:
        metadata.pop(field, None)
    if metadata.get("namespace") and not server.exists("Namespace", metadata["namespace"]):
        server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": metadata["namespace"]}})
    steps = max(0, (wanted or 1) - 1)  # spec changes before the object itself (a new object is at generation 1)
    written = server.apply(_generation_step(manifest, 0) if steps else manifest)
    for step in range(1, steps):
        written = server.apply(_generation_step(manifest, step))
    if steps:
        written = server.apply(manifest)
    if wanted is not None and written["metadata"].get("generation", wanted) != wanted:
        raise ValueError(f"{metadata['name']}: generation {written['metadata'].get('generation')}, not {wanted}")
    if status:
        written = server.status(manifest, status)
    return written


def put_all(server: Any, objects: dict[str, list[dict[str, Any]]]) -> None:
    for items in objects.values():
        for item in items:
            put(server, item)


def put_site_nodes(server: Any, site: Any, cluster_name: str = "prod") -> list[str]:
    """A Ready Node for every node of the site's cluster, as its kubelet registers it; their names."""
    from terravixens.operations.observe import site_nodes
    from terravixens.roles import Role

    names = []
    for found in site_nodes(site, cluster_name):
        put(
            server,
            node(found.hostname, found.address, control_plane=found.role is Role.CONTROLPLANE, labels=found.labels),
        )
        names.append(found.hostname)
    return names


def node_names(server: Any) -> list[str]:
    """The Nodes the API server has, by name."""
    return sorted(name for _, name in server.names("Node"))
