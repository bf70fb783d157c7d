"""The synthesized JSON of every stack of the example site, pinned (syrupy, one .json file per stack).

Taken after app.synth() with validations and rules on. A diff here is reviewed like code: a change to a node the
change is not about is a bug to fix, never a snapshot to update (`pytest --snapshot-update` only after review).
"""

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

STACKS = ["hypervisors", "platform-prod", "gitops-prod"]


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("stack", STACKS)
def test_stack_snapshot(example_synth, snapshot_json, stack):
    assert example_synth[stack] == snapshot_json


def test_every_stack_is_snapshotted(example_synth):
    assert sorted(example_synth) == sorted(STACKS)
