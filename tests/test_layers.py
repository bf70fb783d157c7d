"""A layer is a value (terravixens.layers): each kind's description holds for what the stacks synthesize, and a new
kind is one entry in LAYER_KINDS plus its stack class."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest
import yaml
from cdktf import TerraformOutput

from terravixens import layers
from terravixens.exitcodes import ExitCode
from terravixens.guard import site_roles
from terravixens.guard.plan import Plan
from terravixens.layers import (
    LAYER_KINDS,
    GuardFacts,
    Layer,
    LayerKind,
    SiteLayers,
    layer_named,
    site_layers,
    stack_names,
)
from terravixens.operations.acceptance import checked_after
from terravixens.operations.console import Console
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.steps import PLAN_FILE, LayerPlan, guard_context
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.stacks import LayerStack, build_app
from terravixens.stacks.backend import PROJECT_ROOT_FROM_STACK
from tests import support
from tests.spec_support import SITE as STANDALONE_SITE

# The provider each provider block of the synthesized JSON is (its key under `provider`).
PROVIDER_BLOCKS = {"proxmox": "proxmox", "talos": "talos", "helm": "helm", "kubernetes": "kubernetes"}


def two_clusters() -> dict:
    data = support.example_data()
    lab = copy.deepcopy(data["clusters"]["prod"])
    lab["endpoint_vip"] = "10.21.1.10"
    lab["control_planes"] = {
        "lab-a": {"hypervisor": "pve2", "vm_id": 2101, "networks": {"vlans": {111: {"address": "10.21.1.11/24"}}}}
    }
    lab["workers"] = {}
    lab["cilium"] = {}
    lab.pop("flux")
    data["clusters"]["lab"] = lab
    return data


SITES = {
    "example": support.example_data,
    "standalone": lambda: yaml.safe_load(STANDALONE_SITE.read_text()),
    "two clusters": two_clusters,
}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    """Each site's layers and the JSON of each of its stacks, synthesized once."""
    found = {}
    for name, data in SITES.items():
        site = support.site_from(data())
        outdir = tmp_path_factory.mktemp(name.replace(" ", "-"))
        found[name] = (site, support.synth(site, outdir), json.loads((outdir / "manifest.json").read_text()))
    return found


def test_apply_order_is_level_then_cluster_then_kind():
    assert stack_names(support.site_from(two_clusters())) == [
        "hypervisors",
        "platform-lab",
        "gitops-lab",
        "platform-prod",
        "gitops-prod",
    ]
    assert stack_names(support.site_from(yaml.safe_load(STANDALONE_SITE.read_text()))) == [
        "hypervisors",
        "standalone",
        "standalone-nest1",
    ]


@pytest.mark.parametrize("name", SITES)
def test_each_layer_comes_after_the_layer_it_names(synthesized, name):
    site, _, manifest = synthesized[name]
    seen: set[str] = set()
    for layer in site_layers(site):
        assert layer.after is None or layer.after in seen, layer
        assert manifest["stacks"][layer.name]["dependencies"] == ([layer.after] if layer.after else [])
        seen.add(layer.name)
    assert sorted(manifest["stacks"]) == sorted(stack_names(site))


@pytest.mark.parametrize("name", SITES)
def test_each_stack_declares_the_providers_and_the_backend_of_its_kind(synthesized, name):
    site, stacks, _ = synthesized[name]
    for layer in site_layers(site):
        document = stacks[layer.name]
        assert sorted(document["provider"]) == sorted(PROVIDER_BLOCKS[p] for p in layer.kind.providers), layer.name
        assert document["terraform"]["backend"] == {
            "local": {"path": f"{PROJECT_ROOT_FROM_STACK}/{layer.state_path(site.state)}"}
        }


def test_the_s3_key_of_each_layer_is_its_description():
    data = support.example_data()
    data["state"] = {"backend": "s3", "s3": {"endpoint": "https://127.0.0.1:9000", "bucket": "tfstate"}}
    site = support.site_from(data)
    stacks = support.synth(site)
    assert {name: stack["terraform"]["backend"]["s3"]["key"] for name, stack in stacks.items()} == {
        layer.name: layer.state_key(site.state, site.site) for layer in site_layers(site)
    }


def test_what_the_guard_knows_of_each_layer():
    data = support.example_data()
    data["standalone"] = yaml.safe_load(STANDALONE_SITE.read_text())["standalone"]
    site = support.site_from(data)
    facts = {layer.name: layer.guard for layer in site_layers(site)}
    assert facts == {
        "hypervisors": GuardFacts(l0_usage=True),
        "platform-prod": GuardFacts(roles=True, guests_on_l0=True),
        "gitops-prod": GuardFacts(roles=True),
        "standalone": GuardFacts(guests_on_l0=True),
        "standalone-nest1": GuardFacts(),  # its guests run on a nested host, not on L0
    }
    assert {layer.name: layer.cluster for layer in site_layers(site) if layer.cluster} == {
        "platform-prod": "prod",
        "gitops-prod": "prod",
    }
    assert {layer.name: layer.roles_cluster for layer in site_layers(site)} == {
        "hypervisors": None,
        "platform-prod": "prod",
        "gitops-prod": "prod",
        "standalone": None,
        "standalone-nest1": None,
    }
    assert [layer.name for layer in SiteLayers.of(site).guests_on_l0()] == ["platform-prod", "standalone"]


def test_every_kind_names_a_layer_stack_that_builds():
    for kind in LAYER_KINDS:
        stack = kind.stack_class()
        assert issubclass(stack, LayerStack), kind.name
        assert "build" in vars(stack), f"{kind.stack} does not implement build()"
        assert kind.level in layers.LEVELS


def test_a_layer_the_site_has_not_is_named_with_the_ones_it_has(example_site):
    with pytest.raises(
        KeyError,
        match="no layer 'platform-lab' in site 'homelab': its layers are hypervisors, platform-prod, gitops-prod",
    ):
        layer_named(example_site, "platform-lab")


class ToyStack(LayerStack):
    """A toy layer kind: one output per cluster, after its gitops layer."""

    def build(self) -> None:
        TerraformOutput(self, "cluster", value=self.cluster_name)


def _toys(kind: LayerKind, site) -> list[Layer]:
    return [
        Layer(f"toy-{cluster}", kind, after=f"gitops-{cluster}", guard=kind.guard, cluster=cluster)
        for cluster in sorted(site.clusters)
    ]


def test_a_new_layer_kind_is_one_entry(monkeypatch, tmp_path):
    """What `terravixens stacks`, the app, the manifest and the state keys make of a kind added to LAYER_KINDS and
    nothing else (the closing note of issue 16 counts this diff)."""
    toy = LayerKind("toy", "L1", f"{__name__}:ToyStack", (), GuardFacts(), _toys)
    monkeypatch.setattr(layers, "LAYER_KINDS", (*LAYER_KINDS, toy))
    site = support.site_from(two_clusters())
    assert stack_names(site) == [
        "hypervisors",
        "platform-lab",
        "gitops-lab",
        "toy-lab",
        "platform-prod",
        "gitops-prod",
        "toy-prod",
    ]
    build_app(site, str(tmp_path)).synth()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["stacks"]["toy-prod"]["dependencies"] == ["gitops-prod"]
    document = json.loads(Path(tmp_path, "stacks", "toy-lab", "cdk.tf.json").read_text())
    assert document["output"]["cluster"]["value"] == "lab"
    assert document["terraform"]["backend"] == {"local": {"path": "../../../state/toy-lab.tfstate"}}


# ------------------------------------------------------------------------------------------ names are formatted once
# Where a layer's name may be formatted: its description (and the L2 layout it reads) and the stacks.
NAMES_FORMATTED_IN = ("terravixens/layers.py", "terravixens/standalone/layout.py", "terravixens/stacks/")
NAME_FORMATTERS = {"platform_stack_name", "gitops_stack_name", "standalone_stack_name"}


def formatted_layer_names(path: Path, kinds: list[str]) -> list[str]:
    """Where the module builds a layer's name by hand: a call of a name formatter, an f-string piece '<kind>-{…}',
    or a comparison with the hypervisors layer's name (the facts of a layer come from its value)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Name | ast.Attribute | ast.alias):
            name = (
                node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else node.name
            )
            if name in NAME_FORMATTERS:
                found.append(f"line {node.lineno}: {name}" if not isinstance(node, ast.alias) else f"imports {name}")
        elif isinstance(node, ast.JoinedStr):
            for piece, following in zip(node.values, node.values[1:], strict=False):
                if (
                    isinstance(piece, ast.Constant)
                    and isinstance(following, ast.FormattedValue)
                    and any(str(piece.value).endswith(f"{kind}-") for kind in kinds)
                ):
                    found.append(f"line {node.lineno}: f-string {piece.value!r}{{…}}")
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if (isinstance(operand, ast.Name) and operand.id == "HYPERVISORS") or (
                    isinstance(operand, ast.Constant) and operand.value == layers.HYPERVISORS
                ):
                    found.append(f"line {node.lineno}: compares with the hypervisors layer's name")
    return found


def test_no_module_outside_the_layers_formats_a_layer_name():
    root = Path(layers.__file__).resolve().parent.parent
    kinds = [kind.name for kind in LAYER_KINDS]
    found = {}
    for path in sorted((root / "terravixens").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if "/_bindings/" in relative or relative.startswith(NAMES_FORMATTED_IN):
            continue
        where = formatted_layer_names(path, kinds)
        if where:
            found[relative] = where
    assert found == {}


def test_the_name_check_can_fail(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "from terravixens.layers import HYPERVISORS, platform_stack_name\n"
        "def f(layer, name):\n"
        "    return layer == HYPERVISORS or layer == f'gitops-{name}' or platform_stack_name(name)\n"
    )
    assert sorted(formatted_layer_names(module, ["gitops"])) == [
        "imports platform_stack_name",
        "line 3: compares with the hypervisors layer's name",
        "line 3: f-string 'gitops-'{…}",
        "line 3: platform_stack_name",
    ]


# ------------------------------------------------------------------------------------ the operations on a new kind
TOY_VM = {
    "mode": "managed",
    "type": "proxmox_virtual_environment_vm",
    "name": "toy_vm",
    "instances": [
        {"attributes": {"name": "toy-vm", "node_name": "pve2", "vm_id": 4242, "network_device": [{"bridge": "vmbr9"}]}}
    ],
}


class NoTerraform(Terraform):
    """The guard of these layers reads local states where they lie: Terraform is never run."""

    def _run(self, workdir, args, on_line=None):
        raise AssertionError(f"terraform {' '.join(args)} ran in {workdir}")


@pytest.fixture()
def toy_workspace(monkeypatch, tmp_path):
    """The two-cluster site with a toy kind whose layers have roles and guests on L0, synthesized: what the guard
    of each layer knows comes from the layer's facts, not from its name."""
    toy = LayerKind("toy", "L1", f"{__name__}:ToyStack", (), GuardFacts(roles=True, guests_on_l0=True), _toys)
    monkeypatch.setattr(layers, "LAYER_KINDS", (*LAYER_KINDS, toy))
    ws = Workspace(support.site_from(two_clusters()), root=tmp_path)
    ws.synth()
    state = tmp_path / ws.site_layers.named("toy-lab").state_path(ws.site.state)
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"version": 4, "serial": 1, "lineage": "toy", "resources": [TOY_VM]}))
    return ws


def test_the_guard_of_every_layer_of_a_new_kind_comes_from_its_facts(toy_workspace):
    ws = toy_workspace
    console = Console(out=io.StringIO())
    contexts = {}
    for layer in ws.layers():
        planned = LayerPlan(layer.name, ws.stack_dir(layer.name) / PLAN_FILE, False, Plan((), ()))
        contexts[layer.name] = guard_context(ws, NoTerraform(), console, layer, planned, frozenset())
    roles = {cluster: site_roles(ws.site, ws.platform_layer(cluster)) for cluster in ("lab", "prod")}
    assert roles["lab"] == {"lab-a": "controlplane"} and roles["prod"]["cp-a"] == "controlplane"
    assert {name: context.roles for name, context in contexts.items()} == {
        "hypervisors": {},
        "platform-lab": roles["lab"],
        "gitops-lab": roles["lab"],
        "toy-lab": roles["lab"],
        "platform-prod": roles["prod"],
        "gitops-prod": roles["prod"],
        "toy-prod": roles["prod"],
    }
    assert [name for name, context in contexts.items() if context.usage is not None] == ["hypervisors"]
    usage = contexts["hypervisors"].usage
    assert usage is not None
    # L0's guard reads the toy layer's deployed state: its VM's bridge and machine are in use.
    assert usage.bridge_users("pve2", "vmbr9") == {"VM toy-vm in toy-lab (deployed)"}
    assert usage.machines[("pve2", 4242)] == ("toy-lab", "toy-vm")
    assert checked_after(ws.layers(["gitops-prod", "toy-prod"])) == {"toy-prod": "prod"}


@pytest.mark.integration
def test_a_dry_run_deploy_of_every_layer_of_a_new_kind(toy_workspace):
    """The real Terraform CLI plans each toy layer (no provider to install: its only resource is an output), the
    guard judges it with its facts, nothing is applied."""
    ws = toy_workspace
    out = io.StringIO()
    toys = [layer.name for layer in ws.layers() if layer.kind.name == "toy"]
    code = deploy(ws, toys, Terraform(), DeployOptions(dry_run=True, synth=False), Console(out=out))
    assert code == ExitCode.OK
    text = out.getvalue()
    for name in toys:
        assert f"{name}: guard — ok" in text and f"{name}: dry run — nothing applied" in text, text
    assert text.splitlines()[-1] == "dry run: nothing applied (toy-lab, toy-prod planned)"
    assert not list(ws.root.rglob("*.tfplan"))
