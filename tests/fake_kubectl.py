"""A fake `kubectl` for the check and drift tests, driven by a scenario file (JSON), touching nothing.

    python fake_kubectl.py SCENARIO --kubeconfig FILE get RESOURCE [NAME] [-n NS | -A] -o json [--request-timeout=…]
    python fake_kubectl.py SCENARIO --kubeconfig FILE delete node NAME [--ignore-not-found] [--wait=false]

Tests write a two-line wrapper named `kubectl` that execs this file with their scenario (`Cluster` below). What it
prints is kubectl's own (v1.32, research 07, checked against a real kubectl and a loopback API there):

- `get … -o json` of a list: `{"apiVersion": "v1", "items": [...], "kind": "List", "metadata": {"resourceVersion":
  ""}}` — kubectl wraps every list in `kind: List`, whatever list kind the server sent — 4-space indent, keys sorted;
  of one object: the object. Empty: `"items": []`, exit 0.
- a named object that is not there: `Error from server (NotFound): <resource> "<name>" not found` (the resource as
  the server names it: `nodes`, `daemonsets.apps`), exit 1.
- a resource type the server does not serve (a CRD not installed): `error: the server doesn't have a resource type
  "<plural>"`, exit 1.
- `delete node x`: `node "x" deleted`, exit 0 (the Node leaves the scenario); missing: the NotFound line, exit 1;
  with `--ignore-not-found`: nothing, exit 0.
- the API unreachable: a few `E… memcache.go:265] "Unhandled Error" err="couldn't get current server API group
  list: …"` lines, then `The connection to the server HOST:PORT was refused - did you specify the right host or
  port?`, exit 1.

Scenario keys:
    objects      resource (plural.group, "nodes" for the core ones) -> list of objects as the API returns them
                 (`node()`, `daemonset()`, `ip_pool()`, `l2_policy()`, `git_repository()`, `kustomization()` below
                 build them with the real status shapes); a custom resource whose key is absent is not served
    unreachable  true: the API refuses connections
    hang         ["get nodes", …]: calls (verb and resource as typed) that never return; a child holds the pipes
    server       the API address the kubeconfig names (default: read from the kubeconfig's `server:` line)
    calls        appended: the arguments of every call

A real cluster adds what a fake cannot: objects changing between two calls, API priority and fairness throttling,
discovery caching in ~/.kube/cache, RBAC refusals (`Error from server (Forbidden)`), server-side field defaults.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

# Every resource the checks ask for, by the names kubectl accepts (plural, singular, short names, plural.group).
RESOURCES = {
    "nodes": ("nodes", "", False, ("node", "nodes", "no")),
    "daemonsets.apps": ("daemonsets", "apps", True, ("daemonset", "daemonsets", "ds", "daemonsets.apps")),
    "ciliumloadbalancerippools.cilium.io": (
        "ciliumloadbalancerippools",
        "cilium.io",
        False,
        ("ciliumloadbalancerippool", "ciliumloadbalancerippools", "ippool", "ippools", "lbippool", "lbippools"),
    ),
    "ciliuml2announcementpolicies.cilium.io": (
        "ciliuml2announcementpolicies",
        "cilium.io",
        False,
        ("ciliuml2announcementpolicy", "ciliuml2announcementpolicies", "l2announcement"),
    ),
    "gitrepositories.source.toolkit.fluxcd.io": (
        "gitrepositories",
        "source.toolkit.fluxcd.io",
        True,
        ("gitrepository", "gitrepositories", "gitrepo"),
    ),
    "kustomizations.kustomize.toolkit.fluxcd.io": (
        "kustomizations",
        "kustomize.toolkit.fluxcd.io",
        True,
        ("kustomization", "kustomizations", "ks"),
    ),
}
BUILT_IN = {"nodes", "daemonsets.apps"}


# -------------------------------------------------------------------------------------------- object builders
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
    the extension labels Talos adds (`extensions.talos.dev/<name>`, never the schematic), the four conditions."""
    reasons = {
        "True": ("KubeletReady", "kubelet is posting ready status"),
        "False": (
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady",
        ),
        "Unknown": ("NodeStatusUnknown", "Kubelet stopped posting node status."),
    }[ready]
    stamp = "2026-01-10T10:00:00Z"
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
        condition.update(lastHeartbeatTime=stamp, lastTransitionTime=stamp)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {"talos.dev/owned-labels": "[]"},
            "creationTimestamp": stamp,
            "labels": every,
            "name": name,
            "resourceVersion": "4211",
            "uid": f"{hashlib.sha256(name.encode()).hexdigest()[:8]}-0000-4000-8000-000000000000",
        },
        "spec": {
            "podCIDR": "10.244.0.0/24",
            **(
                {"taints": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}]}
                if control_plane
                else {}
            ),
        },
        "status": {
            "addresses": [{"address": address, "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
            "conditions": conditions,
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://2.1.5",
                "kernelVersion": "6.12.57-talos",
                "kubeletVersion": kubelet,
                "operatingSystem": "linux",
                "osImage": f"Talos ({talos})",
            },
        },
    }


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
    """A DaemonSet with its status as the controller writes it (`numberUnavailable` and `conditions` omitted when
    zero or empty: omitempty)."""
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
        "spec": {"selector": {"matchLabels": {"k8s-app": name}}},
        "status": status,
    }


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


def _flux(
    kind: str,
    api: str,
    name: str,
    namespace: str,
    ready: str,
    reason: str,
    message: str,
    generation: int,
    observed: int,
    extra: dict[str, Any],
    suspend: bool,
) -> dict[str, Any]:
    conditions = [
        {
            "lastTransitionTime": "2026-01-10T10:06:00Z",
            "message": message,
            "observedGeneration": observed,
            "reason": reason,
            "status": ready,
            "type": "Ready",
        }
    ]
    if ready != "True":
        conditions.append(
            {
                "lastTransitionTime": "2026-01-10T10:06:00Z",
                "message": "reconciliation in progress" if ready == "Unknown" else message,
                "observedGeneration": observed,
                "reason": "ProgressingWithRetry",
                "status": "True",
                "type": "Reconciling",
            }
        )
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"generation": generation, "name": name, "namespace": namespace},
        "spec": {"interval": "10m", **({"suspend": True} if suspend else {})},
        "status": {"conditions": conditions, "observedGeneration": observed, **extra},
    }


REVISION = "main@sha1:132f4e719209eb10b9485302f8593fc0e680f4fc"


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
    """A GitRepository as source-controller reports it (Ready True/Succeeded `stored artifact for revision …`;
    failures e.g. False/AuthenticationFailed)."""
    return _flux(
        "GitRepository",
        "source.toolkit.fluxcd.io/v1",
        name,
        namespace,
        ready,
        reason,
        message or f"stored artifact for revision '{REVISION}'",
        generation,
        generation if observed is None else observed,
        {"artifact": {"revision": REVISION}} if ready == "True" else {},
        suspend,
    )


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
    """A Kustomization as kustomize-controller reports it (Ready True/ReconciliationSucceeded `Applied revision: …`;
    failures e.g. False/BuildFailed, HealthCheckFailed)."""
    return _flux(
        "Kustomization",
        "kustomize.toolkit.fluxcd.io/v1",
        name,
        namespace,
        ready,
        reason,
        message or f"Applied revision: {REVISION}",
        generation,
        generation if observed is None else observed,
        {"lastAppliedRevision": REVISION, "lastAttemptedRevision": REVISION} if ready == "True" else {},
        suspend,
    )


# ----------------------------------------------------------------------------------------------------- the tool
@contextlib.contextmanager
def _scenario(path: str):
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as source:
            state = json.load(source)
        yield state
        # written whole, then renamed: a test reading the scenario without the lock never sees a half-written file
        with open(f"{path}.{os.getpid()}", "w") as target:
            json.dump(state, target)
        os.replace(f"{path}.{os.getpid()}", path)


def _resolve(typed: str) -> str | None:
    for key, (_, _, _, names) in RESOURCES.items():
        if typed == key or typed in names:
            return key
    return None


def _server(arguments: list[str], state: dict) -> str:
    if state.get("server"):
        return str(state["server"]).split("://")[-1]
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(arguments[arguments.index("--kubeconfig") + 1]) as source:
            config = source.read()
        found = re.search(r"server:\s*https?://(\S+)", config)
        if found:
            return found.group(1).rstrip("/")
    return "10.11.1.10:6443"


def _print(document: Any) -> None:
    print(json.dumps(document, indent=4, sort_keys=True))


def main(scenario_path: str, arguments: list[str]) -> int:
    with _scenario(scenario_path) as state:
        state.setdefault("calls", []).append(arguments)
    words = [a for a in arguments[2:] if not a.startswith("-")]
    flags = arguments[2:]
    # values of -n / -o are not words
    for option in ("-n", "--namespace", "-o", "--output"):
        if option in flags:
            value = flags[flags.index(option) + 1]
            if value in words:
                words.remove(value)
    verb, typed, name = [*words, None, None, None][:3]
    if " ".join(w for w in (verb, typed) if w) in state.get("hang", []):
        child = subprocess.Popen(["sleep", "3600"])  # holds the output pipes, as a wrapper's helper would
        with open(scenario_path + ".hung", "a") as hung:
            hung.write(f"{os.getpid()} {child.pid}\n")
        child.wait()
        return 0
    if state.get("unreachable"):
        server = _server(arguments, state)
        stamp = time.strftime("%m%d %H:%M:%S")
        for _ in range(5):
            print(
                f'E{stamp}.000000   {os.getpid()} memcache.go:265] "Unhandled Error" err="couldn\'t get current '
                f'server API group list: Get \\"https://{server}/api?timeout=32s\\": dial tcp {server}: connect: '
                f'connection refused"',
                file=sys.stderr,
            )
        print(
            f"The connection to the server {server} was refused - did you specify the right host or port?",
            file=sys.stderr,
        )
        return 1
    resource = _resolve(typed or "")
    if resource is None or (resource not in BUILT_IN and resource not in state.get("objects", {})):
        plural = (typed or "").split(".")[0]
        print(f'error: the server doesn\'t have a resource type "{plural}"', file=sys.stderr)
        return 1
    plural, group, namespaced, _ = RESOURCES[resource]
    qualified = f"{plural}.{group}" if group else plural
    with _scenario(scenario_path) as state:
        objects = state.setdefault("objects", {}).setdefault(resource, [])
        namespace = None
        if namespaced and "-A" not in flags and "--all-namespaces" not in flags:
            namespace = next(
                (flags[i + 1] for i, f in enumerate(flags) if f in ("-n", "--namespace") and i + 1 < len(flags)),
                "default",
            )
        matching = [o for o in objects if namespace is None or (o.get("metadata") or {}).get("namespace") == namespace]
        if verb == "delete":
            kept = [o for o in objects if o["metadata"]["name"] != name or o not in matching]
            gone = len(kept) != len(objects)
            state["objects"][resource] = kept
    if verb == "delete":
        if gone:
            print(f'{RESOURCES[resource][3][0]} "{name}" deleted')
            return 0
        if "--ignore-not-found" in flags or "--ignore-not-found=true" in flags:
            return 0
        print(f'Error from server (NotFound): {qualified} "{name}" not found', file=sys.stderr)
        return 1
    if verb != "get" or "json" not in (flags[flags.index("-o") + 1] if "-o" in flags else ""):
        print(f"fake kubectl: only `get … -o json` and `delete node` are faked, not {arguments[2:]}", file=sys.stderr)
        return 1
    if name:
        found = [o for o in matching if o["metadata"]["name"] == name]
        if not found:
            print(f'Error from server (NotFound): {qualified} "{name}" not found', file=sys.stderr)
            return 1
        _print(found[0])
        return 0
    _print({"apiVersion": "v1", "items": matching, "kind": "List", "metadata": {"resourceVersion": ""}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
