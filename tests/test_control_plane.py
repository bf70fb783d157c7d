"""The real control plane the day-2 tests run against (tests/control_plane.py, docs/adr/0058): the binaries are the
versions their module files pin, the CRDs come from the module cache at the pinned versions, and every process it
starts is stopped — by the fixture, by a close that meets a frozen process, and when the test process itself is killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import control_plane as cp
from tests.processes import ends_soon

ROOT = cp.ROOT


def _required(module_file: str, module: str) -> str:
    return re.search(rf"^\s*{re.escape(module)} (v\S+)", (ROOT / module_file).read_text(), re.M).group(1)


# ---------------------------------------------------------------------------------------------------------- tools
def test_kube_apiserver_and_kubectl_are_the_kubernetes_release_their_module_file_pins():
    pinned = _required("tools/kube/go.mod", "k8s.io/kubernetes")
    assert pinned == "v1.34.2"
    server = subprocess.run([str(cp.binary(cp.APISERVER)), "--version"], capture_output=True, text=True, timeout=60)
    assert server.stdout.strip() == f"Kubernetes {pinned}"
    client = subprocess.run(
        [str(cp.binary(cp.KUBECTL)), "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    version = json.loads(client.stdout)["clientVersion"]
    assert (version["gitVersion"], version["major"], version["minor"]) == (pinned, "1", "34")
    # every staging module replaced by its published twin at the matching v0 version
    text = (ROOT / "tools" / "kube" / "go.mod").read_text()
    replaced = re.findall(r"^\s*(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", text, re.M)
    assert len(replaced) == 31 and {(a == b, v) for a, b, v in replaced} == {(True, "v0.34.2")}


def test_etcd_and_etcdutl_are_the_release_their_module_file_pins():
    pinned = _required("tools/etcd/go.mod", "go.etcd.io/etcd/server/v3")
    assert pinned == "v3.6.16"
    server = subprocess.run([str(cp.binary(cp.ETCD)), "--version"], capture_output=True, text=True, timeout=60)
    assert server.stdout.splitlines()[0] == f"etcd Version: {pinned[1:]}"
    tool = subprocess.run([str(cp.binary(cp.ETCDUTL)), "version"], capture_output=True, text=True, timeout=60)
    assert tool.stdout.splitlines()[0] == f"etcdutl version: {pinned[1:]}"


def test_the_etcd_the_tests_run_is_the_etcd_whose_code_judges_snapshots():
    """tools/etcd (the test's etcd, etcdutl and machined) and tools/etcd-snapshot (the product's snapshot judge, ADR
    0030) are two modules on purpose — one ships with terravixens, the other only serves the tests — but a snapshot
    the real cluster streams must be judged by the same etcd code that wrote it: every go.etcd.io module both
    require is at the same version."""
    both = {}
    for tool in ("etcd", "etcd-snapshot"):
        text = (ROOT / "tools" / tool / "go.mod").read_text()
        both[tool] = dict(re.findall(r"^\s*(go\.etcd\.io/\S+) (v\S+)", text, re.M))
    shared = sorted(both["etcd"].keys() & both["etcd-snapshot"].keys())
    assert "go.etcd.io/etcd/server/v3" in shared and "go.etcd.io/etcd/etcdutl/v3" in shared
    assert {module: both["etcd"][module] for module in shared} == {
        module: both["etcd-snapshot"][module] for module in shared
    }


@pytest.mark.parametrize(
    ("binary", "module_file"),
    [
        ("tools/kube/bin/kube-apiserver", "tools/kube/go.mod"),
        ("tools/kube/bin/kubectl", "tools/kube/go.sum"),
        ("tools/etcd/bin/etcd", "tools/etcd/go.mod"),
        ("tools/etcd/bin/machined", "tools/etcd/machined/main.go"),
        ("tools/crds/bin/modules.json", "tools/crds/go.mod"),
    ],
)
def test_make_rebuilds_a_tool_only_when_its_module_file_changes(binary, module_file):
    """`make -q` answers 0 when the tool is up to date; treating its module file as new (-W) rebuilds it."""
    make = ["make", "--no-print-directory", "-C", str(ROOT)]
    assert subprocess.run([*make, "-q", binary], capture_output=True, timeout=60).returncode == 0
    dry = subprocess.run([*make, "-n", "-W", module_file, binary], capture_output=True, text=True, timeout=60)
    command = "go mod download -json" if binary.endswith(".json") else "go build -mod=readonly"
    assert command in dry.stdout and Path(binary).name.split(".")[0] in dry.stdout


def test_kube_apiserver_and_kubectl_are_built_with_the_makefile_s_compiler_flags_and_the_benchmark_with_the_same():
    """KUBE_GCFLAGS (no inlining outside the standard library, ADR 0058's cold-build budget) reaches both builds,
    and benchmarks/control_plane.py's cold build uses what the Makefile says, not a copy."""
    from benchmarks import control_plane as benchmark

    make = ["make", "--no-print-directory", "-C", str(ROOT), "-n", "-B"]
    for binary in ("tools/kube/bin/kube-apiserver", "tools/kube/bin/kubectl"):
        dry = subprocess.run([*make, binary], capture_output=True, text=True, timeout=60).stdout
        assert "-gcflags=all=-l -gcflags=std= -ldflags" in dry, dry
    assert benchmark.kube_gcflags() == ["-gcflags=all=-l", "-gcflags=std="]
    assert [build[3] for build in benchmark.BUILDS if build[0] == "tools/kube"] == [benchmark.kube_gcflags()] * 2


def test_make_tools_and_setup_test_include_the_control_plane():
    dry = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "-n", "-B", "tools"], capture_output=True, text=True
    )
    for built in ("kube-apiserver", "kubectl", "./etcd", "etcdutl", "./machined", "go mod download -json"):
        assert built in dry.stdout, built
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^setup-test:\n(?:\t.*\n)*?.*\btools\b", makefile, re.M)


def test_the_crds_are_read_from_the_module_cache_at_the_pinned_versions():
    versions = cp.crd_versions()
    assert versions == {
        "github.com/cilium/cilium": "v1.18.4",
        "github.com/fluxcd/kustomize-controller": "v1.7.3",
        "github.com/fluxcd/source-controller": "v1.7.3",
    }
    files = cp.crd_files()
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    for (module, _), path in zip(cp.CRDS, files, strict=True):
        assert path.is_file() and str(path).startswith(f"{cache}/{module}@{versions[module]}/")
        assert not os.access(path, os.W_OK) or os.geteuid() == 0  # the module cache is read-only (root may write)
    assert not list((ROOT / "tests").rglob("*toolkit.fluxcd.io*")), "CRDs are never copied into the repository"
    # The Cilium module is the one the gitops decoder judges with, and the chart the sites install.
    assert versions["github.com/cilium/cilium"] == _required("tools/k8s-decode/go.mod", "github.com/cilium/cilium")


# ---------------------------------------------------------------------------------------------------------- fixture
def test_the_control_plane_serves_the_crds_with_rbac_and_three_etcd_members(kube):
    served = kube.kubectl("get", "crd", "-o", "name")
    assert sorted(served.stdout.split()) == sorted(
        f"customresourcedefinition.apiextensions.k8s.io/{d['metadata']['name']}" for d in kube.crd_documents()
    )
    version = json.loads(kube.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert version == _required("tools/kube/go.mod", "k8s.io/kubernetes")
    assert sorted(m["name"] for m in kube.etcd.member_list()) == ["etcd-a", "etcd-b", "etcd-c"]
    # RBAC is on: the observer token may list Nodes, not Flux's objects
    path = kube.write_kubeconfig(kube.folder / "observer.kubeconfig", token=kube.tokens[cp.OBSERVER])
    kubectl = [str(cp.KUBECTL), "--kubeconfig", str(path)]
    env = {**os.environ, "KUBECACHEDIR": str(kube.folder / "kube-cache")}
    assert subprocess.run([*kubectl, "get", "nodes"], capture_output=True, env=env, timeout=60).returncode == 0
    refused = subprocess.run(
        [*kubectl, "get", "kustomizations", "-A"], capture_output=True, text=True, env=env, timeout=60
    )
    assert refused.returncode == 1 and "(Forbidden)" in refused.stderr and 'User "observer"' in refused.stderr


def test_close_stops_every_process_even_a_frozen_one(tmp_path):
    cluster = cp.EtcdCluster(tmp_path / "etcd", ["solo"]).start()
    process = cluster.members["solo"].process
    cluster.pause("solo")
    cluster.close()
    assert ends_soon(process.pid) and process.returncode is not None
    assert not [entry for entry in cp.leftovers() if entry.startswith(f"{process.pid} ")]


CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from tests import control_plane as cp
cluster = cp.EtcdCluster(cp.Path({folder!r}), ["solo"]).start()
print(cluster.members["solo"].process.pid, flush=True)
time.sleep(600)
"""


def test_every_process_dies_with_the_test_process_that_started_it(tmp_path):
    """A test process killed outright (SIGKILL: no finaliser runs) takes its processes with it (PR_SET_PDEATHSIG)."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(root=str(ROOT), folder=str(tmp_path / "etcd"))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        etcd = int(child.stdout.readline())
        assert cp.running(etcd)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        assert ends_soon(etcd, within=10), f"etcd {etcd} outlived the process that started it"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_control_plane_that_cannot_start_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(cp, "APISERVER", tmp_path / "missing-kube-apiserver")
    plane = cp.ControlPlane(tmp_path / "plane")
    began = time.monotonic()
    with pytest.raises(cp.ToolMissing, match="missing-kube-apiserver is missing: run `make tools`"):
        plane.start()
    plane.close()
    assert time.monotonic() - began < 5 and plane.etcd is None  # nothing was started
