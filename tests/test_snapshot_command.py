"""`terravixens snapshot CLUSTER`: one verified etcd snapshot through a healthy control plane, kept with retention and
said (path relative to the working folder, verification, what retention removed); `--list`: the kept ones.

talosctl is tests/fake_talosctl.py streaming a genuine snapshot (tests/etcd_tool.py), Terraform tests/fake_terraform.py
(the platform layer's talosconfig output). A real cluster adds snapshots of gigabytes and a leader change mid-stream.
"""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from terravixens.etcd_snapshots import SnapshotStore, manifest_path
from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.snapshot import SnapshotOptions, list_snapshots, take_snapshot
from terravixens.operations.workspace import Workspace
from tests import etcd_tool
from tests.fake_terraform import FakeTerraform, platform_state
from tests.tools_on_path import Tools

FOLDER = Path("etcd-snapshots") / "homelab" / "prod"


@pytest.fixture
def ws(example_site, tmp_path) -> Workspace:
    return Workspace(example_site, root=tmp_path)


def take(ws: Workspace, fake: Tools, tf: FakeTerraform | None = None, **changes) -> tuple[int, Console]:
    console = Console(out=io.StringIO())
    options = SnapshotOptions(**{"talosconfig": "talosconfig", "talosctl": fake.talosctl(), **changes})
    return take_snapshot(ws, "prod", tf or FakeTerraform({}), options, console), console


def kept(root: Path) -> list[Path]:
    return sorted((root / FOLDER).glob("*.snapshot"))


def test_a_snapshot_is_taken_verified_kept_and_said(ws, tmp_path):
    fake = Tools(tmp_path)  # cp-a does not answer: the next control plane gives it
    code, console = take(ws, fake)
    assert code == ExitCode.OK
    [path] = kept(tmp_path)
    assert path.name.endswith("_cp-b_manual.snapshot")
    assert path.read_bytes() == etcd_tool.genuine_snapshot().read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    lines = console.out.getvalue().splitlines()
    report = etcd_tool.genuine_report()
    assert lines[-3:] == [
        f"snapshot: {FOLDER / path.name}",
        (
            f"verified by etcd's own checks (size, sha256, bbolt, etcd): revision {report['revision']}, "
            f"{report['total_keys']} keys, {report['size']} bytes, sha256 {report['sha256'][:12]}"
        ),
        "retention (--keep 10): kept 1; removed 0",
    ]
    assert f"platform-prod: snapshot — {FOLDER / path.name} through cp-b, on request: verified" in lines[-4]
    assert "platform-prod: snapshot — through cp-a: etcd snapshot of prod through cp-a failed: exit 1" in lines[-5]
    assert str(tmp_path) not in console.out.getvalue()
    assert console.journal.done == [f"snapshot ({FOLDER / path.name})"]


def test_retention_removes_the_oldest_and_says_which(ws, tmp_path):
    fake = Tools(tmp_path, unreachable=[])
    first = [take(ws, fake, keep=2)[0] for _ in range(2)]
    assert first == [ExitCode.OK, ExitCode.OK]
    oldest = kept(tmp_path)[0]
    code, console = take(ws, fake, keep=2)
    assert code == ExitCode.OK and oldest not in kept(tmp_path) and len(kept(tmp_path)) == 2
    assert not manifest_path(oldest).exists()
    assert console.out.getvalue().splitlines()[-1] == f"retention (--keep 2): kept 2; removed 1: {oldest.name}"


def test_no_control_plane_gives_a_verified_snapshot(ws, tmp_path):
    fake = Tools(tmp_path, unreachable=[], etcd_snapshot=etcd_tool.fake_talosctl_setup("flip"))
    console = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        take_snapshot(
            ws, "prod", FakeTerraform({}), SnapshotOptions(talosconfig="t", talosctl=fake.talosctl()), console
        )
    assert caught.value.code == ExitCode.BACKUP_FAILED
    assert str(caught.value) == (
        "platform-prod: no verified etcd snapshot of prod (3 control planes tried, each said why above); nothing was "
        "kept"
    )
    assert kept(tmp_path) == []
    assert console.out.getvalue().count("not kept: etcd.snapshot: not a usable etcd snapshot (sha256)") == 3
    assert console.journal.line(interrupted=False) == "stopped at snapshot: done: nothing; not done: snapshot"


def test_the_talosconfig_comes_from_the_platform_layer(ws, tmp_path):
    fake = Tools(tmp_path, unreachable=[])
    tf = FakeTerraform({"platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], [], "cp-a")})
    code, console = take(ws, fake, tf, talosconfig=None)
    assert code == ExitCode.OK
    assert [call[1:] for call in tf.calls] == [("init", "-input=false", "-no-color"), ("output", "-raw", "talosconfig")]
    [config] = {call[1] for call in fake.state()["calls"] if call[0] == "--talosconfig"}
    assert Path(config).parent.name.startswith("terravixens-talosconfig-") and not Path(config).exists()
    assert console.journal.done[:2] == ["synth", "talosconfig"]


def test_a_layer_without_talosconfig_output_is_bad_input(ws, tmp_path):
    fake = Tools(tmp_path, unreachable=[])
    with pytest.raises(OperationError) as caught:
        take(ws, fake, FakeTerraform({"platform-prod": {}}), talosconfig=None)
    assert caught.value.code == ExitCode.BAD_INPUT and "give one with --talosconfig FILE" in str(caught.value)
    assert fake.log() == []


def test_an_unknown_cluster_is_bad_input(ws, tmp_path):
    with pytest.raises(OperationError) as caught:
        take_snapshot(ws, "staging", FakeTerraform({}), SnapshotOptions(talosconfig="t"), Console(out=io.StringIO()))
    assert caught.value.code == ExitCode.BAD_INPUT and str(caught.value) == (
        "unknown cluster 'staging': use one of prod"
    )


# -------------------------------------------------------------------------------------------------------------- list
def test_the_list_says_what_vouches_for_each_snapshot(ws, tmp_path):
    store = SnapshotStore(tmp_path, "homelab", tool=False)
    without_tool = store.add("prod", etcd_tool.genuine_snapshot(), "cp-a", "manual").snapshot.path
    fake = Tools(tmp_path, unreachable=[])
    take(ws, fake)
    changed = kept(tmp_path)[-1]
    dropped = tmp_path / FOLDER / "prod_20990101T000000.000000Z_cp-c_by-hand.snapshot"
    dropped.write_bytes(etcd_tool.genuine_snapshot().read_bytes())
    replaced = store.add("prod", etcd_tool.genuine_snapshot(), "cp-b", "before-upgrade").snapshot.path
    replaced.write_bytes(b"truncated")
    console = Console(out=io.StringIO())
    assert list_snapshots(ws, "prod", console) == ExitCode.OK
    lines = console.out.getvalue().splitlines()
    assert lines[0] == f"{FOLDER}/: 4 snapshots, oldest first"
    assert lines[1].split() == ["TAKEN", "(UTC)", "NODE", "REASON", "SIZE", "VERIFIED", "FILE"]
    rows = [line.split() for line in lines[2:6]]
    size = etcd_tool.genuine_snapshot().stat().st_size  # 7 or 9 pages of 4 KiB, as the embedded etcd laid them out
    shown = f"{size / 1000:.1f} kB"
    assert [(row[2], row[3], row[4] + " " + row[5], row[6], row[7]) for row in rows] == [
        ("cp-a", "manual", shown, "sha256", without_tool.name),
        ("cp-a", "manual", shown, "etcd", changed.name),
        ("cp-b", "before-upgrade", "9 B", "no", replaced.name),
        ("cp-c", "by-hand", shown, "no", dropped.name),
    ]
    assert lines[6:] == [
        f"{replaced.name}: not verified: 9 bytes where its manifest says {size}: the file changed",
        (
            f"{dropped.name}: not verified: no manifest: not kept by terravixens, or cut off before its manifest "
            f"was written"
        ),
    ]
    assert json.loads(manifest_path(changed).read_text())["verification"]["level"] == "etcd"


def test_an_empty_list_says_how_to_take_one(ws):
    console = Console(out=io.StringIO())
    assert list_snapshots(ws, "prod", console) == ExitCode.OK
    assert console.out.getvalue() == (f"no snapshot of prod in {FOLDER}/ (take one: terravixens snapshot prod)\n")


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.chmod(0o600)
    path.write_bytes(bytes(data))


def test_a_corrupted_newest_snapshot_is_not_verified_nor_kept_over_good_ones(ws, tmp_path):
    """Issue 26, item 5 (low): on b4ffe4b a corrupted newest snapshot (same size, its manifest untouched) was listed
    as verified, and retention kept it while it deleted the intact older ones."""
    fake = Tools(tmp_path, unreachable=[])
    for _ in range(3):
        assert take(ws, fake, keep=3)[0] == ExitCode.OK
    oldest, intact, corrupted = kept(tmp_path)
    _flip(corrupted)
    console = Console(out=io.StringIO())
    assert list_snapshots(ws, "prod", console) == ExitCode.OK
    lines = console.out.getvalue().splitlines()
    assert lines[4].split()[-2:] == ["no", corrupted.name]
    assert lines[-1].startswith(f"{corrupted.name}: not verified: sha256 ") and lines[-1].endswith(
        "is not the one its manifest recorded: the file changed"
    )

    code, console = take(ws, fake, keep=2)
    assert code == ExitCode.OK
    newest = kept(tmp_path)[-1]
    assert kept(tmp_path) == [intact, corrupted, newest]  # the intact one counts; the oldest goes
    assert not oldest.exists() and corrupted.exists()
    said = console.out.getvalue().splitlines()[-1]
    assert said == (
        f"retention (--keep 2): kept 2; removed 1: {oldest.name}; 1 that no longer verifies left alone (look at "
        f"it, then delete by hand; `snapshot CLUSTER --list` says why): {corrupted.name}"
    )
