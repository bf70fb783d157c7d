"""etcd snapshots (ADR 0030): the etcd-snapshot tool judges files with etcd's own code, terravixens.etcd_snapshots
keeps them (0700 folders, 0600 files, names by cluster and UTC time, manifests, retention), and the fake talosctl
streams a genuine snapshot as `talosctl etcd snapshot` does.

Every snapshot here comes from a real etcd: `etcd-snapshot make-fixture` starts an embedded etcd (go.etcd.io/etcd/
server/v3/embed) on 127.0.0.1 with kernel-chosen ports, writes keys, and saves what clientv3's Maintenance.Snapshot
streams, as machined streams it to talosctl. What a real cluster adds: databases of gigabytes (the tool's bbolt
check then takes minutes: TOOL_TIMEOUT), snapshots of etcd 3.5 (no storage version recorded), and the restore itself
(`talosctl bootstrap --recover-from`), which checks the same digest.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from terravixens import etcd_snapshots as es
from terravixens.talosctl import Talosctl
from tests import etcd_tool

FAKE = Path(__file__).resolve().parent / "fake_talosctl.py"
T0 = datetime(2026, 11, 26, 8, 0, 0, tzinfo=UTC)
CP = "127.11.1.11"


# ------------------------------------------------------------------------------------------------ damaged files
def _digest(database: bytes) -> bytes:
    return database + hashlib.sha256(database).digest()


def _root_page_corrupted(data: bytes) -> bytes:
    """The root bucket's page gets wrong type flags, and the digest is computed again: only bbolt's own page check
    (through etcd's snapshot status) can tell."""
    database = bytearray(data[:-32])
    metas = []
    for offset in (0, 4096):
        magic, version, page_size, _, root = struct.unpack_from("<IIIIQ", database, offset + 16)
        txid = struct.unpack_from("<Q", database, offset + 64)[0]
        assert magic == 0xED0CDAED and version == 2, "the fixture is a bbolt file with 4 KiB pages"
        metas.append((txid, root, page_size))
    _, root, page_size = max(metas)
    database[root * page_size + 8] ^= 0xFF
    return _digest(bytes(database))


DAMAGES = {
    # name: (make the file from the genuine bytes, the check that fails, words its reason has)
    "truncated": (lambda data: data[:-1000], "size", "512*k+32"),
    "flipped byte": (
        lambda data: data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0x01]) + data[len(data) // 2 + 1 :],
        "sha256",
        "altered after etcd streamed it",
    ),
    "appended garbage": (lambda data: data + b"garbage\n", "size", "512*k+32"),
    "empty": (lambda data: b"", "size", "empty"),
    "not bbolt": (lambda data: _digest(os.urandom(16384)), "bbolt", "not a readable bbolt database"),
    "wrong hash": (
        lambda data: data[:-32] + hashlib.sha256(b"another database").digest(),
        "sha256",
        "altered after etcd streamed it",
    ),
    "cut at a page, digest redone": (lambda data: _digest(data[:8192]), "bbolt", "truncated"),
}


def _damaged(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name.replace(' ', '-')}.snapshot"
    path.write_bytes(DAMAGES[name][0](etcd_tool.genuine_snapshot().read_bytes()))
    return path


def _copy(tmp_path: Path, name: str = "copy.snapshot") -> Path:
    path = tmp_path / name
    shutil.copyfile(etcd_tool.genuine_snapshot(), path)
    path.chmod(0o600)
    return path


# ------------------------------------------------------------------------------------------------------ the tool
def test_the_tool_is_built_from_the_pinned_etcd_modules():
    ran = etcd_tool.run("-version")
    assert ran.returncode == 0
    assert json.loads(ran.stdout) == etcd_tool.pinned_modules()


def test_a_genuine_snapshot_is_the_database_then_its_sha256_and_verifies():
    path, made, report = etcd_tool.genuine_snapshot(), etcd_tool.genuine_fixture(), etcd_tool.genuine_report()
    data = path.read_bytes()
    assert len(data) == made["bytes"] and len(data) % 512 == 32
    assert data[-32:] == hashlib.sha256(data[:-32]).digest()  # etcd's Maintenance.Snapshot layout
    assert data[16:20] == struct.pack("<I", 0xED0CDAED)  # bbolt's magic in the first meta page
    assert report["ok"] and report["passed"] == ["size", "sha256", "bbolt", "etcd"] and report["hash_ok"]
    assert report["sha256"] == hashlib.sha256(data).hexdigest() and report["db_sha256"] == data[-32:].hex()
    assert (report["size"], report["db_size"]) == (len(data), len(data) - 32)
    # 20 live keys (one of them overwritten), a deleted one not counted; the revision is the store's last write.
    assert (report["total_keys"], report["revision"]) == (etcd_tool.FIXTURE_KEYS, made["revision"])
    assert [member["id"] for member in report["members"]] == [made["member_id"]]
    # Read by etcd's own membership reader: the name and peer URL the member was started with.
    assert (report["members"][0]["name"], report["members"][0]["peer_urls"]) == (
        etcd_tool.GENUINE_MEMBER[0],
        [etcd_tool.GENUINE_MEMBER[1]],
    )
    assert not report["members"][0]["is_learner"] and report["removed_member_ids"] == []
    assert report["storage_version"] == "3.6.0" and report["cluster_version"].startswith("3.6")
    assert len(report["etcd_hash"]) == 8 and report["tool"].startswith("go.etcd.io/etcd/etcdutl/v3 v3.6.")


def test_make_fixture_counts_the_keys_it_is_asked_for(tmp_path):
    made = etcd_tool.make_fixture(tmp_path / "five.snapshot", keys=5, member=etcd_tool.GENUINE_MEMBER)
    assert stat.S_IMODE((tmp_path / "five.snapshot").stat().st_mode) == 0o600
    assert not (tmp_path / "five.snapshot.part").exists()
    code, report = etcd_tool.verify(tmp_path / "five.snapshot")
    assert code == 0 and report["total_keys"] == 5 and report["revision"] == made["revision"]
    # etcd derives member and cluster ids from the peer URLs and the cluster token: the same for the same member.
    assert (made["member_id"], made["cluster_id"]) == (
        etcd_tool.genuine_fixture()["member_id"],
        etcd_tool.genuine_fixture()["cluster_id"],
    )


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_the_tool_refuses_a_damaged_snapshot_with_the_check_and_the_reason(tmp_path, name):
    _, check, words = DAMAGES[name]
    code, report = etcd_tool.verify(_damaged(tmp_path, name))
    assert code == 1 and not report["ok"]
    assert report["check"] == check and words in report["reason"]
    assert check not in report["passed"]


def test_the_tool_survives_a_database_that_crashes_bbolt(tmp_path):
    path = tmp_path / "root-page.snapshot"
    path.write_bytes(_root_page_corrupted(etcd_tool.genuine_snapshot().read_bytes()))
    code, report = etcd_tool.verify(path)
    assert code == 1 and report["check"] == "etcd" and report["passed"] == ["size", "sha256", "bbolt"]
    assert "corrupt" in report["reason"] and "unexpected type/flags" in report["reason"]


def test_the_tool_says_when_it_cannot_read_the_file(tmp_path):
    code, report = etcd_tool.verify(tmp_path / "absent.snapshot")
    assert code == 2 and report["check"] == "read" and "no such file" in report["reason"]


# ------------------------------------------------------------------------------------------------- verification
def test_verify_snapshot_reports_etcds_own_findings():
    verification = es.verify_snapshot(etcd_tool.genuine_snapshot())
    report = etcd_tool.genuine_report()
    assert verification.ok and verification.level == "etcd"
    assert verification.passed == ("size", "sha256", "bbolt", "etcd")
    assert (verification.revision, verification.total_keys, verification.etcd_hash, verification.sha256) == (
        report["revision"],
        report["total_keys"],
        report["etcd_hash"],
        report["sha256"],
    )
    assert verification.members[0]["id"] == etcd_tool.genuine_fixture()["member_id"]
    assert f"revision {report['revision']}, {report['total_keys']} keys" in verification.summary()


@pytest.mark.parametrize("tool", [True, False], ids=["with the tool", "without the tool"])
@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_verify_snapshot_refuses_each_damage_with_or_without_the_tool(tmp_path, name, tool):
    _, check, words = DAMAGES[name]
    verification = es.verify_snapshot(_damaged(tmp_path, name), tool=tool)
    assert not verification.ok and verification.check == check and words in verification.reason
    assert verification.summary().endswith(verification.reason)


def test_without_the_tool_a_corrupt_page_passes_at_the_sha256_level_only(tmp_path):
    """Why the tool is worth building: the digest and the meta pages cannot see a corrupt page that etcd itself
    wrote (or that was rewritten with a new digest)."""
    path = tmp_path / "root-page.snapshot"
    path.write_bytes(_root_page_corrupted(etcd_tool.genuine_snapshot().read_bytes()))
    without = es.verify_snapshot(path, tool=False)
    assert without.ok and without.level == "sha256" and without.passed == ("size", "sha256", "bbolt-meta")
    assert "make tools" in without.note and without.revision is None
    with_tool = es.verify_snapshot(path)
    assert not with_tool.ok and with_tool.check == "etcd"


def test_without_the_tool_the_level_says_so_and_require_tool_refuses():
    relaxed = es.verify_snapshot(etcd_tool.genuine_snapshot(), tool=False)
    assert relaxed.ok and relaxed.level == "sha256" and "not run" in relaxed.summary()
    strict = es.verify_snapshot(etcd_tool.genuine_snapshot(), tool=False, require_tool=True)
    assert not strict.ok and strict.check == "tool" and "make tools" in strict.reason


def test_find_tool_takes_the_environment_then_the_checkout_then_path(tmp_path, monkeypatch):
    monkeypatch.delenv(es.TOOL_ENV, raising=False)
    assert es.find_tool() == etcd_tool.BINARY
    monkeypatch.setattr(es, "REPO_TOOL", tmp_path / "not-built")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert es.find_tool() is None
    on_path = tmp_path / "etcd-snapshot"
    on_path.write_text("#!/bin/sh\nexit 0\n")
    on_path.chmod(0o755)
    assert es.find_tool() == on_path
    monkeypatch.setenv(es.TOOL_ENV, str(tmp_path / "elsewhere"))
    assert es.find_tool() == tmp_path / "elsewhere"


def test_a_configured_tool_that_is_missing_is_a_failure_not_a_downgrade(tmp_path, monkeypatch):
    monkeypatch.setenv(es.TOOL_ENV, str(tmp_path / "missing-tool"))
    verification = es.verify_snapshot(etcd_tool.genuine_snapshot())
    assert not verification.ok and verification.check == "tool" and "cannot run" in verification.reason


@pytest.mark.parametrize(
    "script, words",
    [
        ("sleep 60", "etcd-snapshot did not finish within 4s: stopped"),
        ("echo 'panic: boom' >&2; exit 2", "without a report: panic: boom"),
    ],
    ids=["hangs", "crashes"],
)
def test_a_tool_that_hangs_or_crashes_is_a_failure_bounded_in_time(tmp_path, script, words):
    tool = tmp_path / "etcd-snapshot"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(0o755)
    started = time.monotonic()
    verification = es.verify_snapshot(etcd_tool.genuine_snapshot(), tool=tool, timeout=2)
    assert not verification.ok and verification.check == "tool" and words in verification.reason
    assert time.monotonic() - started < 15


# ---------------------------------------------------------------------------------------------------- the store
def _store(tmp_path: Path, **options) -> es.SnapshotStore:
    return es.SnapshotStore(tmp_path / "work", "lab", **options)


def _add(
    store: es.SnapshotStore, when: datetime, node: str = "cp-a", reason: str = "manual", cluster: str = "alpha"
) -> es.Taken:
    with store.incoming(cluster) as target:
        shutil.copyfile(etcd_tool.genuine_snapshot(), target)
        return store.add(cluster, target, node, reason, taken_at=when)


def test_a_kept_snapshot_is_0600_in_0700_folders_with_its_manifest(tmp_path):
    store = _store(tmp_path)
    taken = _add(store, T0, reason="before-upgrade")
    path = taken.snapshot.path
    assert path == tmp_path / "work/etcd-snapshots/lab/alpha/alpha_20261126T080000.000000Z_cp-a_before-upgrade.snapshot"
    for folder in (tmp_path / "work/etcd-snapshots", tmp_path / "work/etcd-snapshots/lab", path.parent):
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o700
    for file in (path, taken.snapshot.manifest_path):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert path.read_bytes() == etcd_tool.genuine_snapshot().read_bytes()
    manifest = json.loads(taken.snapshot.manifest_path.read_text())
    assert manifest["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (manifest["site"], manifest["cluster"], manifest["node"], manifest["reason"]) == (
        "lab",
        "alpha",
        "cp-a",
        "before-upgrade",
    )
    assert manifest["taken_at"] == "2026-11-26T08:00:00+00:00"
    assert manifest["verification"]["level"] == "etcd"
    assert manifest["verification"]["revision"] == etcd_tool.genuine_report()["revision"]
    # Nothing else is left behind: no .part, no incoming folder, no temporary manifest.
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        [".lock", path.name, taken.snapshot.manifest_path.name]
    )
    assert store.snapshots("alpha") == [taken.snapshot]
    assert "kept 1; removed 0" in taken.summary()


def test_folders_wider_than_0700_are_tightened_and_links_refused(tmp_path):
    store = _store(tmp_path)
    loose = tmp_path / "work/etcd-snapshots/lab"
    loose.mkdir(parents=True, mode=0o755)
    loose.chmod(0o755)
    store.ensure_folder("alpha")
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (loose / "beta").symlink_to(elsewhere)
    with pytest.raises(es.SnapshotError, match="not a folder"):
        store.ensure_folder("beta")
    assert list(elsewhere.iterdir()) == []


def test_names_sort_by_time_and_parse_back():
    times = [
        T0 + timedelta(days=3),
        T0,
        T0 + timedelta(microseconds=1),
        T0 + timedelta(hours=1, seconds=5),
        T0 - timedelta(days=400),
    ]
    names = {es.snapshot_name("alpha", when, "cp-b", "manual"): when for when in times}
    assert [names[name] for name in sorted(names)] == sorted(times)
    for name, when in names.items():
        assert es.parse_name(name) == ("alpha", when, "cp-b", "manual")
    # A time in another zone is named in UTC; the counter keeps a reason ending in digits intact.
    paris = timezone(timedelta(hours=1))
    assert es.snapshot_name("alpha", T0.astimezone(paris), "10.0.0.2", "scale-in-3", 2) == (
        "alpha_20261126T080000.000000Z_10.0.0.2_scale-in-3_2.snapshot"
    )
    assert es.parse_name("alpha_20261126T080000.000000Z_10.0.0.2_scale-in-3_2.snapshot")[3] == "scale-in-3"
    assert es.parse_name("notes.txt") is None


@pytest.mark.parametrize(
    "cluster, node, reason",
    [
        ("Alpha", "cp-a", "manual"),
        ("alpha", "cp_a", "manual"),
        ("alpha", "cp-a", "../x"),
        ("alpha", "fe80::1", "manual"),
    ],
)
def test_names_refuse_what_would_break_them(cluster, node, reason):
    with pytest.raises(ValueError, match="use lower-case letters"):
        es.snapshot_name(cluster, T0, node, reason)


def test_names_need_an_aware_time():
    with pytest.raises(ValueError, match="timezone-aware"):
        es.snapshot_name("alpha", datetime(2026, 11, 26), "cp-a", "manual")  # noqa: DTZ001 (naive on purpose)


def test_retention_keeps_the_newest_n(tmp_path):
    store = _store(tmp_path, keep=3)
    taken = [_add(store, T0 + timedelta(minutes=minute)) for minute in (4, 0, 3, 1, 2)]
    kept = store.snapshots("alpha")
    assert [snapshot.taken_at for snapshot in kept] == [T0 + timedelta(minutes=m) for m in (2, 3, 4)]
    removed = {path for t in taken for path in t.pruned.removed}
    assert {snapshot.path.name for snapshot in kept}.isdisjoint(path.name for path in removed)
    assert all(not path.exists() and not es.manifest_path(path).exists() for path in removed)
    assert len(removed) == 2
    assert store.latest("alpha").taken_at == T0 + timedelta(minutes=4)


def test_retention_never_removes_the_snapshot_just_taken(tmp_path):
    store = _store(tmp_path, keep=1)
    newest = _add(store, T0 + timedelta(days=1))
    older = _add(store, T0)  # a clock behind the last one: still the one just taken
    assert older.snapshot.path.exists() and newest.snapshot.path.exists()
    assert older.pruned.removed == () and set(older.pruned.kept) == {older.snapshot.path, newest.snapshot.path}
    assert store.prune("alpha").removed == (older.snapshot.path,)


def test_retention_never_removes_a_snapshot_without_a_manifest(tmp_path):
    store = _store(tmp_path, keep=1)
    folder = store.ensure_folder("alpha")
    dropped = folder / es.snapshot_name("alpha", T0 - timedelta(days=30), "cp-a", "by-hand")
    shutil.copyfile(etcd_tool.genuine_snapshot(), dropped)
    stale = _add(store, T0)
    stale.snapshot.manifest_path.write_text("{}")  # a manifest that is not this snapshot's
    fresh = _add(store, T0 + timedelta(hours=1))
    assert fresh.pruned.removed == () and set(fresh.pruned.unverified) == {dropped, stale.snapshot.path}
    assert dropped.exists() and stale.snapshot.path.exists()
    assert "2 without a manifest left alone" in es.describe(fresh.pruned)
    assert [s.verified for s in store.snapshots("alpha")] == [False, False, True]
    assert store.latest("alpha") == fresh.snapshot


def _corrupt(path: Path) -> None:
    """A byte flipped in place: the size and the manifest stay, the file no longer is what was kept."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_retention_never_deletes_the_last_good_snapshot_for_a_corrupted_newer_one(tmp_path):
    """Issue 26, item 5 (low): retention trusted the manifests without hashing again — the corrupted newest
    snapshot was "verified" and kept while the intact older one was deleted (b4ffe4b), leaving nothing to restore."""
    store = _store(tmp_path, keep=2)
    intact = _add(store, T0).snapshot
    corrupted = _add(store, T0 + timedelta(minutes=1)).snapshot
    _corrupt(corrupted.path)
    pruned = store.prune("alpha", keep=1)
    assert pruned.removed == () and intact.path.exists() and corrupted.path.exists()
    assert pruned.kept == (intact.path,)
    [(path, why)] = pruned.failed
    assert path == corrupted.path and why.startswith("sha256: the database hashes to")
    assert es.describe(pruned) == (
        "kept 1; removed 0; 1 that no longer verifies left alone (look at it, then delete by hand; `snapshot "
        f"CLUSTER --list` says why): {corrupted.path.name}"
    )


def test_retention_checks_with_etcds_own_code_before_deleting(tmp_path):
    """A snapshot whose sha256 still matches its manifest but whose pages etcd refuses (rewritten with a new digest
    and manifest, as a bad disk under a careless copy could) does not count as one to keep."""
    store = _store(tmp_path, keep=3)
    oldest = _add(store, T0).snapshot
    newer = _add(store, T0 + timedelta(minutes=1)).snapshot
    broken = _root_page_corrupted(newer.path.read_bytes())
    newer.path.write_bytes(broken)
    manifest = json.loads(newer.manifest_path.read_text())
    manifest.update(sha256=hashlib.sha256(broken).hexdigest(), size=len(broken))
    newer.manifest_path.write_text(json.dumps(manifest))
    newest = _add(store, T0 + timedelta(minutes=2))
    assert newest.pruned.removed == ()  # keep 3: nothing to delete, nothing verified again
    pruned = store.prune("alpha", keep=2)
    assert pruned.removed == () and [path for path, _ in pruned.failed] == [newer.path]
    assert pruned.failed[0][1].startswith("etcd: ") and set(pruned.kept) == {oldest.path, newest.snapshot.path}
    # Once `keep` newer snapshots verify, everything older goes, the failed one too: it was never counted.
    latest = _add(store, T0 + timedelta(minutes=3))
    assert latest.pruned.removed == () and latest.pruned.failed == ((newer.path, pruned.failed[0][1]),)
    assert set(store.prune("alpha", keep=2).removed) == {oldest.path, newer.path}
    assert newest.snapshot.path.exists() and latest.snapshot.path.exists()


def test_keep_must_be_at_least_one(tmp_path):
    with pytest.raises(ValueError, match="at least"):
        _store(tmp_path, keep=0)
    with pytest.raises(ValueError, match="at least"):
        _store(tmp_path).prune("alpha", keep=0)


def test_a_damaged_snapshot_is_refused_and_nothing_is_kept(tmp_path):
    store = _store(tmp_path)
    with store.incoming("alpha") as target:
        target.write_bytes(DAMAGES["flipped byte"][0](etcd_tool.genuine_snapshot().read_bytes()))
        with pytest.raises(es.SnapshotError, match=r"not kept.*sha256") as refused:
            store.add("alpha", target, "cp-a", "manual", taken_at=T0)
    assert refused.value.verification.check == "sha256"
    assert store.snapshots("alpha") == [] and set(os.listdir(store.folder("alpha"))) <= {".lock"}


def test_a_snapshot_from_elsewhere_is_copied_and_left_as_it_was(tmp_path):
    source = _copy(tmp_path)
    source.chmod(0o640)
    taken = _store(tmp_path).add("alpha", source, "cp-a", "imported", taken_at=T0)
    assert stat.S_IMODE(source.stat().st_mode) == 0o640 and source.stat().st_nlink == 1
    assert stat.S_IMODE(taken.snapshot.path.stat().st_mode) == 0o600
    assert taken.snapshot.path.read_bytes() == source.read_bytes()
    assert [p.name for p in taken.snapshot.path.parent.iterdir() if p.name.startswith(".copy-")] == []


def test_check_finds_a_stored_snapshot_that_changed(tmp_path):
    store = _store(tmp_path)
    snapshot = _add(store, T0).snapshot
    assert store.check(snapshot).ok
    data = bytearray(snapshot.path.read_bytes())
    data[100] ^= 0x01
    snapshot.path.write_bytes(bytes(data))
    assert store.check(snapshot).check == "sha256"
    other = tmp_path / "other.snapshot"
    etcd_tool.make_fixture(other, keys=3)
    shutil.copyfile(other, snapshot.path)  # a genuine snapshot, but not the one the manifest describes
    changed = store.check(snapshot)
    assert not changed.ok and changed.check == "manifest" and "replaced" in changed.reason


def _add_in_process(arguments: tuple[str, str, int]) -> str:
    root, source, _index = arguments
    store = es.SnapshotStore(Path(root), "lab", keep=50)
    with store.incoming("alpha") as target:
        shutil.copyfile(source, target)
        return str(store.add("alpha", target, "cp-a", "manual", taken_at=T0).snapshot.path)


def test_concurrent_writers_do_not_clobber_each_other(tmp_path):
    """Six processes keep a snapshot of the same cluster, through the same node, at the same instant."""
    root = tmp_path / "work"
    with multiprocessing.get_context("fork").Pool(6) as pool:
        paths = pool.map(_add_in_process, [(str(root), str(etcd_tool.genuine_snapshot()), i) for i in range(6)])
    assert len(set(paths)) == 6
    store = es.SnapshotStore(root, "lab")
    listed = store.snapshots("alpha")
    assert sorted(str(s.path) for s in listed) == sorted(paths) and all(s.verified for s in listed)
    expected = hashlib.sha256(etcd_tool.genuine_snapshot().read_bytes()).hexdigest()
    assert all(s.sha256 == expected == hashlib.sha256(s.path.read_bytes()).hexdigest() for s in listed)
    assert sorted(Path(p).name for p in paths)[0].endswith("_manual.snapshot")
    assert {es.parse_name(Path(p).name)[3] for p in paths} == {"manual"}


# ----------------------------------------------------------------------------------- through the fake talosctl
class FakeTalosctl:
    def __init__(self, folder: Path, **scenario):
        self.scenario = folder / "scenario.json"
        self.scenario.write_text(json.dumps({"calls": [], **scenario}))
        self.path = folder / "talosctl"
        self.path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} {self.scenario} "$@"\n')
        self.path.chmod(0o755)
        self.talosctl = Talosctl(str(self.path), "talosconfig", 60)

    def calls(self) -> list[list[str]]:
        return json.loads(self.scenario.read_text())["calls"]

    def snapshot_to(self, node: str):
        return lambda path: self.talosctl.run(["--nodes", node, "etcd", "snapshot", str(path)])

    def run(self, *arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.path), "--talosconfig", "talosconfig", *arguments], capture_output=True, text=True, timeout=60
        )


def test_take_streams_through_talosctl_and_keeps_a_verified_snapshot(tmp_path):
    fake = FakeTalosctl(tmp_path, etcd_snapshot=etcd_tool.fake_talosctl_setup())
    store = _store(tmp_path)
    taken = store.take("alpha", "cp-a", "before-upgrade", fake.snapshot_to(CP))
    assert taken.verification.level == "etcd" and taken.snapshot.path.read_bytes() == (
        etcd_tool.genuine_snapshot().read_bytes()
    )
    [call] = fake.calls()
    assert call[:5] == ["--talosconfig", "talosconfig", "--nodes", CP, "etcd"] and call[5] == "snapshot"
    assert Path(call[6]).name == "etcd.snapshot" and Path(call[6]).parent.parent == store.folder("alpha")
    assert not Path(call[6]).parent.exists()  # the incoming folder is gone
    assert store.snapshots("alpha") == [taken.snapshot]


def test_talosctl_prints_what_the_real_one_prints(tmp_path):
    fake = FakeTalosctl(tmp_path, etcd_snapshot=etcd_tool.fake_talosctl_setup())
    ran = fake.run("--nodes", CP, "etcd", "snapshot", str(tmp_path / "db.snapshot"))
    report = etcd_tool.genuine_report()
    assert ran.returncode == 0 and ran.stdout.splitlines() == [
        f'etcd snapshot saved to "{tmp_path / "db.snapshot"}" ({report["size"]} bytes)',
        (
            f"snapshot info: hash {report['etcd_hash']}, revision {report['revision']}, total keys "
            f"{report['total_keys']}, total size {report['total_size']}"
        ),
    ]
    assert stat.S_IMODE((tmp_path / "db.snapshot").stat().st_mode) == 0o600
    multi = fake.run("--nodes", f"{CP},127.11.1.12", "etcd", "snapshot", str(tmp_path / "x.snapshot"))
    assert multi.returncode == 1 and "not supported with multiple nodes" in multi.stderr


@pytest.mark.parametrize(
    "scenario, words",
    [
        ({"etcd_snapshot_damage": "flip"}, "sha256"),
        ({"etcd_snapshot_damage": "cut"}, "sha256 checksum not found"),
        ({"broken": [CP]}, "connection refused"),
        ({"fail": {"etcd": [CP]}}, "rpc error"),
    ],
    ids=["byte flipped in transit", "stream cut", "node down", "talosctl fails"],
)
def test_take_refuses_and_keeps_nothing_when_the_stream_is_bad(tmp_path, scenario, words):
    damage = scenario.pop("etcd_snapshot_damage", None)
    fake = FakeTalosctl(tmp_path, etcd_snapshot=etcd_tool.fake_talosctl_setup(damage), **scenario)
    store = _store(tmp_path)
    with pytest.raises(es.SnapshotError, match=words):
        store.take("alpha", "cp-a", "before-upgrade", fake.snapshot_to(CP))
    assert store.snapshots("alpha") == [] and set(os.listdir(store.folder("alpha"))) <= {".lock"}


def test_take_refuses_an_answer_without_a_file(tmp_path):
    class Answer:
        ok, reason = True, ""

    with pytest.raises(es.SnapshotError, match="wrote no file"):
        _store(tmp_path).take("alpha", "cp-a", "manual", lambda path: Answer())


def test_etcd_status_in_talosctls_table(tmp_path):
    nodes = [CP, "127.11.1.12", "127.11.1.13"]
    fake = FakeTalosctl(
        tmp_path,
        broken=["127.11.1.13"],
        etcd_status={
            "127.11.1.12": {
                "member_id": "0a1b2c3d4e5f6071",
                "db_size": 21_000_000,
                "db_size_in_use": 7_350_000,
                "errors": ["NOSPACE"],
            }
        },
    )
    ran = fake.run("--nodes", ",".join(nodes), "etcd", "status")
    assert ran.returncode == 0
    lines = ran.stdout.splitlines()
    header = (
        "NODE          MEMBER             DB SIZE   IN USE            LEADER             RAFT INDEX   "
        "RAFT TERM   RAFT APPLIED INDEX   LEARNER   PROTOCOL   STORAGE   ERRORS"
    )
    assert lines[0] == header and len(lines) == 3
    leader = hashlib.sha256(CP.encode()).hexdigest()[:16]
    assert lines[1].split() == [
        CP,
        leader,
        "17",
        "MB",
        "4.5",
        "MB",
        "(26.09%)",
        leader,
        "53391",
        "4",
        "53391",
        "false",
        "3.6.5",
        "3.6.0",
    ]
    assert lines[2].split() == [
        "127.11.1.12",
        "0a1b2c3d4e5f6071",
        "21",
        "MB",
        "7.4",
        "MB",
        "(35.00%)",
        leader,
        "53391",
        "4",
        "53391",
        "false",
        "3.6.5",
        "3.6.0",
        "NOSPACE",
    ]
    # Columns line up (tabwriter, padding 3): every cell starts where its header does; the last one is not padded.
    starts = [
        header.index(column)
        for column in (
            "MEMBER",
            "DB SIZE",
            "IN USE",
            "LEADER",
            "RAFT INDEX",
            "RAFT TERM",
            "RAFT APPLIED INDEX",
            "LEARNER",
            "PROTOCOL",
            "STORAGE",
            "ERRORS",
        )
    ]
    for line in lines[1:]:
        assert all(line[start - 1] == " " and line[start] != " " for start in starts[:-1])
    assert lines[1].endswith("3.6.0     ") and lines[2].endswith("3.6.0     NOSPACE")
    assert ran.stderr.startswith("WARNING: 1 error occurred:\n\t* 127.11.1.13: rpc error: code = Unavailable")
    down = FakeTalosctl(tmp_path, broken=[CP]).run("--nodes", CP, "etcd", "status")
    assert down.returncode == 1 and "error getting status" in down.stderr and down.stdout == ""


# go-humanize v1.0.1's own test table for Bytes, and its README's example (82854982 -> 83 MB).
SIZES = {
    0: "0 B",
    1: "1 B",
    803: "803 B",
    999: "999 B",
    1024: "1.0 kB",
    9999: "10 kB",
    999_999: "1000 kB",
    1024 * 1024: "1.0 MB",
    9_999_000: "10 MB",
    999_999_000: "1000 MB",
    1_000_000_000: "1.0 GB",
    82_854_982: "83 MB",
}


def test_the_fake_prints_sizes_as_go_humanize_does(tmp_path):
    nodes = {f"127.11.2.{index}": size for index, size in enumerate(SIZES, start=1)}
    fake = FakeTalosctl(
        tmp_path, etcd_status={node: {"db_size": size, "db_size_in_use": size // 2} for node, size in nodes.items()}
    )
    ran = fake.run("--nodes", ",".join(nodes), "etcd", "status")
    lines = ran.stdout.splitlines()
    column = lines[0].index("DB SIZE"), lines[0].index("IN USE")
    printed = {line.split()[0]: line[column[0] : column[1]].strip() for line in lines[1:]}
    assert printed == {node: SIZES[size] for node, size in nodes.items()}
    assert lines[1].split()[6] == "(0.00%)"  # an empty database: no division by zero


@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 5000 + "]" * 5000, "nested more than 16 levels deep"),
        ('{"file": "x"' + " " * (es.MANIFEST_LIMIT + 1) + "}", "over the 262,144-byte limit"),
        ('{"file": "a", "file": "b"}', "appears twice in one object"),
        ("not json", "is not valid JSON"),
    ],
    ids=["nested", "huge", "duplicate keys", "not JSON"],
)
def test_a_manifest_the_strict_reader_refuses_stops_the_store(tmp_path, text, words):
    """Issue 26, item 5 (low): a deeply nested manifest crashed the listing with a RecursionError (b4ffe4b); a huge
    one was read whole. Each is now a StoreError naming the file, before anything is asked of a node."""
    store = _store(tmp_path)
    snapshot = _add(store, T0).snapshot
    snapshot.manifest_path.write_text(text)
    for call in (lambda: store.snapshots("alpha"), lambda: store.preflight("alpha"), lambda: store.prune("alpha")):
        with pytest.raises(es.StoreError) as refused:
            call()
        assert str(refused.value).startswith(
            f"etcd-snapshots/lab/alpha/{snapshot.manifest_path.name}: not a snapshot manifest ("
        )
        assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_linked_manifest_or_folder_stops_the_store(tmp_path):
    store = _store(tmp_path)
    snapshot = _add(store, T0).snapshot
    outside = tmp_path / "outside.json"
    outside.write_text(snapshot.manifest_path.read_text())
    snapshot.manifest_path.unlink()
    snapshot.manifest_path.symlink_to(outside)
    with pytest.raises(es.StoreError, match="a symbolic link where a snapshot's manifest should be"):
        store.snapshots("alpha")
    other = _store(tmp_path / "second")
    (tmp_path / "second" / "work").mkdir(parents=True)
    (tmp_path / "second" / "work" / "etcd-snapshots").symlink_to(tmp_path / "work" / "etcd-snapshots")
    with pytest.raises(es.StoreError, match=r"^etcd-snapshots: not a folder \(a symbolic link or a file\)"):
        other.snapshots("alpha")


def test_a_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    store = _store(tmp_path)
    store.ensure_folder("alpha")
    monkeypatch.setattr(es.os, "getuid", lambda: os.stat(tmp_path).st_uid + 4242)
    with pytest.raises(es.SnapshotError, match="not by this user"):
        store.ensure_folder("alpha")
