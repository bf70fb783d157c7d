"""`terravixens restore-etcd`: Talos' documented etcd disaster recovery, guarded — the exact talosctl sequence, each
refusal before anything is reset, and each failure's one line of what is done and what is not.

talosctl is tests/fake_talosctl.py (its disaster-recovery block: `reset`, `service etcd` and its state after a reset,
`bootstrap --recover-from` reading the file with etcd's code, `etcd members` failing without a leader); the snapshots
are genuine (tests/etcd_tool.py). A real cluster adds the reboots (minutes each), etcd's restore log, and the
Kubernetes control plane coming back; the error texts of a node without etcd are inferred (see the fake).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest

from terravixens.etcd_snapshots import SnapshotStore, manifest_path, no_snapshot_reason
from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy
from terravixens.operations.restore_etcd import RestoreOptions, ours, restore_etcd
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl, service_states
from tests import etcd_tool
from tests.fake_terraform import FakeTerraform, platform_state
from tests.restore_lab import bootstrapped, resets, run, sha256_of, snapshot_file, tools
from tests.tools_on_path import Tools

CP = {"cp-a": "10.11.1.11", "cp-b": "10.11.1.12", "cp-c": "10.11.1.13"}
ALL = ",".join(CP.values())
RESET = "reset --graceful=false --reboot --system-labels-to-wipe=EPHEMERAL --wait --timeout 60s"
HEALTH = f"health --control-plane-nodes {ALL} --wait-timeout 60s --worker-nodes 10.11.1.21,10.11.1.22"
UNITS = ["reset cp-a", "reset cp-b", "reset cp-c", "etcd Preparing", "bootstrap cp-a", "health"]


def stop(example_site, tmp_path, fake: Tools, source: Path, **changes) -> tuple[OperationError, Console]:
    console = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        run(example_site, tmp_path, fake, source, console=console, **changes)
    return caught.value, console


# ---------------------------------------------------------------------------------------------------------- the path
def test_the_documented_sequence_exactly(example_site, tmp_path):
    """Look (service etcd, members: no leader), reset each control plane by name, poll until every etcd is
    Preparing, bootstrap the site's bootstrap node from the file, health."""
    fake, source = tools(tmp_path), snapshot_file(tmp_path)
    code, console = run(example_site, tmp_path, fake, source)
    assert code == ExitCode.OK
    assert fake.log() == [
        f"talosctl {ALL} service etcd",
        "talosctl 10.11.1.11 etcd members",
        "talosctl 10.11.1.12 etcd members",
        "talosctl 10.11.1.13 etcd members",
        f"talosctl 10.11.1.11 {RESET}",
        f"talosctl 10.11.1.12 {RESET}",
        f"talosctl 10.11.1.13 {RESET}",
        f"talosctl {ALL} service etcd",  # Waiting everywhere
        f"talosctl {ALL} service etcd",  # Preparing everywhere
        f"talosctl 10.11.1.11 bootstrap --recover-from={bootstrapped(fake)}",
        f"talosctl 10.11.1.11 {HEALTH}",
    ]
    state = fake.state()
    assert state["recovered"] == {
        "node": "10.11.1.11",
        "file": str(bootstrapped(fake)),
        "skip_hash_check": False,
        "sha256": sha256_of(source),  # the very bytes verified
        "mode": "0o600",
        "folder_mode": "0o700",
    }
    assert not bootstrapped(fake).parent.exists()  # the private copy is gone afterwards
    assert {address: etcd["state"] for address, etcd in state["etcd_service"].items()} == dict.fromkeys(
        CP.values(), "Running"
    )
    assert [member["hostname"] for member in state["members"]] == ["cp-a", "cp-b", "cp-c"]  # rejoined, new ids
    assert console.journal.done == [
        "verify (verified)",
        "etcd check (no leader)",
        "confirmation",
        *UNITS[:3],
        "etcd Preparing (every control plane, after 2 polls)",
        *UNITS[4:],
    ]
    output = console.out.getvalue()
    report = etcd_tool.genuine_report()
    assert (
        f'platform-prod: bootstrap — recovering from snapshot "{bootstrapped(fake)}": hash {report["etcd_hash"]}, '
        f"revision {report['revision']}, total keys {report['total_keys']}, total size {report['total_size']}"
    ) in output
    assert (
        "platform-prod: verify — its etcd members: cp-a (https://10.11.1.11:2380); this cluster's control planes "
        "among them: cp-a"
    ) in output
    assert "platform-prod: etcd — cp-b (10.11.1.12): etcd Waiting, health ?, [Waiting]: Error running " in output
    assert "platform-prod: etcd — cp-a lists no members (exit 1: error getting members: 1 error occurred:" in output
    assert output.splitlines()[-1].startswith(
        "restored etcd of prod from db.snapshot (etcd's own checks: revision 24, 20 keys); next: `terravixens deploy "
        "platform-prod`"
    )


def test_a_kept_snapshot_says_where_it_came_from(example_site, tmp_path):
    store = SnapshotStore(tmp_path, "homelab")
    taken = store.add("prod", etcd_tool.genuine_snapshot(), "cp-b", "manual")
    fake = tools(tmp_path)
    code, console = run(example_site, tmp_path, fake, taken.snapshot.path)
    assert code == ExitCode.OK
    assert "through cp-b (manual), as its manifest records" in console.out.getvalue()
    assert fake.state()["recovered"]["sha256"] == sha256_of(taken.snapshot.path)


# ---------------------------------------------------------------------------------------------------------- refusals
def test_a_working_etcd_is_not_restored_over_without_force(example_site, tmp_path):
    fake = tools(tmp_path, etcd_service={})  # every etcd Running, healthy: members answer
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path))
    assert error.code == ExitCode.REFUSED
    assert str(error).startswith(
        "etcd of prod works: 3 members listed through cp-a. Restoring db.snapshot over it loses every write since "
        "that snapshot was taken."
    )
    assert str(error).endswith("pass --force (a fresh snapshot of this etcd is taken first); nothing was done")
    assert fake.log() == [f"talosctl {ALL} service etcd", "talosctl 10.11.1.11 etcd members"] and not resets(fake)
    assert console.journal.line(interrupted=False) == (
        f"stopped at confirmation: done: verify (verified), etcd check (answers through cp-a); not done: "
        f"confirmation, {', '.join(UNITS)}"
    )


def test_force_snapshots_the_etcd_that_answers_before_the_first_reset(example_site, tmp_path):
    fake = tools(tmp_path, etcd_service={})
    code, console = run(example_site, tmp_path, fake, snapshot_file(tmp_path), force=True)
    assert code == ExitCode.OK
    log = fake.log()
    snapshot = next(line for line in log if " etcd snapshot " in line)
    assert snapshot.startswith("talosctl 10.11.1.11 etcd snapshot ")
    assert log.index(snapshot) < log.index(f"talosctl 10.11.1.11 {RESET}")
    [kept] = (tmp_path / "etcd-snapshots" / "homelab" / "prod").glob("*.snapshot")
    assert kept.name.endswith("_cp-a_restore-etcd.snapshot")
    assert "--force: etcd answers, and restoring db.snapshot loses every write since that snapshot" in (
        console.out.getvalue()
    )
    assert console.journal.done[2:4] == ["confirmation", f"snapshot (etcd-snapshots/homelab/prod/{kept.name})"]


def test_force_without_a_fresh_snapshot_resets_nothing(example_site, tmp_path):
    fake = tools(tmp_path, etcd_service={}, etcd_snapshot=etcd_tool.fake_talosctl_setup("flip"))
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path), force=True)
    assert error.code == ExitCode.BACKUP_FAILED and not resets(fake)
    assert str(error).startswith("platform-prod: no verified etcd snapshot before restore-etcd (3 control planes")
    assert console.journal.line(interrupted=False) == (
        f"stopped at snapshot: done: verify (verified), etcd check (answers through cp-a), confirmation; not done: "
        f"snapshot, {', '.join(UNITS)}"
    )


def test_force_with_a_reason_goes_on_without_the_snapshot(example_site, tmp_path):
    fake = tools(tmp_path, etcd_service={})
    policy = SnapshotPolicy(skip_reason=no_snapshot_reason("etcd serves stale data since 09:12"))
    code, console = run(example_site, tmp_path, fake, snapshot_file(tmp_path), force=True, snapshot=policy)
    assert code == ExitCode.OK and not [line for line in fake.log() if " etcd snapshot " in line]
    assert "snapshot — skipped before restore-etcd: etcd serves stale data since 09:12 (--no-snapshot)" in (
        console.out.getvalue()
    )


def test_retention_of_the_forced_snapshot_keeps_the_file_being_restored(example_site, tmp_path):
    """The file restored is the oldest of a full store (keep 2): the snapshot taken first must not prune it."""
    store = SnapshotStore(tmp_path, "homelab", keep=2)
    oldest = store.add("prod", etcd_tool.genuine_snapshot(), "cp-a", "manual").snapshot.path
    store.add("prod", etcd_tool.genuine_snapshot(), "cp-a", "manual")
    fake = tools(tmp_path, etcd_service={})
    code, _ = run(example_site, tmp_path, fake, oldest, force=True, snapshot=SnapshotPolicy(keep=2))
    assert code == ExitCode.OK and oldest.exists()
    assert fake.state()["recovered"]["sha256"] == sha256_of(oldest)


@pytest.mark.parametrize(
    "data, skip, message",
    [
        (b"x" * 544, False, "not a usable etcd snapshot (sha256): the database hashes to "),  # 512+32: a "digest"
        (b"", False, "0 bytes, no etcd digest at its end"),
        (b"", True, "0 bytes is not whole pages: not a bbolt database"),
        (b"\0" * 1000, True, "1000 bytes is not whole pages: not a bbolt database"),
    ],
)
def test_a_file_that_does_not_verify_is_refused_before_anything(example_site, tmp_path, data, skip, message):
    fake = tools(tmp_path)
    error, _ = stop(example_site, tmp_path, fake, snapshot_file(tmp_path, data=data), skip_hash_check=skip)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert str(error).startswith(f"--from db.snapshot: {message}") and str(error).endswith("nothing was done")


def test_a_snapshot_changed_in_transit_is_refused(example_site, tmp_path):
    data = bytearray(etcd_tool.genuine_snapshot().read_bytes())
    data[len(data) // 2] ^= 1
    fake = tools(tmp_path)
    error, _ = stop(example_site, tmp_path, fake, snapshot_file(tmp_path, data=bytes(data)))
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert "not a usable etcd snapshot (sha256): the database hashes to " in str(error)
    # --skip-hash-check does not wave a wrong digest through: it is only for a file without one
    error, _ = stop(example_site, tmp_path, fake, tmp_path / "db.snapshot", skip_hash_check=True)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []


def test_a_db_copy_without_digest_needs_the_flag_and_is_restored_loudly(example_site, tmp_path):
    database = etcd_tool.genuine_snapshot().read_bytes()[:-32]  # what `talosctl cp /var/lib/etcd/member/snap/db` gives
    fake = tools(tmp_path)
    source = snapshot_file(tmp_path, "db", database)
    error, _ = stop(example_site, tmp_path, fake, source)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert "no etcd digest at its end" in str(error) and "pass --skip-hash-check" in str(error)

    code, console = run(example_site, tmp_path, fake, source, skip_hash_check=True)
    assert code == ExitCode.OK
    assert f"talosctl 10.11.1.11 bootstrap --recover-from={bootstrapped(fake)} --recover-skip-hash-check" in fake.log()
    assert fake.state()["recovered"]["skip_hash_check"] is True
    assert fake.state()["recovered"]["sha256"] == sha256_of(source)  # the db as given, no digest added
    assert "verify — WARNING: db has no etcd digest (--skip-hash-check): read by etcd's own checks: revision 24" in (
        console.out.getvalue()
    )
    assert console.journal.done[0] == "verify (no digest: --skip-hash-check)"


def test_a_db_copy_that_is_not_a_database_is_refused(example_site, tmp_path):
    fake = tools(tmp_path)
    error, _ = stop(example_site, tmp_path, fake, snapshot_file(tmp_path, "db", b"\0" * 8192), skip_hash_check=True)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert "--from db: not a usable etcd database (bbolt): not a readable bbolt database" in str(error)


def test_another_clusters_snapshot_is_refused(example_site, tmp_path):
    fake = tools(tmp_path)
    source = snapshot_file(tmp_path, "staging_20250101T000000.000000Z_cp-a_manual.snapshot")
    error, _ = stop(example_site, tmp_path, fake, source)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert "its name says it is a snapshot of cluster 'staging', not of 'prod'" in str(error)


def test_a_kept_snapshot_replaced_since_is_refused(example_site, tmp_path):
    store = SnapshotStore(tmp_path, "homelab")
    kept = store.add("prod", etcd_tool.genuine_snapshot(), "cp-a", "manual").snapshot.path
    other = etcd_tool.make_fixture(tmp_path / "other.snapshot", keys=3)
    shutil.copyfile(other["path"], kept)  # a genuine snapshot, but not the one the manifest vouches for
    fake = tools(tmp_path)
    error, _ = stop(example_site, tmp_path, fake, kept)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    recorded = json.loads(manifest_path(kept).read_text())["sha256"]
    assert f"is not the {recorded} its manifest recorded: the file was replaced" in str(error)


def test_a_missing_file_is_bad_input(example_site, tmp_path):
    fake = tools(tmp_path)
    error, _ = stop(example_site, tmp_path, fake, tmp_path / "nowhere.snapshot")
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert str(error) == "--from nowhere.snapshot: cannot read it (No such file or directory); nothing was done"


@pytest.mark.parametrize("given", ["homelab/staging", "prod", None])
def test_the_typed_confirmation_is_site_and_cluster(example_site, tmp_path, given):
    fake = tools(tmp_path)
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path), confirm=given)
    assert error.code == ExitCode.DECLINED and not resets(fake)
    assert console.journal.line(interrupted=False) == (
        f"stopped at confirmation: done: verify (verified), etcd check (no leader); not done: confirmation, "
        f"{', '.join(UNITS)}"
    )


def test_the_confirmation_says_what_is_lost(example_site, tmp_path):
    fake = tools(tmp_path)
    console = Console(out=io.StringIO(), answers=iter(["homelab/prod"]))
    code, _ = run(example_site, tmp_path, fake, snapshot_file(tmp_path), confirm=None, console=console)
    assert code == ExitCode.OK
    assert (
        "This resets cp-a, cp-b, cp-c of cluster prod (their EPHEMERAL partition, which holds etcd's data, is wiped) "
        "and restores etcd from db.snapshot on cp-a: every write to the cluster after that snapshot is lost: type "
        "homelab/prod to confirm: homelab/prod"
    ) in console.out.getvalue()


# ---------------------------------------------------------------------------------------------------------- failures
def test_a_reset_that_fails_stops_there(example_site, tmp_path):
    fake = tools(tmp_path, fail={"reset": ["10.11.1.12"]})
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path))
    assert error.code == ExitCode.FAILED
    assert str(error) == (
        "talosctl reset of cp-b failed (exit 1: error: reset on 10.11.1.12 failed: rpc error: code = Unavailable); "
        "etcd is not restored: fix it and run the same command again"
    )
    assert resets(fake) == [f"talosctl 10.11.1.11 {RESET}", f"talosctl 10.11.1.12 {RESET}"]
    assert console.journal.line(interrupted=False) == (
        "stopped at reset cp-b (reset): done: verify (verified), etcd check (no leader), confirmation, reset cp-a; not "
        "done: reset cp-b, reset cp-c, etcd Preparing, bootstrap cp-a, health"
    )


def test_a_reset_that_hangs_is_stopped_and_not_known(example_site, tmp_path):
    fake = tools(tmp_path, hang={"reset": ["10.11.1.12"]})
    talosctl = Talosctl(str(fake.talosctl_path), "talosconfig", 1, grace=1)
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path), talosctl=talosctl)
    assert error.code == ExitCode.FAILED
    assert "talosctl reset did not answer within 2s (timeout 1s): stopped with its process group" in str(error)
    assert console.journal.line(interrupted=False) == (
        "stopped at reset cp-b (reset): done: verify (verified), etcd check (no leader), confirmation, reset cp-a; not "
        "known: reset cp-b (list its etcd state (talosctl service etcd) and run the same command again: a reset node "
        "is reset again); not done: reset cp-c, etcd Preparing, bootstrap cp-a, health"
    )


def test_etcd_that_never_gets_to_preparing_is_a_bounded_stop(example_site, tmp_path):
    fake = tools(tmp_path, after_reset=["Waiting"])
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path), timeout=20, poll=5)
    assert error.code == ExitCode.FAILED
    assert str(error).startswith(
        "etcd is not Preparing on cp-a, cp-b, cp-c within 20s (cp-a: Waiting; cp-b: Waiting; cp-c: Waiting)"
    )
    # the look, then polls at 0, 5, 10, 15 and 20s: none after the bound
    assert fake.log().count(f"talosctl {ALL} service etcd") == 1 + 5
    assert not [line for line in fake.log() if " bootstrap " in line]
    assert console.journal.line(interrupted=False).endswith("not done: etcd Preparing, bootstrap cp-a, health")


def test_etcd_running_after_its_reset_stops_before_a_split(example_site, tmp_path):
    fake = tools(tmp_path, after_reset=["Waiting", "Running"])
    error, _ = stop(example_site, tmp_path, fake, snapshot_file(tmp_path))
    assert error.code == ExitCode.FAILED and "etcd is Running on cp-a, cp-b, cp-c after its reset" in str(error)
    assert not [line for line in fake.log() if " bootstrap " in line]


def test_a_bootstrap_that_fails_leaves_the_control_planes_waiting(example_site, tmp_path):
    fake = tools(tmp_path, fail={"bootstrap": ["10.11.1.11"]})
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path))
    assert error.code == ExitCode.FAILED
    assert str(error).endswith(
        "etcd is not restored; the control planes are reset and wait (Preparing): fix it and run the same command again"
    )
    assert console.journal.line(interrupted=False).startswith("stopped at bootstrap cp-a (bootstrap): done: verify")


def test_a_bootstrap_interrupted_is_not_known(example_site, tmp_path, monkeypatch):
    def interrupted(*_, **__):
        raise KeyboardInterrupt

    fake = tools(tmp_path)
    monkeypatch.setattr(Talosctl, "bootstrap_recover", interrupted)
    console = Console(out=io.StringIO())
    with pytest.raises(KeyboardInterrupt):
        run(example_site, tmp_path, fake, snapshot_file(tmp_path), console=console)
    assert console.journal.line(interrupted=True).endswith(
        "not known: bootstrap cp-a (look at etcd on it (talosctl service etcd): Running means the restore was "
        "accepted — do not bootstrap again; Preparing means it was not: run the same command again); not done: health"
    )


def test_health_after_the_restore_is_checked(example_site, tmp_path):
    fake = tools(tmp_path, health_script=[False])
    error, _ = stop(example_site, tmp_path, fake, snapshot_file(tmp_path))
    assert error.code == ExitCode.FAILED
    assert str(error).startswith(
        "etcd was restored from db.snapshot on cp-a (bootstrap accepted), but talosctl health failed (exit 1: "
    )


def test_the_node_refuses_a_file_without_digest_when_not_told(tmp_path):
    """The fake is faithful where terravixens' own check would otherwise hide it: a raw `db` bootstrapped without
    --recover-skip-hash-check is accepted by talosctl, then refused by etcd on the node (Failed), and health says so."""
    waiting = {"10.11.1.11": {"state": "Preparing", "health": "?", "events": [["Preparing", "Running pre state"]]}}
    fake = tools(tmp_path, etcd_service=waiting, wiped=["10.11.1.11"])
    database = snapshot_file(tmp_path, "db", etcd_tool.genuine_snapshot().read_bytes()[:-32])
    talosctl = fake.talosctl()
    assert talosctl.bootstrap_recover("10.11.1.11", str(database)).ok  # talosctl itself is content
    after = fake.state()["etcd_service"]["10.11.1.11"]
    assert after["state"] == "Failed" and "snapshot missing hash but --skip-hash-check=false" in after["events"][0][1]
    health = talosctl.health(["10.11.1.11"], [])
    assert not health.ok and "current state [Failed] Failed to run pre stage" in health.stderr


def test_a_node_whose_etcd_data_was_not_wiped_refuses_the_bootstrap(tmp_path):
    waiting = {"10.11.1.11": {"state": "Preparing", "health": "?", "events": [["Preparing", "Running pre state"]]}}
    fake = tools(tmp_path, etcd_service=waiting)
    answer = fake.talosctl().bootstrap_recover("10.11.1.11", str(snapshot_file(tmp_path)))
    # go-multierror's text, then the line talosctl's main prints it on
    assert not answer.ok and answer.stderr == (
        "error executing bootstrap: 1 error occurred:\n\t* 10.11.1.11: rpc error: code = AlreadyExists desc = etcd "
        "data directory is not empty\n\n\n"
    )


# ---------------------------------------------------------------------------------------------------------- the fake
def test_service_etcd_prints_talosctls_block_and_is_read_back(tmp_path):
    """The layout of the disaster-recovery docs' sample (tabwriter, padding 3; EVENTS newest first), per node."""
    fake = tools(tmp_path, etcd_service={})
    talosctl = fake.talosctl()
    assert talosctl.reset_ephemeral("10.11.1.11").ok
    talosctl.service(["10.11.1.11"], "etcd")
    answer = talosctl.service(["10.11.1.11", "10.11.1.12"], "etcd")
    assert answer.stdout.splitlines()[:6] == [
        "NODE     10.11.1.11",
        "ID       etcd",
        "STATE    Preparing",
        "HEALTH   ?",
        "EVENTS   [Preparing]: Running pre state (2s ago)",
        '         [Waiting]: Waiting for service "cri" to be "up", time sync (6s ago)',
    ]
    states = service_states(answer.stdout)
    assert {node: (s.state, s.health) for node, s in states.items()} == {
        "10.11.1.11": ("Preparing", "?"),
        "10.11.1.12": ("Running", "OK"),
    }
    assert states["10.11.1.11"].last_event == "[Preparing]: Running pre state (2s ago)"


def test_a_node_that_does_not_answer_is_a_warning_in_service_etcd(tmp_path):
    fake = tools(tmp_path, unreachable=["10.11.1.12"])
    answer = fake.talosctl().service(["10.11.1.11", "10.11.1.12"], "etcd")
    assert answer.ok and answer.stderr.startswith("WARNING: 1 error occurred:\n\t* 10.11.1.12: rpc error: ")
    assert list(service_states(answer.stdout)) == ["10.11.1.11"]
    assert "LAST HEALTH MESSAGE   context deadline exceeded" in answer.stdout  # the column widens for it
    alone = fake.talosctl().service(["10.11.1.12"], "etcd")
    assert not alone.ok and "connect: no route to host" in alone.stderr


def test_restore_through_the_platform_layers_talosconfig(example_site, tmp_path):
    fake = tools(tmp_path)
    tf = FakeTerraform({"platform-prod": platform_state(list(CP), ["wk-a", "wk-b"], "cp-a")})
    ws = Workspace(example_site, root=tmp_path)
    console = Console(out=io.StringIO())
    options = RestoreOptions(
        source=snapshot_file(tmp_path), confirm="homelab/prod", poll=0.01, timeout=60, sleep=lambda _: None
    )
    assert restore_etcd(ws, "prod", tf, fake.talosctl(timeout=60), options, console) == ExitCode.OK
    assert [call[1:] for call in tf.calls] == [
        ("init", "-input=false", "-no-color"),
        ("output", "-raw", "talosconfig"),
    ]
    [config] = {call[1] for call in fake.state()["calls"] if call[0] == "--talosconfig"}
    assert Path(config).parent.name.startswith("terravixens-talosconfig-") and not Path(config).exists()
    assert console.journal.done[:4] == ["verify (verified)", "synth", "talosconfig", "etcd check (no leader)"]


# ------------------------------------------------------------------------------- whose etcd (issue 26, item 3)
FOREIGN_REFUSAL = (
    "it is not this cluster's etcd: its members db-1 (https://10.20.0.5:2380) are none of prod's control planes "
    "(cp-a, cp-b, cp-c) by hostname or peer address. Restoring it would give prod another cluster's objects, "
    "identities and Secrets; to restore it anyway, knowingly, pass --force-foreign-snapshot db-1; nothing was done"
)


def foreign_file(tmp_path: Path, name: str) -> Path:
    return snapshot_file(tmp_path, name, etcd_tool.foreign_snapshot().read_bytes())


@pytest.mark.parametrize(
    "name",
    ["whatever.snapshot", "prod_20250101T000000.000000Z_cp-b_manual.snapshot"],
    ids=["any name", "this cluster's naming pattern, no manifest"],
)
def test_another_etcds_genuine_snapshot_is_refused_before_anything(example_site, tmp_path, name):
    """Issue 26, item 3 (medium): another etcd cluster's genuine snapshot reset every control plane and bootstrapped
    from it (exit 0) on b4ffe4b, and a forged name printed an origin ("through cp-b (manual)"). Its members (db-1,
    not a control plane of prod by name or peer address) now refuse it before any talosctl call."""
    fake = tools(tmp_path)
    error, console = stop(example_site, tmp_path, fake, foreign_file(tmp_path, name))
    assert error.code == ExitCode.REFUSED and fake.log() == [] and "recovered" not in fake.state()
    assert str(error) == f"--from {name}: {FOREIGN_REFUSAL}"
    assert "through cp-b" not in console.out.getvalue()
    assert console.journal.line(interrupted=False).startswith("stopped at verify: done: nothing; not done: verify,")
    assert not list((tmp_path / "etcd-snapshots" / "homelab" / "prod").glob(".restore-*"))  # the copy is gone


def test_an_origin_is_printed_only_when_a_manifest_vouches_for_it(example_site, tmp_path):
    """Issue 26, item 3: this cluster's snapshot named like a kept one, without its manifest, restores; but its name
    alone says nothing of where it came from (b4ffe4b printed "taken … through cp-b (manual)" from the name)."""
    fake = tools(tmp_path)
    source = snapshot_file(tmp_path, "prod_20250101T000000.000000Z_cp-b_manual.snapshot")
    code, console = run(example_site, tmp_path, fake, source)
    assert code == ExitCode.OK
    output = console.out.getvalue()
    assert "through cp-b" not in output and "taken 2025-01-01" not in output
    assert "etcd's digest matches; read from a private copy" in output


def test_a_foreign_snapshot_restores_only_with_its_members_typed(example_site, tmp_path):
    fake = tools(tmp_path)
    source = foreign_file(tmp_path, "other.snapshot")
    error, _ = stop(example_site, tmp_path, fake, source, foreign="db-2")
    assert error.code == ExitCode.REFUSED and fake.log() == []
    assert "(--force-foreign-snapshot 'db-2' is not 'db-1')" in str(error)

    console = Console(out=io.StringIO(), answers=iter(["homelab/prod"]))
    code, _ = run(example_site, tmp_path, fake, source, foreign="db-1", confirm=None, console=console)
    assert code == ExitCode.OK
    assert fake.state()["recovered"]["sha256"] == sha256_of(source)
    output = console.out.getvalue()
    assert "verify — WARNING: it is not this cluster's etcd: its members db-1 (https://10.20.0.5:2380)" in output
    assert "restored anyway: --force-foreign-snapshot db-1" in output
    assert (
        "that snapshot is ANOTHER etcd's (members db-1): prod gets its objects, identities and Secrets: type "
        "homelab/prod to confirm"
    ) in output
    assert console.journal.done[0] == "verify (verified, another cluster's (--force-foreign-snapshot))"


def test_a_member_is_this_clusters_by_its_peer_address_too(example_site, tmp_path):
    """A member whose name is not a control plane's (renamed since, or named by another tool) but whose peer URL
    is cp-b's address is this cluster's."""
    source = tmp_path / "renamed.snapshot"
    etcd_tool.make_fixture(source, keys=3, member=("talos-7x2", "https://10.11.1.12:2380"))
    fake = tools(tmp_path)
    code, console = run(example_site, tmp_path, fake, source)
    assert code == ExitCode.OK
    assert "this cluster's control planes among them: talos-7x2 is cp-b" in console.out.getvalue()


def test_members_match_by_hostname_and_any_site_address(example_site):
    cluster = example_site.clusters["prod"]
    hostnamed = cluster.model_copy(
        update={
            "control_planes": {
                **cluster.control_planes,
                "cp-c": cluster.control_planes["cp-c"].model_copy(update={"hostname": "etcd-3"}),
            }
        }
    )
    members = [
        {"id": "1", "name": "etcd-3", "peer_urls": ["https://192.0.2.1:2380"]},
        {"id": "2", "name": "", "peer_urls": ["https://[::ffff:10.11.1.11]:2380", "https://10.11.1.11:2380"]},
        {"id": "3", "name": "db-1", "peer_urls": ["https://10.20.0.5:2380", "not a url"]},
    ]
    assert ours(hostnamed, members) == {"etcd-3": "cp-c", "2": "cp-a"}
    assert ours(cluster, members) == {"2": "cp-a"}  # etcd-3 is nobody's hostname there


def test_without_etcds_own_reading_nobody_can_say_whose_it_is(example_site, tmp_path, monkeypatch):
    monkeypatch.setattr("terravixens.etcd_snapshots.find_tool", lambda: None)
    fake = tools(tmp_path)
    error, _ = stop(example_site, tmp_path, fake, snapshot_file(tmp_path))
    assert error.code == ExitCode.REFUSED and fake.log() == []
    assert "whose etcd it is cannot be read: etcd's own checks did not run" in str(error)
    assert "pass --force-foreign-snapshot unknown" in str(error)


@pytest.mark.parametrize("change", ["replaced", "pruned"])
def test_from_is_read_once_what_was_verified_is_what_is_restored(example_site, tmp_path, monkeypatch, change):
    """Issue 26, item 6 (low): b4ffe4b verified --from, then `bootstrap --recover-from` read the path again minutes
    later — a file replaced (here by another etcd's snapshot) or pruned in between was what got restored. Now the
    private copy verified first is what bootstrap reads."""
    fake = tools(tmp_path)
    source = snapshot_file(tmp_path)
    verified = sha256_of(source)
    original = Talosctl.reset_ephemeral

    def reset_then_change(self, address):
        if source.exists():
            if change == "replaced":
                source.write_bytes(etcd_tool.foreign_snapshot().read_bytes())
            else:
                source.unlink()
        return original(self, address)

    monkeypatch.setattr(Talosctl, "reset_ephemeral", reset_then_change)
    code, _ = run(example_site, tmp_path, fake, source)
    assert code == ExitCode.OK
    assert fake.state()["recovered"]["sha256"] == verified


def test_the_private_copy_is_verified_again_right_before_bootstrap(example_site, tmp_path, monkeypatch):
    fake = tools(tmp_path)
    original = Talosctl.reset_ephemeral

    def reset_then_damage(self, address):
        [copy] = (tmp_path / "etcd-snapshots" / "homelab" / "prod").glob(".restore-*/snapshot")
        data = bytearray(copy.read_bytes())
        data[len(data) // 2] ^= 1
        os.chmod(copy, 0o600)
        copy.write_bytes(bytes(data))
        return original(self, address)

    monkeypatch.setattr(Talosctl, "reset_ephemeral", reset_then_damage)
    error, console = stop(example_site, tmp_path, fake, snapshot_file(tmp_path))
    assert error.code == ExitCode.FAILED and not [line for line in fake.log() if " bootstrap " in line]
    assert str(error).startswith("the private copy of --from db.snapshot no longer verifies (the database hashes to")
    assert console.journal.line(interrupted=False).startswith("stopped at bootstrap cp-a: done: verify")


def test_a_nested_manifest_beside_from_is_bad_input(example_site, tmp_path):
    """Issue 26, item 5 (low): a deeply nested manifest ended restore-etcd in a RecursionError traceback."""
    source = snapshot_file(tmp_path, "prod_20250101T000000.000000Z_cp-a_manual.snapshot")
    manifest_path(source).write_text('{"file": ' + "[" * 5000 + "]" * 5000 + "}")
    fake = tools(tmp_path)
    error, _ = stop(example_site, tmp_path, fake, source)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert "\n" not in str(error) and "prod_20250101T000000.000000Z_cp-a_manual.json: not a snapshot manifest" in str(
        error
    )
    assert "nested more than 16 levels deep" in str(error)


def test_a_nested_manifest_in_the_store_is_bad_input_before_any_node(example_site, tmp_path):
    """The store restore-etcd reads (its private copy's folder, and --force's retention) is checked up front: a
    nested manifest of another kept snapshot is one line, exit 2, before any talosctl call."""
    store = SnapshotStore(tmp_path, "homelab")
    kept = store.add("prod", etcd_tool.genuine_snapshot(), "cp-a", "manual").snapshot
    kept.manifest_path.write_text("[" * 5000 + "]" * 5000)
    fake = tools(tmp_path, etcd_service={})
    error, _ = stop(example_site, tmp_path, fake, snapshot_file(tmp_path), force=True)
    assert error.code == ExitCode.BAD_INPUT and fake.log() == []
    assert str(error).startswith(f"etcd-snapshots/homelab/prod/{kept.manifest_path.name}: not a snapshot manifest (")
    assert str(error).endswith("; nothing was done") and "\n" not in str(error)
