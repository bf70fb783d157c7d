"""The scaled sites the synth benchmark uses (tests/scale.py) are valid sites of the asked size."""
import pytest

from tests import support
from tests.scale import scaled_site_data


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
