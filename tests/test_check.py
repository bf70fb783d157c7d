"""`terravixens check CLUSTER`: passing and failing on each of its checks. The Kubernetes side is a real kube-apiserver
read by the real kubectl (tests/control_plane.py; the objects as kubelets, Cilium and Flux write them,
tests/kube_objects.py), the Talos side the faithful fake (tests/fake_talosctl.py); tests/cluster_fakes.py builds a
cluster that is what the site says, then each case breaks one thing. Each problem is found by its own check only,
named with its fix, and exits 2; a check that cannot look says why and exits 1; found wins over not checked.

Only a real server shows: RBAC letting a token list Nodes but not Flux's objects (read as not checked, never ok), a
kubeconfig whose certificate the server refuses, an API server that stops answering (SIGSTOP: the deadline holds),
status a controller has not caught up with (observedGeneration behind the server's own generation), a resource type
whose CRD is gone. The fake kubectl stays for a kubectl whose child holds its pipes (a fault of the process, not of
the server).

What a real cluster adds (not here): talosctl health taking minutes while components settle, logs that grow while
they are read, Flux reconciling between two reads, Cilium's operator writing pool conditions late, clock skew between
the nodes and the machine running the check.
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from terravixens.exitcodes import ExitCode, MonitorExit
from terravixens.operations import OperationError
from terravixens.operations.acceptance import CheckOptions, parse_since, parse_wait
from terravixens.operations.check import CheckCommand, check
from terravixens.operations.console import Console
from terravixens.operations.observe import Since, last_apply
from terravixens.operations.workspace import Workspace
from tests import kube_objects as k
from tests import support
from tests.check_support import run
from tests.cluster_fakes import Cluster
from tests.control_plane import OBSERVER
from tests.fake_terraform import FakeTerraform

CHECKS = ["talos", "services", "nodes", "cilium", "l2", "flux", "logs", "certificates"]
KUBE_CHECKS = ("nodes", "cilium", "l2", "flux")
POOLS = "ciliumloadbalancerippools.cilium.io"
POLICIES = "ciliuml2announcementpolicies.cilium.io"
SOURCES = "gitrepositories.source.toolkit.fluxcd.io"
KUSTOMIZATIONS = "kustomizations.kustomize.toolkit.fluxcd.io"
NOW = datetime.now(UTC)
HOUR_AGO = Since(NOW - timedelta(hours=1), "--since 1h")
DIAL = (
    'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp '
    '{}:50000: connect: no route to host"'
)


@pytest.fixture(scope="module")
def site():
    return support.site_from(support.example_data())


@pytest.fixture
def cluster(tmp_path, site, kube) -> Cluster:
    return Cluster(tmp_path, site, kube=kube)


# ---------------------------------------------------------------------------------------------------- passing
def test_a_cluster_as_the_site_says_passes_every_check_and_changes_nothing(cluster):
    ran = run(cluster)
    assert ran.code == MonitorExit.IN_SYNC
    assert ran.lines == [
        "talos: ok — talosctl health through cp-a (10.11.1.11): every check passed (3 control planes, 2 workers)",
        (
            "services: ok — 5 nodes answered: every service Running or Finished (etcd on 3 control planes, the kubelet "
            "on every node)"
        ),
        "nodes: ok — 5 Nodes Ready with the site's roles and labels, no other Node",
        "cilium: ok — DaemonSet kube-system/cilium: 5 of 5 agents ready, generation 3 rolled out",
        "l2: ok — 1 pool: services (31 of 32 addresses free); L2 policy terravixens-l2 without error conditions",
        (
            "flux: ok — 2 objects Ready: GitRepository flux-system/flux-system (main@sha1:132f4e71), Kustomization "
            "flux-system/flux-system (main@sha1:132f4e71)"
        ),
        (
            "logs: ok — no error line in the last 300 lines of etcd, kubelet, controller-runtime (no bound: no state "
            "backup of platform-prod or gitops-prod here)"
        ),
        ran.lines[7],
        "check prod: every check passed (talos, services, nodes, cilium, l2, flux, logs, certificates)",
    ]
    assert ran.lines[7].startswith("certificates: ok — valid for more than 30 days: talosconfig context prod until ")
    # read-only: talosctl health/services/logs, kubectl get — nothing else, every call bounded by its deadline
    talos = [call[4] for call in cluster.talos_calls()]
    assert talos == ["health", "services", "logs", "logs", "logs"]
    assert [call[5] for call in cluster.talos_calls()[2:]] == ["etcd", "kubelet", "controller-runtime"]
    assert cluster.talos_calls()[2][3] == "10.11.1.11,10.11.1.12,10.11.1.13"  # etcd: the control planes only
    assert {call[2] for call in cluster.kube_calls()} == {"get"}
    assert all("--request-timeout=30s" in call for call in cluster.kube_calls())


def test_health_is_given_the_site_nodes_and_runs_through_the_next_control_plane_when_one_is_down(cluster):
    cluster.talos(lambda s: s.update(unreachable=["10.11.1.11"]))
    ran = run(cluster)
    health = [c for c in cluster.talos_calls() if c[4] == "health"]
    assert [c[3] for c in health] == ["10.11.1.11", "10.11.1.12"]
    assert health[1][health[1].index("--control-plane-nodes") + 1] == "10.11.1.12,10.11.1.11,10.11.1.13"
    assert health[1][health[1].index("--worker-nodes") + 1] == "10.11.1.21,10.11.1.22"
    assert ran.lines[0].startswith("talos: ok — talosctl health through cp-b (10.11.1.12)")
    # talosctl exits 0 with a WARNING when one node of several fails: counted per node, it is a problem
    assert ran.status()["services"] == "problem" and ran.code == MonitorExit.FOUND
    assert "logs: ok — " in ran.text and "; not read: cp-a (no answer to talosctl services)" in ran.text


def test_an_extension_service_without_a_health_check_is_not_a_problem(cluster):
    rows = [["ext-qemu-guest-agent", "Running", "Fail", "Health check failed: service not running"]]

    def change(state: dict) -> None:
        state["services"] = {"10.11.1.21": [*DEFAULT_WORKER, *rows]}

    cluster.talos(change)
    assert run(cluster).code == MonitorExit.IN_SYNC


DEFAULT_WORKER = [
    ["apid", "Running", "OK", "Health check successful"],
    ["containerd", "Running", "OK", "Health check successful"],
    ["cri", "Running", "OK", "Health check successful"],
    ["kubelet", "Running", "OK", "Health check successful"],
    ["machined", "Running", "?", "Service started as goroutine"],
    ["trustd", "Running", "OK", "Health check successful"],
    ["udevd", "Running", "OK", "Health check successful"],
]


# ---------------------------------------------------------------------------------------------------- problems
def _node(cluster: Cluster, name: str, **changes) -> None:
    node = next(n for n in cluster.nodes if n.name == name)
    settings = {"control_plane": node.role == "controlplane", "labels": node.labels, **changes}
    cluster.put("nodes", k.node(node.hostname, node.address, **settings))


def _without_node(cluster: Cluster, name: str) -> None:
    cluster.remove("nodes", name)


def _services(address: str, rows: list[list[str]]) -> Callable[[Cluster], None]:
    return lambda c: c.talos(lambda s: s.setdefault("services", {}).update({address: rows}))


def _log(address: str, service: str, *lines: str) -> Callable[[Cluster], None]:
    return lambda c: c.talos(lambda s: s.setdefault("logs", {}).setdefault(address, {}).update({service: list(lines)}))


def _ts(minutes_ago: float) -> datetime:
    return NOW - timedelta(minutes=minutes_ago)


def _since_now(days: float) -> float:
    """Days from the moment a case runs to NOW + `days`: an expiry fixed against NOW, as the expected lines are (a
    suite running for minutes across midnight otherwise expects another date)."""
    return days - (datetime.now(UTC) - NOW).total_seconds() / 86400


def _iso(minutes_ago: float) -> str:
    return _ts(minutes_ago).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


ETCD_ERROR = json.dumps(
    {
        "level": "error",
        "ts": _iso(10),
        "caller": "etcdserver/server.go:2196",
        "msg": "failed to publish local member to cluster through raft",
        "local-member-id": "a49c021e76e707db",
        "error": "etcdserver: request timed out",
    },
    separators=(",", ":"),
)
KUBELET_ERROR = json.dumps(
    {
        "ts": _ts(10).timestamp() * 1000,
        "caller": "kubelet/kubelet.go:2890",
        "msg": "Container runtime network not ready",
        "networkReady": "NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni "
        "plugin not initialized",
    }
)
KUBELET_INFO = json.dumps(
    {
        "ts": _ts(9).timestamp() * 1000,
        "caller": "kubelet/kubelet.go:2001",
        "v": 0,
        "msg": "Successfully registered node",
    }
)
CONTROLLER_ERROR = (
    f"{_ts(5).strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z \x1b[31mERROR\x1b[0m controller failed "
    '{"component": "controller-runtime", "controller": "k8s.NodeLabelSpecController", "error": "error getting node: '
    'Get \\"https://127.0.0.1:7445/api/v1/nodes/wk-a\\": dial tcp 127.0.0.1:7445: connect: connection refused"}'
)

BROKEN_PEM = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMAOgAQA=\n-----END CERTIFICATE-----\n").decode()
CONTROLLER_MESSAGE = CONTROLLER_ERROR.split("\x1b[0m ", 1)[1]  # the level's ANSI colour stripped, time and level cut


@dataclass(frozen=True)
class Case:
    check: str
    breaks: Callable[[Cluster], None]
    lines: tuple[str, ...]
    unread: tuple[str, ...] = ()  # checks the break also leaves not checked (the API server refuses the kubeconfig)


CASES = {
    # talos ----------------------------------------------------------------------------------------------------
    "health-fails": Case(
        "talos",
        lambda c: c.talos(lambda s: s.update(broken=["10.11.1.12"], health_transcript=True)),
        (
            (
                "talos: problem — talosctl health through cp-a (10.11.1.11) failed: waiting for etcd to be "
                "healthy: 1 error "
                'occurred: * 10.11.1.12: service "etcd" not in expected state "Running": current state '
                "[Preparing] Running "
                "pre state: watch it with `talosctl -n 10.11.1.11 health`; on the node it names, `talosctl -n NODE "
                "services` and `talosctl -n NODE dmesg`"
            ),
        ),
    ),
    "health-node-not-ready": Case(
        "talos",
        lambda c: c.talos(lambda s: s.update(broken=["10.11.1.22"], health_transcript=True)),
        (
            (
                "talos: problem — talosctl health through cp-a (10.11.1.11) failed: waiting for all k8s nodes to "
                "report ready: some nodes are not ready: [wk-b]: watch it with `talosctl -n 10.11.1.11 health`; on the "
                "node it names, `talosctl -n NODE services` and `talosctl -n NODE dmesg`"
            ),
        ),
    ),
    # services -------------------------------------------------------------------------------------------------
    "node-does-not-answer": Case(
        "services",
        lambda c: c.talos(lambda s: s.update(unreachable=["10.11.1.22"])),
        (
            (
                f"services: problem — wk-b (10.11.1.22) does not answer talosctl ({DIAL.format('10.11.1.22')}): is it "
                f"up? `talosctl -n 10.11.1.22 version`, its console in Proxmox"
            ),
        ),
    ),
    "service-failed": Case(
        "services",
        _services("10.11.1.21", [*DEFAULT_WORKER[:3], ["kubelet", "Failed", "Fail", "Process exited with code 1"]]),
        (
            (
                "services: problem — wk-a (10.11.1.21): service kubelet is Failed, health Fail (Process exited "
                "with code "
                "1): `talosctl -n 10.11.1.21 service kubelet`, `talosctl -n 10.11.1.21 logs kubelet`"
            ),
        ),
    ),
    "control-plane-without-etcd": Case(
        "services",
        _services("10.11.1.13", DEFAULT_WORKER),
        (
            (
                "services: problem — cp-c (10.11.1.13) runs no etcd service: `talosctl -n 10.11.1.13 get machinetype` "
                "(is it a controlplane?), `talosctl -n 10.11.1.13 dmesg`"
            ),
        ),
    ),
    # nodes ----------------------------------------------------------------------------------------------------
    "node-missing": Case(
        "nodes",
        lambda c: _without_node(c, "wk-b"),
        (
            (
                "nodes: problem — no Kubernetes Node wk-b (site node wk-b, 10.11.1.22): its kubelet has not "
                "registered: "
                "`talosctl -n 10.11.1.22 logs kubelet`"
            ),
        ),
    ),
    "node-not-ready": Case(
        "nodes",
        lambda c: _node(c, "wk-a", ready="False"),
        (
            (
                "nodes: problem — Node wk-a is not Ready (Ready False: KubeletNotReady: container runtime network not "
                "ready: NetworkReady=false reason:NetworkPluginNotReady): `kubectl describe node wk-a`, `talosctl -n "
                "10.11.1.21 service kubelet`"
            ),
        ),
    ),
    "worker-with-control-plane-role": Case(
        "nodes",
        lambda c: _node(c, "wk-b", control_plane=True),
        (
            (
                "nodes: problem — Node wk-b carries the node-role.kubernetes.io/control-plane label but is a worker in "
                "the site: `talosctl -n 10.11.1.22 get machinetype` says what the machine is; the site and the machine "
                "must agree"
            ),
        ),
    ),
    "control-plane-without-its-role": Case(
        "nodes",
        lambda c: _node(c, "cp-c", control_plane=False),
        (
            (
                "nodes: problem — Node cp-c lacks the node-role.kubernetes.io/control-plane label but is a "
                "controlplane "
                "in the site: `talosctl -n 10.11.1.13 get machinetype` says what the machine is; the site and the "
                "machine must agree"
            ),
        ),
    ),
    "label-missing": Case(
        "nodes",
        lambda c: _node(c, "wk-a", labels={}),
        (
            (
                "nodes: problem — Node wk-a has no label node.kubernetes.io/pool=general: Talos writes the "
                "site's labels "
                "and roles onto the Node: terravixens deploy platform-prod"
            ),
        ),
    ),
    "label-differs": Case(
        "nodes",
        lambda c: _node(c, "wk-a", labels={"node.kubernetes.io/pool": "gpu"}),
        (
            (
                "nodes: problem — Node wk-a has label node.kubernetes.io/pool=gpu, the site says "
                "node.kubernetes.io/pool=general: Talos writes the site's labels and roles onto the Node: terravixens "
                "deploy platform-prod"
            ),
        ),
    ),
    "unknown-node": Case(
        "nodes",
        lambda c: c.put("nodes", k.node("old-1", "10.11.1.31")),
        (
            (
                "nodes: problem — Node old-1 is not a node of the site: a node removed from the site leaves its Node "
                "behind if its reset did not run: once its machine is gone, `kubectl delete node old-1`"
            ),
        ),
    ),
    # cilium ---------------------------------------------------------------------------------------------------
    "cilium-missing": Case(
        "cilium",
        lambda c: c.objects("daemonsets.apps", []),
        (
            (
                "cilium: problem — no DaemonSet kube-system/cilium: Cilium is the gitops layer's: terravixens "
                "deploy gitops-prod"
            ),
        ),
    ),
    "cilium-agents-not-ready": Case(
        "cilium",
        lambda c: c.objects("daemonsets.apps", [k.daemonset(desired=5, ready=3)]),
        (
            (
                "cilium: problem — 3 of 5 Cilium agents ready (2 unavailable): `kubectl -n kube-system get pods -l "
                "k8s-app=cilium -o wide`, `kubectl -n kube-system logs ds/cilium`"
            ),
        ),
    ),
    "cilium-generation-not-observed": Case(
        "cilium",
        lambda c: c.objects("daemonsets.apps", [k.daemonset(desired=5, generation=4, observed=3)]),
        (
            (
                "cilium: problem — the cilium DaemonSet is at generation 4, its controller has seen 3: wait a "
                "moment and "
                "check again; if it stays, `kubectl -n kube-system describe ds cilium`"
            ),
        ),
    ),
    "cilium-not-rolled-out": Case(
        "cilium",
        lambda c: c.objects("daemonsets.apps", [k.daemonset(desired=5, updated=3)]),
        (
            (
                "cilium: problem — 3 of 5 Cilium agents run the DaemonSet's current spec: `kubectl -n kube-system get "
                "pods -l k8s-app=cilium -o wide`, `kubectl -n kube-system logs ds/cilium`"
            ),
        ),
    ),
    # l2 -------------------------------------------------------------------------------------------------------
    "pool-missing": Case(
        "l2",
        lambda c: c.objects(POOLS, []),
        ("l2: problem — no CiliumLoadBalancerIPPool services: terravixens deploy gitops-prod",),
    ),
    "pool-conflict": Case(
        "l2",
        lambda c: c.objects(
            POOLS,
            [
                k.ip_pool(
                    "services",
                    ["10.12.0.192/27"],
                    total=32,
                    conflict="Pool conflicts since range '10.12.0.192/27' overlaps range '10.12.0.192/28' from IP "
                    "Pool 'lab'",
                )
            ],
        ),
        (
            (
                "l2: problem — pool services: Pool conflicts since range '10.12.0.192/27' overlaps range "
                "'10.12.0.192/28' from IP Pool 'lab': give clusters.prod.cilium.pools.services ranges no other "
                "pool has, "
                "then terravixens deploy gitops-prod"
            ),
        ),
    ),
    "pool-disabled": Case(
        "l2",
        lambda c: c.objects(POOLS, [k.ip_pool("services", ["10.12.0.192/27"], total=32, disabled=True)]),
        ("l2: problem — pool services is disabled: terravixens deploy gitops-prod (the site's pools are enabled)",),
    ),
    "pool-exhausted": Case(
        "l2",
        lambda c: c.objects(POOLS, [k.ip_pool("services", ["10.12.0.192/27"], total=32, used=32)]),
        (
            (
                "l2: problem — pool services has no address left (32 in all): add a range to "
                "clusters.prod.cilium.pools.services, then terravixens deploy gitops-prod"
            ),
        ),
    ),
    "pools-not-served": Case(
        "l2",
        lambda c: c.objects(POOLS, None),
        (
            (
                "l2: problem — Cilium's LoadBalancer IP pools are not served (error: the server doesn't have a "
                "resource "
                'type "ciliumloadbalancerippools"): terravixens deploy gitops-prod'
            ),
        ),
    ),
    "l2-policy-missing": Case(
        "l2",
        lambda c: c.objects(POLICIES, []),
        ("l2: problem — no CiliumL2AnnouncementPolicy terravixens-l2: terravixens deploy gitops-prod",),
    ),
    "l2-policy-error": Case(
        "l2",
        lambda c: c.objects(
            POLICIES,
            [k.l2_policy(error=("io.cilium/bad-interface-regex", "error parsing regexp: missing closing ): `^eth(`"))],
        ),
        (
            (
                "l2: problem — L2 policy terravixens-l2: io.cilium/bad-interface-regex: error parsing regexp: missing "
                "closing ): `^eth(`: fix clusters.prod.cilium.l2_interfaces in the site, then terravixens deploy "
                "gitops-prod"
            ),
        ),
    ),
    # flux -----------------------------------------------------------------------------------------------------
    "source-authentication-failed": Case(
        "flux",
        lambda c: c.objects(
            SOURCES,
            [
                k.git_repository(
                    ready="False",
                    reason="AuthenticationFailed",
                    message="failed to checkout and determine revision: unable to clone "
                    "'ssh://git@git.lab.internal/platform/fleet.git': ssh: handshake failed: ssh: unable to "
                    "authenticate",
                )
            ],
        ),
        (
            (
                "flux: problem — GitRepository flux-system/flux-system is not Ready (False, "
                "AuthenticationFailed: failed "
                "to checkout and determine revision: unable to clone 'ssh://git@git.lab.internal/platform/fleet.git': "
                "ssh: handshake failed: ssh: unable to authenticate): the git credentials: flux.prod in the secrets "
                "file, then bump git_credentials_revision and terravixens deploy gitops-prod"
            ),
        ),
    ),
    "kustomization-build-failed": Case(
        "flux",
        lambda c: c.objects(
            KUSTOMIZATIONS,
            [
                k.kustomization(
                    ready="False",
                    reason="BuildFailed",
                    message="kustomization path not found: stat /tmp/kustomization-1/clusters/prod: no such file "
                    "or directory",
                )
            ],
        ),
        (
            (
                "flux: problem — Kustomization flux-system/flux-system is not Ready (False, BuildFailed: kustomization "
                "path not found: stat /tmp/kustomization-1/clusters/prod: no such file or directory): `kubectl -n "
                "flux-system describe kustomization flux-system`"
            ),
        ),
    ),
    "kustomization-progressing": Case(
        "flux",
        lambda c: c.objects(
            KUSTOMIZATIONS,
            [k.kustomization(ready="Unknown", reason="Progressing", message="Reconciliation in progress")],
        ),
        (
            (
                "flux: problem — Kustomization flux-system/flux-system is not Ready (Unknown, Progressing: "
                "Reconciliation in progress): `kubectl -n flux-system describe kustomization flux-system`"
            ),
        ),
    ),
    "kustomization-stale": Case(
        "flux",
        lambda c: c.objects(KUSTOMIZATIONS, [k.kustomization(generation=2, observed=1)]),
        (
            (
                "flux: problem — Kustomization flux-system/flux-system is Ready for generation 1, the object is at "
                "generation 2: `flux reconcile kustomization flux-system -n flux-system` (or wait for its interval)"
            ),
        ),
    ),
    "source-suspended": Case(
        "flux",
        lambda c: c.objects(SOURCES, [k.git_repository(suspend=True)]),
        (
            (
                "flux: problem — GitRepository flux-system/flux-system is suspended: `flux resume source git "
                "flux-system "
                "-n flux-system`"
            ),
        ),
    ),
    "site-source-missing": Case(
        "flux",
        lambda c: c.objects(SOURCES, [k.git_repository("apps", "apps")]),
        ("flux: problem — no GitRepository flux-system/flux-system: terravixens deploy gitops-prod",),
    ),
    "flux-not-installed": Case(
        "flux",
        lambda c: (c.objects(SOURCES, None), c.objects(KUSTOMIZATIONS, None)),
        (
            (
                "flux: problem — Flux is not installed (error: the server doesn't have a resource type "
                '"gitrepositories"): '
                "Flux is the gitops layer's: terravixens deploy gitops-prod"
            ),
            (
                "flux: problem — Flux is not installed (error: the server doesn't have a resource type "
                '"kustomizations"): Flux is the gitops layer\'s: terravixens deploy gitops-prod'
            ),
        ),
    ),
    # logs (since an hour ago) -------------------------------------------------------------------------------------
    "etcd-error-line": Case(
        "logs",
        _log("10.11.1.12", "etcd", ETCD_ERROR),
        (
            (
                f"logs: problem — cp-b etcd: 1 error line since {HOUR_AGO.when:%Y-%m-%dT%H:%M:%SZ}, the last: "
                "failed to "
                f"publish local member to cluster through raft: etcdserver: request timed out: `talosctl -n 10.11.1.12 "
                f"logs etcd`"
            ),
        ),
    ),
    "kubelet-error-line": Case(
        "logs",
        _log("10.11.1.21", "kubelet", KUBELET_INFO, KUBELET_ERROR, KUBELET_INFO),
        (
            (
                f"logs: problem — wk-a kubelet: 1 error line since {HOUR_AGO.when:%Y-%m-%dT%H:%M:%SZ}, the last: "
                f"Container runtime network not ready: `talosctl -n 10.11.1.21 logs kubelet`"
            ),
        ),
    ),
    "controller-runtime-error-line": Case(
        "logs",
        _log("10.11.1.21", "controller-runtime", CONTROLLER_ERROR),
        (
            (
                f"logs: problem — wk-a controller-runtime: 1 error line since {HOUR_AGO.when:%Y-%m-%dT%H:%M:%SZ}, the "
                f"last: {CONTROLLER_MESSAGE[:159]}…: `talosctl -n 10.11.1.21 logs controller-runtime`"
            ),
        ),
    ),
    # certificates ---------------------------------------------------------------------------------------------
    "talosconfig-expires-soon": Case(
        "certificates",
        lambda c: c.certificates(_since_now(10.5), 365),
        (
            (
                f"certificates: problem — talosconfig context prod: client certificate expires on "
                f"{NOW + timedelta(days=10.5):%Y-%m-%d} (in 10 days): bin/terravixens renew-credentials prod "
                "(the talos provider re-issues it in its last month; ADR 0056), or now, while this one works: "
                "`talosctl config new --roles os:admin FILE`"
            ),
        ),
    ),
    "kubeconfig-expired": Case(
        "certificates",
        lambda c: c.certificates(365, _since_now(-3)),
        (
            (
                f"certificates: problem — kubeconfig user admin@prod: client certificate expired on "
                f"{NOW - timedelta(days=3):%Y-%m-%d}: bin/terravixens renew-credentials prod: a new admin kubeconfig, "
                "nothing else of the cluster changed (ADR 0056)"
            ),
        ),
        KUBE_CHECKS,  # the API server refuses an expired certificate: nothing on its side is read
    ),
    "certificate-unreadable": Case(
        "certificates",
        lambda c: c.kubeconfig.write_text(
            re.sub(r"client-certificate-data: \S+", f"client-certificate-data: {BROKEN_PEM}", c.kubeconfig.read_text())
        ),
        (
            (
                "certificates: problem — kubeconfig user admin@prod: cannot read its certificate (not a certificate "
                "(index out of range)): bin/terravixens renew-credentials prod: a new admin kubeconfig, nothing "
                "else of the cluster changed (ADR 0056)"
            ),
        ),
        KUBE_CHECKS,  # kubectl cannot load a kubeconfig without a certificate: nothing is read
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_each_problem_is_found_by_its_check_named_with_its_fix(name, cluster):
    case = CASES[name]
    case.breaks(cluster)
    ran = run(cluster, since=HOUR_AGO)
    assert ran.code == MonitorExit.FOUND, ran.text
    assert {check: status for check, status in ran.status().items() if status != "ok"} == {
        case.check: "problem",
        **dict.fromkeys(case.unread, "not checked"),
    }
    found = [line for line in ran.lines if line.startswith(f"{case.check}: problem")]
    assert found == list(case.lines)
    count = len(found)
    unread = f"not checked: {', '.join(case.unread)}; " if case.unread else ""
    assert ran.lines[-1].startswith(
        f"check prod: {count} problem{'s' if count > 1 else ''} ({case.check}); {unread}ok: "
    )


def test_every_check_has_a_failing_case():
    assert {case.check for case in CASES.values()} == set(CHECKS)


def test_log_lines_before_the_last_apply_info_lines_and_lines_past_the_tail_are_not_counted(cluster):
    old = ETCD_ERROR.replace(_iso(10), _iso(120))
    _log("10.11.1.11", "etcd", *[old] * 3)(cluster)  # errors two hours ago: before the window
    _log("10.11.1.21", "kubelet", KUBELET_ERROR, *[KUBELET_INFO] * 5)(cluster)
    ran = run(cluster, since=HOUR_AGO, tail=5)  # the kubelet's error is past its last 5 lines
    assert ran.code == MonitorExit.IN_SYNC, ran.text
    assert ran.lines[6] == (
        f"logs: ok — no error line in etcd, kubelet, controller-runtime since {HOUR_AGO.when:%Y-%m-%dT%H:%M:%SZ} "
        f"(--since 1h); the last 5 lines of each read"
    )
    assert all(call[call.index("--tail") + 1] == "5" for call in cluster.talos_calls() if "logs" in call)
    ran = run(cluster, since=HOUR_AGO, tail=6)
    assert [line for line in ran.lines if line.startswith("logs:")] == [
        (
            f"logs: problem — wk-a kubelet: 1 error line since {HOUR_AGO.when:%Y-%m-%dT%H:%M:%SZ}, the last: Container "
            f"runtime network not ready: `talosctl -n 10.11.1.21 logs kubelet`"
        )
    ]


def test_without_a_bound_every_error_line_read_counts_even_those_without_a_time(cluster):
    klog = "E0125 10:40:16.865601    1234 kubelet.go:2890] Error syncing pod, skipping"
    _log("10.11.1.22", "kubelet", klog, ETCD_ERROR.replace(_iso(10), _iso(60 * 24 * 30)))(cluster)
    ran = run(cluster)
    assert ran.lines[6] == (
        "logs: problem — wk-b kubelet: 2 error lines in the lines read, the last: failed to publish local member to "
        "cluster through raft: etcdserver: request timed out: `talosctl -n 10.11.1.22 logs kubelet`"
    )
    assert run(cluster, since=HOUR_AGO).code == MonitorExit.IN_SYNC  # a klog text line has no year: not placed


# ------------------------------------------------------------------------------------------------ not checked
def test_no_talosconfig_nor_kubeconfig_output_checks_nothing_and_says_why(cluster):
    tf = FakeTerraform({"platform-prod": {}})
    out = io.StringIO()
    code = check(
        Workspace(cluster.site, root=cluster.folder),
        "prod",
        tf,
        CheckOptions(talosctl=str(cluster.talosctl_path)),
        Console(out=out),
        CheckCommand(synth=False),
        cluster.kubectl(),
    )
    lines = out.getvalue().splitlines()
    assert code == MonitorExit.ERROR
    talos_missing = "platform-prod has no talosconfig output (give one with --talosconfig FILE)"
    kube_missing = "platform-prod has no kubeconfig output (give one with --kubeconfig FILE)"
    assert lines[:4] == [
        f"talos: not checked — talosctl: {talos_missing}",
        f"services: not checked — talosctl: {talos_missing}",
        f"nodes: not checked — kubectl get nodes: {kube_missing}",
        f"cilium: not checked — kubectl get daemonsets: {kube_missing}",
    ]
    assert lines[-2] == (
        "certificates: not checked — read the client certificates: no talosconfig or kubeconfig with one"
    )
    assert lines[-1] == (
        "check prod: not checked: talos, services, nodes, cilium, l2, flux, logs, certificates; ok: none"
    )
    assert ("platform-prod", "output", "-raw", "talosconfig") in tf.calls
    assert cluster.talos_calls() == [] and cluster.kube_calls() == []


def test_the_outputs_are_used_private_and_removed_afterwards(cluster, monkeypatch):
    tf = FakeTerraform(
        {"platform-prod": {}},
        outputs={
            "platform-prod": {
                "talosconfig": cluster.talosconfig.read_text(),
                "kubeconfig": cluster.kubeconfig.read_text(),
            }
        },
    )
    seen = []
    original = cluster.kubectl().run

    class Watching(type(cluster.kubectl())):
        def run(self, arguments, kubeconfig):
            seen.append(
                (
                    Path(kubeconfig),
                    oct(Path(kubeconfig).stat().st_mode & 0o777),
                    oct(Path(kubeconfig).parent.stat().st_mode & 0o777),
                )
            )
            return original(arguments, kubeconfig)

    out = io.StringIO()
    code = check(
        Workspace(cluster.site, root=cluster.folder),
        "prod",
        tf,
        CheckOptions(talosctl=str(cluster.talosctl_path), timeout=30),
        Console(out=out),
        CheckCommand(synth=False),
        Watching(str(cluster.kubectl_path), timeout=30),
    )
    assert code == MonitorExit.IN_SYNC, out.getvalue()
    assert {mode for _, mode, _ in seen} == {"0o600"} and {folder for _, _, folder in seen} == {"0o700"}
    assert not any(path.exists() for path, _, _ in seen)
    talosconfig = cluster.talos_calls()[0][1]
    assert talosconfig != str(cluster.talosconfig) and not Path(talosconfig).exists()


def test_an_unreachable_api_is_asked_once_and_its_checks_say_why(cluster):
    server = cluster.unreachable()
    ran = run(cluster)
    refused = (
        f"kubectl get nodes: The connection to the server {server} was refused - did you specify the right "
        "host or port?"
    )
    assert ran.code == MonitorExit.ERROR
    assert [line for line in ran.lines if "not checked" in line and not line.startswith("check ")] == [
        f"nodes: not checked — {refused}",
        f"cilium: not checked — {refused}",
        f"l2: not checked — not read: {refused}",
        f"flux: not checked — not read: {refused}",
    ]
    assert len(cluster.kube_calls()) == 1
    assert ran.lines[-1] == (
        "check prod: not checked: nodes, cilium, l2, flux; ok: talos, services, logs, certificates"
    )


def test_found_wins_over_not_checked(cluster):
    cluster.unreachable()
    cluster.talos(lambda s: s.update(unreachable=["10.11.1.22"]))
    ran = run(cluster)
    assert ran.code == MonitorExit.FOUND
    assert ran.lines[-1] == (
        "check prod: 1 problem (services); not checked: nodes, cilium, l2, flux; ok: talos, logs, certificates"
    )


def test_a_missing_talosctl_is_said_and_not_retried(cluster):
    missing = cluster.folder / "no-such-talosctl"
    ran = run(cluster, talosctl=str(missing))
    assert ran.code == MonitorExit.ERROR
    assert ran.lines[0] == f"talos: not checked — talosctl health: cannot run {missing}: No such file or directory"
    assert ran.status() == {
        "talos": "not checked",
        "services": "not checked",
        "nodes": "ok",
        "cilium": "ok",
        "l2": "ok",
        "flux": "ok",
        "logs": "not checked",
        "certificates": "ok",
    }
    # no node answered `talosctl services`: no log was read, so the log check cannot pass on nothing
    assert "logs: not checked — talosctl logs: no node answered talosctl services" in ran.lines


def test_a_hung_kubectl_is_stopped_at_its_deadline_and_not_asked_again(tmp_path, site):
    """A kubectl whose child holds its pipes (a credential plugin that never returns): the fake kubectl, since this
    is the process's fault, not the server's (the frozen server is below)."""
    cluster = Cluster(tmp_path, site)
    cluster.kube(lambda s: s.update(hang=["get nodes"]))
    out = io.StringIO()
    started = time.monotonic()
    kubectl = cluster.kubectl()
    kubectl.timeout, kubectl.grace = 2, 1
    code = check(
        Workspace(cluster.site, root=cluster.folder),
        "prod",
        None,
        cluster.options(),
        Console(out=out),
        CheckCommand(),
        kubectl,
    )
    assert time.monotonic() - started < 20
    assert code == MonitorExit.ERROR
    stopped = (
        "kubectl get nodes: kubectl get nodes did not finish within 2s: stopped (SIGTERM, then SIGKILL to its "
        "process group)"
    )
    assert f"nodes: not checked — {stopped}" in out.getvalue().splitlines()
    assert f"flux: not checked — not read: {stopped}" in out.getvalue().splitlines()
    assert len(cluster.kube_calls()) == 1


# ------------------------------------------------------------------------------------------- what a real server says
def test_rbac_that_lets_a_token_list_nodes_but_not_flux_reads_as_not_checked(cluster, kube):
    """The observer token may read Nodes, DaemonSets and Cilium's objects, not Flux's: RBAC refuses, and the flux
    check says it could not look — never ok."""
    kube.write_kubeconfig(cluster.kubeconfig, token=kube.tokens[OBSERVER])
    ran = run(cluster)
    assert ran.code == MonitorExit.ERROR, ran.text
    assert ran.status() == {**dict.fromkeys(CHECKS, "ok"), "flux": "not checked"}
    [flux] = [line for line in ran.lines if line.startswith("flux:")]
    assert flux == (
        "flux: not checked — not read: kubectl get gitrepositories.source.toolkit.fluxcd.io: Error from server "
        '(Forbidden): gitrepositories.source.toolkit.fluxcd.io is forbidden: User "observer" cannot list resource '
        '"gitrepositories" in API group "source.toolkit.fluxcd.io" at the cluster scope; kubectl get '
        "kustomizations.kustomize.toolkit.fluxcd.io: Error from server (Forbidden): "
        'kustomizations.kustomize.toolkit.fluxcd.io is forbidden: User "observer" cannot list resource '
        '"kustomizations" in API group "kustomize.toolkit.fluxcd.io" at the cluster scope'
    )
    assert ran.lines[-1] == (
        "check prod: not checked: flux; ok: talos, services, nodes, cilium, l2, logs, certificates"
    )


def test_an_api_server_that_stops_answering_is_bounded_by_the_deadline(cluster, kube):
    """SIGSTOP: the API server holds its port and answers nothing. kubectl is stopped at its deadline, the API is not
    asked again, every Kubernetes check says why; SIGCONT afterwards (whatever happens)."""
    kubectl = cluster.kubectl()
    kubectl.timeout, kubectl.grace = 3, 1
    out = io.StringIO()
    with kube.frozen():
        started = time.monotonic()
        code = check(
            Workspace(cluster.site, root=cluster.folder),
            "prod",
            None,
            cluster.options(),
            Console(out=out),
            CheckCommand(),
            kubectl,
        )
        took = time.monotonic() - started
    lines = out.getvalue().splitlines()
    assert code == MonitorExit.ERROR, out.getvalue()
    assert took < 3 + 1 + 15  # one kubectl deadline (and its grace), plus the Talos side's fakes
    assert len(cluster.kube_calls()) == 1
    [nodes] = [line for line in lines if line.startswith("nodes:")]
    assert nodes.startswith("nodes: not checked — kubectl get nodes: ")
    reason = nodes.split("kubectl get nodes: ", 1)[1]
    assert [line for line in lines if "not checked" in line and not line.startswith("check ")] == [
        nodes,
        f"cilium: not checked — kubectl get nodes: {reason}",
        f"l2: not checked — not read: kubectl get nodes: {reason}",
        f"flux: not checked — not read: kubectl get nodes: {reason}",
    ]
    assert run(cluster).code == MonitorExit.IN_SYNC  # resumed, it answers again


def test_a_kubeconfig_whose_certificate_has_expired_is_refused_by_the_api_server(cluster):
    cluster.certificates(365, _since_now(-3))
    ran = run(cluster)
    assert ran.code == MonitorExit.FOUND
    [nodes] = [line for line in ran.lines if line.startswith("nodes:")]
    assert nodes == (
        "nodes: not checked — kubectl get nodes: error: You must be logged in to the server (Unauthorized)"
    )


# ------------------------------------------------------------------------------------------------ json, wait, since
def test_json_is_one_document_with_the_same_verdict(cluster):
    _without_node(cluster, "wk-b")
    ran = run(cluster, json_output=True)
    document = json.loads(ran.text)
    assert ran.code == MonitorExit.FOUND and document["exit_code"] == 2 and document["result"] == "problems"
    assert document["schema"] == "terravixens/check/v1"
    assert set(document) == {
        "schema",
        "site",
        "cluster",
        "checked_at",
        "logs_since",
        "logs_since_source",
        "result",
        "exit_code",
        "checks",
        "summary",
    }
    assert (document["site"], document["cluster"], document["logs_since"]) == ("homelab", "prod", None)
    assert [c["check"] for c in document["checks"]] == CHECKS
    nodes = document["checks"][2]
    assert nodes["status"] == "problem" and nodes["problems"] == [
        {
            "what": "no Kubernetes Node wk-b (site node wk-b, 10.11.1.22)",
            "fix": "its kubelet has not registered: `talosctl -n 10.11.1.22 logs kubelet`",
        }
    ]
    assert {c["status"] for c in document["checks"] if c["check"] != "nodes"} == {"ok"}
    assert document["summary"] == run(cluster).lines[-1]


def test_with_a_wait_it_checks_again_until_every_check_passes(cluster):
    _node(cluster, "wk-a", ready="False")
    out = io.StringIO()
    ws = Workspace(cluster.site, root=cluster.folder)

    def heal_after_the_first_pass() -> None:  # the kubelet comes back once the first pass has read the Nodes
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(call[3] == "daemonsets" for call in cluster.kube_calls()):
            time.sleep(0.05)
        _node(cluster, "wk-a", ready="True")

    healer = threading.Thread(target=heal_after_the_first_pass)
    healer.start()
    try:
        code = check(
            ws,
            "prod",
            None,
            cluster.options(wait=60, interval=0.5),
            Console(out=out),
            CheckCommand(),
            cluster.kubectl(),
        )
    finally:
        healer.join()
    text = out.getvalue()
    assert code == MonitorExit.IN_SYNC, text
    assert "check prod: again — check prod: 1 problem (nodes); ok: " in text
    assert text.splitlines()[-1].startswith("check prod: every check passed")
    assert sum(1 for call in cluster.kube_calls() if call[3] == "nodes") == 2


def test_a_wait_ends_with_the_last_pass_when_something_still_fails(cluster):
    _node(cluster, "wk-a", ready="False")
    ran = run(cluster, wait=8, interval=0.5)
    assert ran.code == MonitorExit.FOUND
    assert sum(1 for call in cluster.kube_calls() if call[3] == "nodes") >= 2


def test_the_log_window_starts_at_the_newest_state_backup_of_the_cluster_layers(tmp_path, site):
    ws = Workspace(site, root=tmp_path)
    assert last_apply(ws, "prod") is None
    for layer, name in (
        ("platform-prod", "20260110T100211Z-serial7-deploy.tfstate"),
        ("gitops-prod", "20260110T101502Z-serial3-deploy.tfstate"),
        ("gitops-prod", "20260109T080000Z-serial2-deploy.tfstate"),
        ("hypervisors", "20260111T000000Z-serial9-deploy.tfstate"),  # another layer: not this cluster's
    ):
        folder = tmp_path / "state-backups" / "homelab" / layer
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("{}")
    found = last_apply(ws, "prod")
    assert found == Since(
        datetime(2026, 1, 10, 10, 15, 2, tzinfo=UTC),
        "the last apply of gitops-prod (state backup 20260110T101502Z-serial3-deploy.tfstate)",
    )


def test_since_and_wait_options():
    now = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
    assert parse_since("30m", now) == Since(datetime(2026, 1, 10, 11, 30, tzinfo=UTC), "--since 30m")
    assert parse_since("2026-01-10T10:02:00Z", now).when == datetime(2026, 1, 10, 10, 2, tzinfo=UTC)
    with pytest.raises(OperationError) as bad:
        parse_since("yesterday", now)
    assert bad.value.code == ExitCode.BAD_INPUT and "--since 'yesterday'" in str(bad.value)
    assert parse_wait("0", "--wait") == 0 and parse_wait("5m", "--wait") == 300
    with pytest.raises(OperationError):
        parse_wait("soon", "--wait")


def test_an_unknown_cluster_is_bad_input(cluster):
    with pytest.raises(OperationError) as caught:
        check(Workspace(cluster.site, root=cluster.folder), "qa", None, cluster.options(), Console(out=io.StringIO()))
    assert caught.value.code == ExitCode.BAD_INPUT and "unknown cluster 'qa': use one of prod" in str(caught.value)
