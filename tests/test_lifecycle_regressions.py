"""Walks the lifecycle state machine (tests/test_lifecycle_walk.py) once failed on, replayed with every check.

Each test was printed by `python -m tests.lifecycle_replay --name NAME < failure.txt` from the walk a failure ended
with (`WALK = {...}`), and pasted here unchanged but for ruff's formatting.
"""

from __future__ import annotations

from tests.lifecycle import replay


def test_walk_last_talos_node_leaves_a_hypervisor():
    """The last Talos node of pve1 leaves: its Talos image goes too (the walk's model first failed it)."""
    replay(
        {
            "start": "v1.12.7-pinned",
            "edits": [
                {"op": "remove_control_planes", "nodes": ["cp-a", "cp-b"]},
                {"op": "promote_workers", "nodes": ["wk-a", "wk-b"]},
                {"op": "remove_control_planes", "nodes": ["cp-c", "wk-a"]},
            ],
        }
    )


def test_the_replay_helper_reads_a_failure_and_writes_a_test_that_replays_it():
    from tests.lifecycle_replay import parse, regression_test

    message = (
        "step 1 (readdress) broke the lifecycle promise:\n  platform-prod: ...\n"
        "replay with tests/lifecycle_replay.py:\n"
        'WALK = {"start": "v1.11.5", "edits": [{"op": "readdress", "node": "wk-a", "octet": 101}]}'
    )
    walk = parse(message)
    assert walk == {"start": "v1.11.5", "edits": [{"op": "readdress", "node": "wk-a", "octet": 101}]}
    source = regression_test(walk, "readdress_once", "why")
    assert source.lstrip().startswith("def test_walk_readdress_once():")
    replayed: list[dict] = []
    namespace: dict = {"replay": replayed.append}
    exec(compile(source, "<regression>", "exec"), namespace)  # noqa: S102 - our own output
    namespace["test_walk_readdress_once"]()
    assert replayed == [walk]
