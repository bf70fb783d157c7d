"""A layer is a value (terravixens.layers): each kind's description holds for what the stacks synthesize, and a new
kind is one entry in LAYER_KINDS plus its stack class."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from cdktf import TerraformOutput

from terravixens import layers
from terravixens.layers import LAYER_KINDS, GuardFacts, Layer, LayerKind, layer_named, site_layers, stack_names
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
    assert {name: layers.roles_cluster(site, name) for name in stack_names(site)} == {
        "hypervisors": None,
        "platform-prod": "prod",
        "gitops-prod": "prod",
        "standalone": None,
        "standalone-nest1": None,
    }
    assert layers.guest_layers_on_l0(site) == ["platform-prod", "standalone"]


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
