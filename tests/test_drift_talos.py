"""The Talos side of `terravixens drift`: what providers never read back, per node and per cluster — the running
Talos version and the booted schematic against the site's, etcd's members against the site's control planes, the
Kubernetes Nodes against the site's nodes. Each difference is listed and exits 2 (MonitorExit.FOUND); a reading that
cannot be made says so and exits 1 unless drift was found (found wins); a platform layer without a talosconfig output
is "not deployed" (the integration tests' projection, a cluster not applied yet): nothing to compare, exit 0.

Terraform is tests/fake_terraform.py (its platform layer's state and outputs), talosctl the faithful fake, the
Kubernetes Nodes a real kube-apiserver read by the real kubectl (tests/cluster_fakes.py, tests/control_plane.py). What
a real cluster adds: nodes rebooting between two reads, etcd members listed differently through different control
planes during a membership change, apid's proxy latency.
"""

from __future__ import annotations

import io

import pytest

from terravixens.exitcodes import MonitorExit
from terravixens.operations.console import Console
from terravixens.operations.drift import TalosSide, drift
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl
from tests import kube_objects as k
from tests import support
from tests.cluster_fakes import Cluster
from tests.fake_terraform import FakeTerraform, platform_state

LAYER = "platform-prod"
NO_ROUTE = (
    "error getting version from node 10.11.1.22: rpc error: code = Unavailable desc = connection error: desc = "
    '"transport: Error while dialing: dial tcp 10.11.1.22:50000: connect: no route to host"'
)


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    """The example site synthesized once for the module (drift plans the platform layer's cdk.tf.json)."""
    root = tmp_path_factory.mktemp("drift-talos")
    site = support.site_from(support.example_data())
    Workspace(site, root=root).synth()
    return site, root


@pytest.fixture
def cluster(tmp_path, synthesized, kube) -> Cluster:
    site, _ = synthesized
    return Cluster(tmp_path, site, kube=kube)


def terraform(cluster: Cluster, outputs: bool = True) -> FakeTerraform:
    return FakeTerraform(
        {LAYER: platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")},
        outputs={LAYER: {"talosconfig": cluster.talosconfig.read_text(), "kubeconfig": cluster.kubeconfig.read_text()}}
        if outputs
        else {LAYER: {"talosconfig": None, "kubeconfig": None}},
    )


def run(cluster: Cluster, synthesized, tf: FakeTerraform | None = None, enabled: bool = True) -> tuple[int, list[str]]:
    site, root = synthesized
    out = io.StringIO()
    side = TalosSide(enabled, Talosctl(str(cluster.talosctl_path), timeout=30), cluster.kubectl())
    code = drift(
        Workspace(site, root=root), [LAYER], tf or terraform(cluster), Console(out=out), synth=False, talos=side
    )
    return int(code), [line.split("] ", 1)[-1] for line in out.getvalue().splitlines()]


def differences(lines: list[str]) -> list[str]:
    return [line.strip() for line in lines if line.startswith("  ")]


def test_a_cluster_as_the_site_says_has_no_talos_side_drift(cluster, synthesized):
    code, lines = run(cluster, synthesized)
    assert code == MonitorExit.IN_SYNC
    assert lines[-3:] == [
        f"{LAYER}: drift — in sync",
        f"{LAYER}: talos — in sync (5 nodes, etcd members, Kubernetes Nodes)",
        "no drift",
    ]
    # read-only: version and get extensions per node, etcd members through the first control plane, get nodes
    calls = [" ".join(call[3:6]) for call in cluster.talos_calls()]
    assert sorted(calls) == sorted(
        [f"{a} version" for a in ADDRESSES] + [f"{a} get extensions" for a in ADDRESSES] + ["10.11.1.11 etcd members"]
    )
    assert [call[2:4] for call in cluster.kube_calls()] == [["get", "nodes"]]


ADDRESSES = ["10.11.1.11", "10.11.1.12", "10.11.1.13", "10.11.1.21", "10.11.1.22"]


def _members(cluster: Cluster, change) -> None:
    cluster.talos(lambda s: s.update(members=change(s["members"])))


CASES = {
    "version": (
        lambda c: c.talos(lambda s: s["versions"].update({"10.11.1.22": "v1.11.4"})),
        ["node wk-b: runs Talos v1.11.4, the site says v1.11.5 (terravixens upgrade prod)"],
    ),
    "schematic": (
        lambda c: c.talos(
            lambda s: s["schematics"].update(
                {"10.11.1.12": "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"}
            )
        ),
        [
            (
                "node cp-b: booted schematic 376567988ad3…, the site's image is schematic {schematic}… (terravixens "
                "upgrade prod re-images it)"
            )
        ],
    ),
    "no-factory-image": (
        lambda c: c.talos(lambda s: s["schematics"].pop("10.11.1.21")),
        [
            (
                "node wk-a: booted no Image Factory schematic, the site's image is schematic {schematic}… (terravixens "
                "upgrade prod re-images it)"
            )
        ],
    ),
    "extra-etcd-member": (
        lambda c: _members(
            c, lambda m: [*m, {"id": "3ef7dbf8b1b3b1d4", "hostname": "cp-old", "address": "10.11.1.14"}]
        ),
        [
            (
                "etcd: member cp-old (3ef7dbf8b1b3b1d4, https://10.11.1.14:2380) is not a control plane of the "
                "site: if its machine is gone, take a snapshot first (terravixens snapshot prod), then "
                "`talosctl -n 10.11.1.11 etcd remove-member 3ef7dbf8b1b3b1d4`"
            )
        ],
    ),
    "missing-etcd-member": (
        lambda c: _members(c, lambda m: [x for x in m if x["hostname"] != "cp-c"]),
        [
            (
                "etcd: control plane cp-c (10.11.1.13) is not a member (as seen through cp-a): `talosctl -n 10.11.1.13 "
                "service etcd`; if it was removed (remove-dead-member), its replacement joins on its next deploy"
            )
        ],
    ),
    "member-advertises-another-address": (
        lambda c: _members(c, lambda m: [{**x, "address": "10.0.0.52"} if x["hostname"] == "cp-b" else x for x in m]),
        ["etcd: member cp-b advertises https://10.0.0.52:2380, the site's address of cp-b is 10.11.1.12"],
    ),
    "learner": (
        lambda c: _members(c, lambda m: [{**x, "learner": True} if x["hostname"] == "cp-c" else x for x in m]),
        ["etcd: member cp-c is still a learner (not yet voting): `talosctl -n 10.11.1.13 service etcd`"],
    ),
    "unknown-kubernetes-node": (
        lambda c: c.put("nodes", k.node("wk-old", "10.11.1.29")),
        ["kubernetes: Node wk-old is not a node of the site: once its machine is gone, `kubectl delete node wk-old`"],
    ),
    "missing-kubernetes-node": (
        lambda c: c.remove("nodes", "wk-a"),
        ["kubernetes: no Node wk-a (site node wk-a): `talosctl -n 10.11.1.21 logs kubelet`"],
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_each_talos_side_difference_is_listed_and_is_drift(name, cluster, synthesized):
    breaks, expected = CASES[name]
    breaks(cluster)
    code, lines = run(cluster, synthesized)
    schematic = cluster.nodes[0].schematic[:12]
    assert code == MonitorExit.FOUND
    assert differences(lines) == [line.format(schematic=schematic) for line in expected]
    assert f"{LAYER}: talos — 1 difference (5 nodes, etcd members, Kubernetes Nodes)" in lines
    assert lines[-1] == f"drift in: {LAYER}"


def test_several_differences_are_all_listed(cluster, synthesized):
    for name in ("version", "extra-etcd-member", "unknown-kubernetes-node"):
        CASES[name][0](cluster)
    code, lines = run(cluster, synthesized)
    assert code == MonitorExit.FOUND and len(differences(lines)) == 3
    assert f"{LAYER}: talos — 3 differences (5 nodes, etcd members, Kubernetes Nodes)" in lines


def test_a_node_that_does_not_answer_is_could_not_tell(cluster, synthesized):
    cluster.talos(lambda s: s.update(unreachable=["10.11.1.22"]))
    code, lines = run(cluster, synthesized)
    assert code == MonitorExit.ERROR
    assert f"{LAYER}: talos — could not tell (5 nodes, etcd members, Kubernetes Nodes)" in lines
    assert differences(lines) == [f"could not read: wk-b (10.11.1.22): talosctl version: exit 1: {NO_ROUTE}"]
    assert lines[-1] == f"could not tell: {LAYER} (talos)"


def test_found_wins_over_could_not_tell(cluster, synthesized):
    cluster.talos(lambda s: s.update(unreachable=["10.11.1.22"]))
    CASES["version"][0](cluster)
    cluster.talos(lambda s: s["versions"].update({"10.11.1.21": "v1.11.4"}))
    code, lines = run(cluster, synthesized)
    assert code == MonitorExit.FOUND
    assert "node wk-a: runs Talos v1.11.4, the site says v1.11.5 (terravixens upgrade prod)" in differences(lines)
    assert lines[-1] == f"drift in: {LAYER}; could not tell: {LAYER} (talos)"


def test_an_unreachable_api_is_could_not_tell(cluster, synthesized):
    server = cluster.unreachable()
    code, lines = run(cluster, synthesized)
    assert code == MonitorExit.ERROR
    assert differences(lines) == [
        (
            f"could not read: kubectl get nodes: The connection to the server {server} was refused - did you "
            "specify the right host or port?"
        )
    ]


def test_terraform_only_reads_nothing_from_the_cluster(cluster, synthesized):
    CASES["version"][0](cluster)
    code, lines = run(cluster, synthesized, enabled=False)
    assert code == MonitorExit.IN_SYNC and lines[-1] == "no drift"
    assert cluster.talos_calls() == [] and cluster.kube_calls() == []
    assert not any(": talos —" in line for line in lines)


def test_no_talosconfig_output_is_not_deployed_not_an_error(cluster, synthesized):
    tf = terraform(cluster, outputs=False)
    code, lines = run(cluster, synthesized, tf)
    assert code == MonitorExit.IN_SYNC
    assert (
        f"{LAYER}: talos — not deployed: {LAYER} has no talosconfig output (not applied yet, or destroyed); nothing "
        "to compare"
    ) in lines
    assert cluster.talos_calls() == [] and cluster.kube_calls() == []
    assert (LAYER, "output", "-raw", "talosconfig") in tf.calls


def test_an_output_terraform_cannot_read_is_could_not_tell(cluster, synthesized):
    from terravixens.operations.terraform import Result

    class Broken(FakeTerraform):
        def run(self, workdir, *args):
            if args[:1] == ("output",):
                self.calls.append((workdir.name, *args))
                return Result(1, "", "Error: Failed to load state: AccessDenied: Access Denied\n\tstatus code: 403")
            return super().run(workdir, *args)

    tf = Broken({LAYER: platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")})
    code, lines = run(cluster, synthesized, tf)
    assert code == MonitorExit.ERROR
    assert differences(lines)[0].startswith(
        "could not read: terraform output talosconfig: Error: Failed to load state: AccessDenied"
    )
    assert cluster.talos_calls() == []
