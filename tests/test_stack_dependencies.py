"""Layers depend on each other in apply order, in cdktf's manifest: `cdktf deploy '*'` applies hypervisors, then each
platform layer, then its gitops layer (and destroys in the reverse order)."""

import copy
import json
import tempfile
from pathlib import Path

from tests import support


def manifest(site) -> dict:
    outdir = Path(tempfile.mkdtemp(prefix="tv-manifest-"))
    support.synth(site, outdir)
    manifest = json.loads((outdir / "manifest.json").read_text())
    return {name: stack["dependencies"] for name, stack in manifest["stacks"].items()}


def test_layers_depend_on_the_layer_below(example_site):
    assert manifest(example_site) == {
        "hypervisors": [],
        "platform-prod": ["hypervisors"],
        "gitops-prod": ["platform-prod"],
    }


def test_each_cluster_has_its_own_chain():
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
    assert manifest(support.site_from(data)) == {
        "hypervisors": [],
        "platform-lab": ["hypervisors"],
        "gitops-lab": ["platform-lab"],
        "platform-prod": ["hypervisors"],
        "gitops-prod": ["platform-prod"],
    }
