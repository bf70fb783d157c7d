"""The scaled sites the synth benchmark uses (tests/scale.py) are valid sites of the asked size."""

import pytest

from tests import support
from tests.scale import round_trips, scaled_site_data


@pytest.mark.parametrize("nodes", [5, 103, 1000])
def test_scaled_site_has_three_control_planes_and_the_rest_workers(nodes):
    site = support.site_from(scaled_site_data(nodes))
    cluster = site.clusters["prod"]
    assert len(cluster.control_planes) == 3
    assert len(cluster.workers) == nodes - 3
    assert len({node.vm_id for _, node in cluster.nodes().values()}) == nodes


def test_a_scaled_site_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker: got 3 nodes"):
        scaled_site_data(3)


def test_round_trips_per_node_stay_few(tmp_path, monkeypatch):
    """Each call into cdktf is a round trip to its Node.js process: what a synth costs per node is mostly how many
    a node takes (docs/adr/0027-synth-speed.md). Today 7: the node's construct, its VM and apply (create, pin each),
    the VM's network device override; the rules read the whole stack at once and one raw configuration per node.
    A new per-node read of a cdktf attribute fails this test: read it once per cluster
    (terravixens/constructs/build.py)."""
    small, large = round_trips(4, tmp_path, monkeypatch), round_trips(14, tmp_path, monkeypatch)
    per_node = (large - small) / 10
    assert per_node <= 7, f"{per_node:.1f} round trips per node ({small} for 4 nodes, {large} for 14)"
