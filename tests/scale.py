"""Sites of any size for the synth benchmark and the tests: the example site with 3 control planes and N-3 workers."""

from __future__ import annotations

import copy

import yaml

from tests.support import EXAMPLE_SITE

CONTROL_PLANES = 3


def scaled_site_data(nodes: int) -> dict:
    """The example site (3 control planes) with `nodes - 3` workers cloned from wk-a, spread over both hypervisors,
    each with its own VM id and address, and a Cilium pool (so every construct of the app is exercised)."""
    if nodes < CONTROL_PLANES + 1:
        raise ValueError(
            f"a scaled site has {CONTROL_PLANES} control planes and at least one worker: got {nodes} nodes"
        )
    data = yaml.safe_load(EXAMPLE_SITE.read_text())
    cluster = data["clusters"]["prod"]
    assert len(cluster["control_planes"]) == CONTROL_PLANES, "the example site changed: update tests/scale.py"
    template = copy.deepcopy(cluster["workers"]["wk-a"])
    cluster["workers"] = {}
    for index in range(nodes - CONTROL_PLANES):
        worker = copy.deepcopy(template)
        worker.update(vm_id=2000 + index, hypervisor=("pve1", "pve2")[index % 2])
        worker["networks"] = {"vlans": {111: {"address": f"10.11.{2 + index // 250}.{1 + index % 250}/16"}}}
        cluster["workers"][f"wk-{index:04d}"] = worker
    for plane in cluster["control_planes"].values():  # one subnet per VLAN (a site rule): the workers' /16
        plane["networks"]["vlans"][111]["address"] = plane["networks"]["vlans"][111]["address"].replace("/24", "/16")
    cluster["cilium"]["pools"] = {"services": ["10.99.0.0/24"]}
    return data


def round_trips(nodes: int, tmp_path, monkeypatch) -> int:
    """Requests from Python to cdktf's Node.js process while building and synthesizing a scaled site."""
    from jsii._kernel.providers import process

    from tests import support

    site = support.site_from(scaled_site_data(nodes))
    count = 0
    send = process._NodeProcess.send

    def counted(self, request, response_type):
        nonlocal count
        count += 1
        return send(self, request, response_type)

    monkeypatch.setattr(process._NodeProcess, "send", counted)
    support.synth(site, tmp_path / str(nodes))
    monkeypatch.setattr(process._NodeProcess, "send", send)
    return count
