"""The shared etcd steps (terravixens.operations.etcd): a fresh, verified snapshot through a healthy control plane
before a risky step, or a BACKUP_FAILED stop, or skipped with the operator's reason; the cluster's talosconfig.

The snapshots are genuine (an embedded etcd through tools/etcd-snapshot, tests/etcd_tool.py), streamed by the fake
talosctl as real talosctl writes them. A real cluster adds snapshots of gigabytes and a leader change mid-stream."""

from __future__ import annotations

import io
import json
import stat
import sys
from pathlib import Path

import pytest

from terravixens.etcd_snapshots import no_snapshot_reason
from terravixens.exitcodes import ExitCode
from terravixens.operations.console import Console
from terravixens.operations.etcd import (
    SnapshotPolicy,
    fresh_snapshot,
    talosconfig_file,
)
from terravixens.operations.outcome import OperationError
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl
from tests import etcd_tool, support
from tests.fake_terraform import Outputs

FAKE = Path(__file__).resolve().parent / "fake_talosctl.py"
CP_A, CP_B, CP_C = "10.11.1.11", "10.11.1.12", "10.11.1.13"


class Fake:
    def __init__(self, folder: Path, **scenario):
        self.scenario = folder / "scenario.json"
        self.scenario.write_text(
            json.dumps({"calls": [], "etcd_snapshot": etcd_tool.fake_talosctl_setup(), **scenario})
        )
        self.path = folder / "talosctl"
        self.path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} {self.scenario} "$@"\n')
        self.path.chmod(0o755)
        self.talosctl = Talosctl(str(self.path), "talosconfig", 60)

    def snapshot_calls(self) -> list[str]:
        """The address of each `etcd snapshot` call, in order."""
        calls = json.loads(self.scenario.read_text())["calls"]
        return [call[3] for call in calls if call[4:6] == ["etcd", "snapshot"]]


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(support.site_from(support.example_data()), root=tmp_path)


def test_a_fresh_snapshot_is_verified_kept_private_and_said(ws, tmp_path):
    fake, out = Fake(tmp_path), io.StringIO()
    taken = fresh_snapshot(ws, "prod", fake.talosctl, Console(out=out), "the scale-in of cp-c")
    assert taken is not None and taken.verification.ok and taken.verification.level == "etcd"
    path = taken.snapshot.path
    assert path.parent == tmp_path / "etcd-snapshots" / "homelab" / "prod"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.name.startswith("prod_") and path.name.endswith("_cp-a_the-scale-in-of-cp-c.snapshot")
    assert path.read_bytes() == etcd_tool.genuine_snapshot().read_bytes()
    [line] = out.getvalue().splitlines()
    assert (
        f"platform-prod: snapshot — etcd-snapshots/homelab/prod/{path.name} through cp-a, before the scale-in" in line
    )
    assert str(tmp_path) not in line  # relative to where the operator runs terravixens
    assert fake.snapshot_calls() == [CP_A]


def test_the_nodes_to_avoid_are_tried_last(ws, tmp_path):
    fake = Fake(tmp_path)
    taken = fresh_snapshot(ws, "prod", fake.talosctl, Console(out=io.StringIO()), "upgrade", avoid=["cp-a"])
    assert taken is not None and taken.snapshot.node == "cp-b" and fake.snapshot_calls() == [CP_B]


def test_a_control_plane_that_does_not_answer_is_skipped_for_the_next(ws, tmp_path):
    fake, out = Fake(tmp_path, broken=[CP_A]), io.StringIO()
    taken = fresh_snapshot(ws, "prod", fake.talosctl, Console(out=out), "upgrade")
    assert taken is not None and taken.snapshot.node == "cp-b"
    assert fake.snapshot_calls() == [CP_A, CP_B]
    assert "through cp-a: etcd snapshot of prod through cp-a failed: exit 1" in out.getvalue()


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_no_verified_snapshot_stops_before_anything_changes(ws, tmp_path, damage):
    fake = Fake(tmp_path, etcd_snapshot=etcd_tool.fake_talosctl_setup(damage))
    with pytest.raises(OperationError) as stopped:
        fresh_snapshot(ws, "prod", fake.talosctl, Console(out=io.StringIO()), "the removal of cp-c")
    assert stopped.value.code == ExitCode.BACKUP_FAILED
    assert str(stopped.value) == (
        "platform-prod: no verified etcd snapshot before the removal of cp-c (3 control planes tried); nothing was "
        "changed. Fix what the lines above say, or — knowing the risk — pass --no-snapshot REASON"
    )
    assert fake.snapshot_calls() == [CP_A, CP_B, CP_C]
    folder = tmp_path / "etcd-snapshots" / "homelab" / "prod"
    assert not [path for path in folder.iterdir() if path.suffix == ".snapshot"]  # nothing unverified kept


def test_an_operators_reason_skips_the_snapshot_and_is_said(ws, tmp_path):
    fake, out = Fake(tmp_path), io.StringIO()
    policy = SnapshotPolicy(skip_reason=no_snapshot_reason("taken by hand at 10:02"))
    assert fresh_snapshot(ws, "prod", fake.talosctl, Console(out=out), "upgrade", policy) is None
    assert fake.snapshot_calls() == []
    assert "platform-prod: snapshot — skipped before upgrade: taken by hand at 10:02 (--no-snapshot)" in out.getvalue()


@pytest.mark.parametrize("reason", ["", "   ", "yes", "skip"])
def test_no_snapshot_needs_a_reason(reason):
    with pytest.raises(ValueError, match="is not a reason: say why this run goes without a fresh etcd snapshot"):
        no_snapshot_reason(reason)


def test_the_talosconfig_comes_from_the_platform_layer_private_and_is_removed_afterwards(ws):
    tf = Outputs({"talosconfig": "context: prod\ncontexts: {}\n"})
    with talosconfig_file(ws, tf, "prod", None) as path:  # type: ignore[arg-type]
        written = Path(path)
        assert written.read_text() == "context: prod\ncontexts: {}\n"
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    assert not written.exists() and not written.parent.exists()
    assert tf.calls == [("platform-prod", "output", "-raw", "talosconfig")]


def test_a_given_talosconfig_is_used_as_is(ws):
    tf = Outputs({})
    with talosconfig_file(ws, tf, "prod", "my/talosconfig") as path:  # type: ignore[arg-type]
        assert path == "my/talosconfig"
    assert tf.calls == []


def test_no_talosconfig_output_is_bad_input_naming_the_way_out(ws):
    with pytest.raises(OperationError) as stopped, talosconfig_file(ws, Outputs({}), "prod", None):  # type: ignore[arg-type]
        pass
    assert stopped.value.code == ExitCode.BAD_INPUT
    assert "platform-prod has no talosconfig output" in str(stopped.value) and "--talosconfig FILE" in str(
        stopped.value
    )
