"""A fake `kubectl` for the check and drift tests, driven by a scenario file (JSON), touching nothing.

    python fake_kubectl.py SCENARIO --kubeconfig FILE get RESOURCE [NAME] [-n NS | -A] -o json [--request-timeout=…]
    python fake_kubectl.py SCENARIO --kubeconfig FILE delete node NAME [--ignore-not-found] [--wait=false]
    python fake_kubectl.py SCENARIO --kubeconfig FILE cordon|uncordon NAME
    python fake_kubectl.py SCENARIO --kubeconfig FILE annotate node NAME KEY=VALUE [--overwrite] | KEY-
    python fake_kubectl.py SCENARIO --kubeconfig FILE drain NAME [--ignore-daemonsets] [--delete-emptydir-data]
                                                                  [--timeout=DURATION]

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
- `cordon x` / `uncordon x` (kubectl v0.34.2 pkg/cmd/drain): `node/x cordoned` (`spec.unschedulable` true) or
  `node/x already cordoned`; `node/x uncordoned` (the field gone: the API omits false) or `node/x already
  uncordoned`; a missing Node: the NotFound line, exit 1.
- `annotate node x k=v [--overwrite]` / `k-`: `node/x annotated`; a different value without --overwrite: `error:
  --overwrite is false but found the following declared annotation(s): 'k' already has a value (v)`, exit 1.
- `drain x` (pkg/drain): cordons as above, then per pod of the Node (`pods` objects, `spec.nodeName`): DaemonSet
  pods skipped with `Warning: ignoring DaemonSet-managed Pods: ns/a, ns/b` on stderr under --ignore-daemonsets
  (without it: refused, exit 1), the others `evicting pod ns/p` then `pod/p evicted` (they leave the Node), then
  `node/x drained`. A pod named in `blocked_evictions` (a PodDisruptionBudget that allows no disruption) is
  refused with kubectl's retry line until --timeout, then `error: unable to drain node "x" due to error: …global
  timeout reached…, continuing command...`, `There are pending nodes to be drained:`, exit 1 (the fake does not
  wait out the timeout).
- the API unreachable: a few `E… memcache.go:265] "Unhandled Error" err="couldn't get current server API group
  list: …"` lines, then `The connection to the server HOST:PORT was refused - did you specify the right host or
  port?`, exit 1.

Scenario keys:
    objects      resource (plural.group, "nodes" for the core ones) -> list of objects as the API returns them
                 (tests/kube_objects.py builds them with the shapes a real API server accepts); a custom resource
                 whose key is absent is not served
    unreachable  true: the API refuses connections
    hang         ["get nodes", …]: calls (verb and resource as typed) that never return; a child holds the pipes
    blocked_evictions  pod names a PodDisruptionBudget keeps from being evicted (drain fails)
    server       the API address the kubeconfig names (default: read from the kubeconfig's `server:` line)
    calls        appended: the arguments of every call

The checks run against a real kube-apiserver and the real kubectl (tests/control_plane.py, tests/test_check.py): RBAC
refusals, a frozen or unreachable server, expired certificates, CRDs that are not served and stale status all come
from the real ones there. This fake stays for what a real server cannot produce on demand: a kubectl that hangs with a
child holding its pipes (the runner must end the whole process group: tests/test_hangs.py, test_check), and the
operations' exit-code and site-error tests that only need some kubectl to answer.
"""

from __future__ import annotations

import contextlib
import fcntl
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


def _node_verb(scenario_path: str, verb: str, words: list[str], flags: list[str]) -> int:
    """cordon, uncordon, annotate and drain of one Node, as kubectl prints them (see the module's docstring)."""
    if verb == "annotate":
        words = words[1:]  # `annotate node NAME …`: the resource type is always node here
    name = words[0] if words else ""
    with _scenario(scenario_path) as state:
        nodes = state.setdefault("objects", {}).setdefault("nodes", [])
        node = next((n for n in nodes if n["metadata"]["name"] == name), None)
        if node is None:
            print(f'Error from server (NotFound): nodes "{name}" not found', file=sys.stderr)
            return 1
        spec = node.setdefault("spec", {})
        annotations = node["metadata"].setdefault("annotations", {})
        out: list[str] = []
        if verb == "annotate":
            for item in words[1:]:
                if item.endswith("-") and "=" not in item:
                    annotations.pop(item[:-1], None)
                    continue
                key, _, value = item.partition("=")
                if key in annotations and annotations[key] != value and "--overwrite" not in flags:
                    print(
                        f"error: --overwrite is false but found the following declared annotation(s): '{key}' "
                        f"already has a value ({annotations[key]})",
                        file=sys.stderr,
                    )
                    return 1
                annotations[key] = value
            print(f"node/{name} annotated")
            return 0
        if verb == "uncordon":
            print(f"node/{name} {'uncordoned' if spec.pop('unschedulable', False) else 'already uncordoned'}")
            return 0
        out.append(f"node/{name} {'already cordoned' if spec.get('unschedulable') else 'cordoned'}")
        spec["unschedulable"] = True
        if verb == "cordon":
            print(out[0])
            return 0
        pods = [p for p in state["objects"].get("pods", []) if (p.get("spec") or {}).get("nodeName") == name]
        owned = [p for p in pods if any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))]
        others = [p for p in pods if p not in owned]
        timeout = next((f.split("=", 1)[1] for f in flags if f.startswith("--timeout=")), "0s")
        blocked = [p for p in others if p["metadata"]["name"] in state.get("blocked_evictions", [])]
        if owned and "--ignore-daemonsets" not in flags:
            listed = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in owned)
            error = f"cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): {listed}"
            print(out[0])
            print(
                f'error: unable to drain node "{name}" due to error: {error}, continuing command...\n'
                f"There are pending nodes to be drained:\n {name}\n{error}",
                file=sys.stderr,
            )
            return 1
        print(out[0])
        if owned:
            listed = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in owned)
            print(f"Warning: ignoring DaemonSet-managed Pods: {listed}", file=sys.stderr)
        for pod in others:
            print(f"evicting pod {pod['metadata']['namespace']}/{pod['metadata']['name']}")
        if blocked:
            pod = blocked[0]["metadata"]
            why = f'error when evicting pods/"{pod["name"]}" -n "{pod["namespace"]}"'
            print(
                f"{why} (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.\n"
                f'error: unable to drain node "{name}" due to error: {why}: global timeout reached: {timeout}, '
                f"continuing command...\nThere are pending nodes to be drained:\n {name}\n"
                f"{why}: global timeout reached: {timeout}",
                file=sys.stderr,
            )
            return 1
        for pod in others:
            pod["spec"]["nodeName"] = None  # evicted: its controller makes a new one elsewhere
            print(f"pod/{pod['metadata']['name']} evicted")
        print(f"node/{name} drained")
    return 0


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
    if verb in ("cordon", "uncordon", "drain", "annotate"):
        return _node_verb(scenario_path, verb, words[1:], flags)
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
