"""terravixens as a library: a platform team composes the constructs in a stack of its own, without a site file."""

from __future__ import annotations

import json
from pathlib import Path

from cdktf import App, LocalBackend, TerraformOutput, TerraformStack, Testing
from constructs import Construct

from terravixens._bindings.proxmox.provider import ProxmoxProvider
from terravixens._bindings.talos.provider import TalosProvider
from terravixens.config.model import Cluster, Node, NodeNetworks, VlanInterface
from terravixens.config.model import Hypervisor as HypervisorSpec
from terravixens.config.placement import place
from terravixens.constructs import (
    ClusterConfig,
    ClusterConfigProps,
    ControlPlane,
    ControlPlaneProps,
    Hypervisor,
    HypervisorProps,
    TalosNode,
    TalosNodeProps,
)
from terravixens.rules import apply_rules
from tests.library_stacks import EdgeStack

# The JSON a user's stack (FleetStack below) synthesized on main 5fbb5eb, before a node's blocks could be written from
# Python (ADR 0057): the constructs' public API (scope, id, props, `node.vm` / `node.apply`, construct paths,
# logical ids) must keep giving these very bytes.
FLEET_JSON = Path(__file__).parent / "fixtures" / "library_use" / "fleet.cdk.tf.json"


def test_constructs_compose_in_a_users_stack(tmp_path):
    app = App(outdir=str(tmp_path))
    EdgeStack(app, "edge")
    app.synth()
    stack = json.loads((tmp_path / "stacks" / "edge" / "cdk.tf.json").read_text())
    resources = {f"{kind}.{name}" for kind, items in stack["resource"].items() for name in items}
    assert resources == {
        "proxmox_download_file.hv_edge1_image_v1-11-5_ce4c980550dd",
        "proxmox_virtual_environment_vm.node_solo_vm",
        "talos_machine_configuration_apply.node_solo_apply",
        "talos_machine_secrets.cluster_secrets",
        "talos_machine_bootstrap.cluster_bootstrap",
        "talos_cluster_kubeconfig.cluster_kubeconfig",
        "terraform_data.cluster_membership",
    }
    apply = stack["resource"]["talos_machine_configuration_apply"]["node_solo_apply"]
    assert apply["node"] == "127.0.10.2" and apply["endpoint"] == "127.0.10.2"
    assert apply["on_destroy"] == {"reset": True, "graceful": True, "reboot": False}


class FleetStack(TerraformStack):
    """A user's own stack using more of the API: a control plane and a worker, the worker inside a construct of the
    user's, the user's override on a node's VM and an output reading a node's apply."""

    def __init__(self, scope, id):
        super().__init__(scope, id)
        LocalBackend(self, path="fleet.tfstate")
        ProxmoxProvider(self, "proxmox", endpoint="https://127.0.0.1:8006/")
        TalosProvider(self, "talos")
        spec = HypervisorSpec(node_name="pve1")
        Hypervisor(self, "pve1", HypervisorProps(name="pve1", spec=spec, talos_versions=frozenset({"v1.11.5"})))
        cp = Node(
            hypervisor="pve1", vm_id=910, networks=NodeNetworks(vlans={111: VlanInterface(address="127.0.11.2/24")})
        )
        wk = Node(
            hypervisor="pve1",
            vm_id=920,
            mac_address="BC:24:11:00:00:20",
            tags=["Edge"],
            networks=NodeNetworks(vlans={111: VlanInterface(address="127.0.11.20/24")}),
        )
        cluster = Cluster(
            endpoint_vip="127.0.11.1",
            talos_version="v1.11.5",
            kubernetes_version="1.34.2",
            control_planes={"cp1": cp},
            workers={"wk1": wk},
        )
        config = ClusterConfig(self, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=cluster))
        cp1 = TalosNode(
            self,
            "cp1",
            TalosNodeProps(
                placed=place("cp1", "controlplane", cp, cluster, spec), cluster=cluster, cluster_config=config
            ),
        )
        pool = Construct(self, "pool")
        wk1 = TalosNode(
            pool,
            "wk1",
            TalosNodeProps(placed=place("wk1", "worker", wk, cluster, spec), cluster=cluster, cluster_config=config),
        )
        wk1.vm.add_override("cpu.units", 2048)
        TerraformOutput(self, "cp1_apply_id", value=cp1.apply.id)
        ControlPlane(
            self,
            "control_plane",
            ControlPlaneProps(
                cluster_name="fleet",
                cluster_config=config,
                control_planes={"cp1": cp1},
                workers={"wk1": wk1},
                bootstrap_node="cp1",
            ),
        )
        self.nodes = (cp1, wk1)
        apply_rules(self)


def without_metadata(value):
    if isinstance(value, dict):
        return {key: without_metadata(item) for key, item in value.items() if key != "//"}
    if isinstance(value, list):
        return [without_metadata(item) for item in value]
    return value


def synth_fleet(outdir: Path) -> tuple[FleetStack, bytes]:
    app = App(outdir=str(outdir))
    stack = FleetStack(app, "fleet")
    app.synth()
    return stack, (outdir / "stacks" / "fleet" / "cdk.tf.json").read_bytes()


def test_a_users_stack_synthesizes_the_bytes_it_did_before_blocks_from_python(tmp_path):
    stack, written = synth_fleet(tmp_path)
    assert written == FLEET_JSON.read_bytes()
    # Asked of cdktf directly, the same document (Testing.synth leaves cdktf's "//" metadata out); the constructs
    # keep their ids and elements.
    assert json.loads(Testing.synth(stack)) == without_metadata(json.loads(written))
    for node in stack.nodes:
        assert [child.node.id for child in node.node.children] == ["vm", "apply"]
        assert node.vm.friendly_unique_id == f"node_{node.node_name}_vm"
        assert node.apply.friendly_unique_id == f"node_{node.node_name}_apply"
