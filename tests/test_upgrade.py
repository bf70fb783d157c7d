"""Rolling upgrades and image roll-outs that cannot make things worse, driven against a fake `talosctl`
(tests/fake_talosctl.py: a wrapper written into tmp_path answers from a scenario file and records its calls; its etcd
snapshots are genuine ones from an embedded etcd, tests/etcd_tool.py). Nothing is contacted: the site is the loopback
version of the example. A real cluster adds what the fake cannot: the reboot itself (minutes), the installer image
pulled from the factory, the node draining, a snapshot of gigabytes."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terravixens.config.model import TalosImage
from terravixens.exitcodes import ExitCode
from terravixens.operations.upgrade import RESUME, kubernetes_upgrade, rolling_upgrade
from terravixens.runner import parse_duration
from terravixens.talos.image import schematic_id
from terravixens.talos.rolling import (
    Decision,
    Running,
    Unit,
    describe_kubernetes,
    not_on_target,
    release,
    schedule,
    skips_a_minor,
    target_lines,
    unit_lines,
    upgrade_plan,
)
from terravixens.talos_versions import parse_version
from tests import processes, support
from tests.fake_terraform import Outputs
from tests.upgrade_fakes import (
    ADDRESSES,
    FIVE,
    IMAGES,
    ISCSI,
    NAMES,
    NEW,
    SCHEMATIC,
    Fake,
    site_data,
    with_extensions,
)

ROOT = Path(__file__).resolve().parent.parent
IMAGE = f"127.0.0.1:9/nocloud-installer/{SCHEMATIC}:v1.11.6"
# What the upgrade reads of a node: `talosctl version`, then `talosctl get extensions` (the booted image).
READ = ["version", "get"]


@pytest.fixture()
def site():
    return support.site_from(site_data())


@pytest.fixture()
def site3():
    return support.site_from(site_data(workers=3))


def quiet(_: str) -> None:
    pass


def cli(tmp_path: Path, *arguments: str, workers: int = 2, data: dict | None = None) -> subprocess.CompletedProcess:
    """`terravixens upgrade prod` in tmp_path (its etcd snapshots go there), with a ./talosconfig (the fake ignores
    it; a real one is the platform layer's talosconfig output)."""
    site_file = tmp_path / "site.yaml"
    site_file.write_text(json.dumps(data or site_data(workers)))  # JSON is YAML
    (tmp_path / "talosconfig").touch()
    return subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "upgrade", "prod", "--site", str(site_file), *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---------------------------------------------------------------------------------------------------------- plan
def test_plan_is_control_planes_then_workers_by_name(site):
    steps = upgrade_plan(site, "prod")
    assert [(s.node, s.role, s.address) for s in steps] == [
        ("cp-a", "controlplane", "127.11.1.11"),
        ("cp-b", "controlplane", "127.11.1.12"),
        ("cp-c", "controlplane", "127.11.1.13"),
        ("wk-a", "worker", "127.11.1.21"),
        ("wk-b", "worker", "127.11.1.22"),
    ]
    assert {s.image for s in steps} == {IMAGE}


def test_health_first_then_versions_then_one_node_at_a_time_each_gated(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"))
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.ok and outcome.upgraded == FIVE and outcome.done == FIVE
    assert fake.kinds() == ["health"] + READ * 5 + ["upgrade", *READ, "health"] * 5
    assert fake.calls()[2][4:] == ["get", "extensions"]
    health = fake.calls()[0]
    assert health[health.index("--control-plane-nodes") + 1] == "127.11.1.11,127.11.1.12,127.11.1.13"
    assert health[health.index("--worker-nodes") + 1] == "127.11.1.21,127.11.1.22"
    assert health[health.index("--wait-timeout") + 1] == "60s"
    upgrade = fake.calls()[11]
    assert upgrade[upgrade.index("--image") + 1] == IMAGE and "--wait" in upgrade
    assert upgrade[upgrade.index("--timeout") + 1] == "60s"
    assert outcome.summary() == "upgraded: cp-a, cp-b, cp-c, wk-a, wk-b; already current: none"


# ---------------------------------------------------------------------------------------------------------- health
def test_an_unhealthy_cluster_gets_no_node_rebooted_however_often_it_is_run(site, tmp_path):
    """The bug this fixes: each re-run used to upgrade (reboot) one more node of an already unhealthy cluster."""
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.11.5"), "cp-a": "v1.11.6"}, broken=["cp-a"])
    for _ in range(3):
        outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
        assert outcome.summary() == (
            "stopped at cp-a: health check before the first node failed (exit 1: waiting for etcd members to be "
            "healthy: 127.11.1.11: context deadline exceeded); done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b"
        )
    assert fake.upgraded() == [] and fake.kinds() == ["health"] * 3


def test_health_is_checked_after_skipped_nodes_before_the_next_upgrade(site, tmp_path):
    fake = Fake(
        tmp_path, {**dict.fromkeys(FIVE, "v1.11.5"), "cp-a": "v1.11.6", "cp-b": "v1.11.6"}, health_script=[True, False]
    )
    messages = []
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=messages.append)
    assert fake.kinds() == ["health"] + READ * 5 + ["health"]
    assert fake.upgraded() == []
    assert (
        messages[-1]
        == outcome.summary()
        == (
            "stopped at cp-c: health check after skipping cp-a, cp-b failed (exit 1: waiting for etcd members to be "
            "healthy: a member: context deadline exceeded); done: cp-a, cp-b; not touched: cp-c, wk-a, wk-b"
        )
    )


def test_a_cluster_already_on_target_is_still_checked_at_the_end(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"))
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.ok and outcome.skipped == FIVE and outcome.upgraded == []
    assert fake.kinds() == ["health"] + READ * 5 + ["health"]


def test_unhealthy_after_a_node_stops_and_the_rerun_touches_nothing_more(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), breaks_on_upgrade=["cp-b"])
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.exit_code == ExitCode.FAILED
    assert outcome.stopped_at == "cp-b" and outcome.upgraded == ["cp-a", "cp-b"]
    assert outcome.summary() == (
        "stopped at cp-b: health check after upgrading cp-b failed (exit 1: waiting for etcd members to be "
        "healthy: 127.11.1.12: context deadline exceeded); done: cp-a, cp-b; not touched: cp-c, wk-a, wk-b"
    )
    again = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert again.stopped_at == "cp-a" and again.not_touched == FIVE
    assert fake.upgraded() == ["cp-a", "cp-b"]


def test_rerun_after_a_stop_finishes_the_rollout(site, tmp_path):
    fake = Fake(
        tmp_path, {"cp-a": "v1.11.6", "cp-b": "v1.11.6", "cp-c": "v1.11.5", "wk-a": "v1.11.5", "wk-b": "v1.11.5"}
    )
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.ok and outcome.skipped == ["cp-a", "cp-b"] and outcome.upgraded == ["cp-c", "wk-a", "wk-b"]
    assert fake.kinds() == ["health"] + READ * 5 + ["health"] + ["upgrade", *READ, "health"] * 3


# ---------------------------------------------------------------------------------------------------------- failures
def test_a_failed_upgrade_stops_the_rollout(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), fail={"upgrade": ["cp-b"]})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.summary() == (
        "stopped at cp-b: talosctl upgrade failed (on cp-b: exit 1: error: upgrade on 127.11.1.12 failed: rpc "
        "error: code = Unavailable); done: cp-a; not touched: cp-c, wk-a, wk-b"
    )
    assert fake.kinds()[-2:] == ["health", "upgrade"]


def test_an_unreadable_version_stops_before_anything_is_touched(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), fail={"version": ["wk-b"]})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.summary() == (
        "stopped at wk-b: cannot read its Talos version (exit 1: error: version on 127.11.1.22 failed: rpc error: "
        "code = Unavailable); done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b"
    )
    assert fake.upgraded() == []


def test_a_hung_upgrade_is_killed_with_its_children_at_the_deadline(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), hang={"upgrade": ["cp-b"]})
    started = time.monotonic()
    outcome = rolling_upgrade(site, "prod", fake.talosctl(timeout=1), log=quiet)
    assert time.monotonic() - started < 30
    assert outcome.summary() == (
        "stopped at cp-b: talosctl upgrade failed (on cp-b: talosctl upgrade did not answer within 2s (timeout 1s): "
        "stopped with its process group); done: cp-a; not touched: cp-c, wk-a, wk-b"
    )
    pids = processes.recorded(Path(f"{fake.scenario}.hung"))
    assert len(pids) == 2 and processes.all_gone(pids)  # the fake and the child holding its pipes


def test_a_hung_health_check_stops_before_the_first_node(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), hang={"health": ["*"]})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(timeout=1), log=quiet)
    assert outcome.summary() == (
        "stopped at cp-a: health check before the first node failed (talosctl health did not answer within 2s "
        "(timeout 1s): stopped with its process group); done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b"
    )
    assert fake.upgraded() == []


def test_a_hung_image_read_stops_naming_the_node(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), hang={"get": ["wk-a"]})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(timeout=1), log=quiet)
    assert outcome.summary() == (
        "stopped at wk-a: cannot read the image it booted (talosctl get extensions did not answer within 2s (timeout "
        "1s): stopped with its process group); done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b"
    )
    assert processes.all_gone(processes.recorded(Path(f"{fake.scenario}.hung")))


@pytest.mark.parametrize("problem", ["missing", "not-executable"])
def test_a_missing_talosctl_ends_with_where_it_stopped_not_a_traceback(problem, tmp_path):
    binary = tmp_path / "bin" / "talosctl"
    if problem == "not-executable":
        binary.parent.mkdir()
        binary.write_text("#!/bin/sh\n")
    run = cli(tmp_path, "--talosctl", str(binary))
    error = "No such file or directory" if problem == "missing" else "Permission denied"
    assert (run.returncode, run.stderr) == (ExitCode.FAILED, "")
    assert run.stdout.splitlines()[-1] == (
        f"stopped at cp-a: health check before the first node failed (cannot run {binary}: {error}); done: none; "
        f"not touched: cp-a, cp-b, cp-c, wk-a, wk-b"
    )


def interrupted(
    tmp_path: Path,
    signum: int,
    hang: dict,
    versions: dict | None = None,
    *,
    data: dict | None = None,
    fake: Fake | None = None,
) -> tuple[int, str, str, list]:
    """Runs `terravixens upgrade` until the fake hangs, sends `signum`, returns (exit code, stdout, stderr, pids of
    the hung talosctl and its child). `fake`: one the test made (its scenario's `hang` is set here)."""
    if fake is None:
        fake = Fake(tmp_path, versions or dict.fromkeys(FIVE, "v1.11.5"), hang=hang)
    else:
        fake.change(hang={command: [ADDRESSES[n] for n in nodes] for command, nodes in hang.items()})
    site_file = tmp_path / "site.yaml"
    site_file.write_text(json.dumps(data or site_data()))
    (tmp_path / "talosconfig").touch()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "terravixens.cli",
            "upgrade",
            "prod",
            "--site",
            str(site_file),
            "--talosctl",
            str(fake.path),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    hung = Path(f"{fake.scenario}.hung")
    deadline = time.monotonic() + 60
    while not processes.recorded(hung):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    return process.returncode, stdout, stderr, processes.recorded(hung)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupt_stops_talosctl_and_says_where_in_one_line(tmp_path, signum):
    code, _, stderr, pids = interrupted(tmp_path, signum, {"health": ["*"]})
    assert code == 130
    assert stderr == (
        f"terravixens upgrade: interrupted by {signal.Signals(signum).name} during the health check "
        f"before the first node (talosctl health stopped with its process group); done: none; not "
        f"touched: cp-a, cp-b, cp-c, wk-a, wk-b\n"
    )
    assert processes.all_gone(pids)


def test_an_interrupt_during_an_upgrade_says_it_goes_on_inside_talos(tmp_path):
    code, stdout, stderr, pids = interrupted(tmp_path, signal.SIGTERM, {"upgrade": ["cp-b"]})
    assert code == 130 and "cp-a: upgraded to v1.11.6" in stdout
    assert stderr == (
        "terravixens upgrade: interrupted by SIGTERM during talosctl upgrade of cp-b (talosctl upgrade "
        "stopped with its process group); done: cp-a; not touched: cp-c, wk-a, wk-b; an upgrade Talos "
        "already started goes on inside the node: run the same command again to check health and "
        "resume\n"
    )
    assert processes.all_gone(pids)


# ---------------------------------------------------------------------------------------------------------- read back
def test_a_node_that_rolled_back_is_a_failure_naming_it(site, tmp_path):
    """`talosctl upgrade --wait` returned 0, but cp-b booted its previous image again (Talos' A/B fallback)."""
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), rolls_back=["cp-b"])
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.exit_code == ExitCode.FAILED and outcome.upgraded == ["cp-a"] and outcome.stopped_at == "cp-b"
    assert outcome.summary() == (
        "stopped at cp-b: not on the target after its upgrade (cp-b still runs v1.11.5 after talosctl upgrade --wait "
        "returned: Talos rolled back to its previous image (A/B fallback after a failed boot); look at its console "
        "or `talosctl dmesg`, fix the cause and run the same command again); done: cp-a; not touched: cp-c, wk-a, "
        "wk-b"
    )
    assert fake.kinds()[-3:] == ["upgrade", "version", "get"]  # read back, no health gate, no next node
    again = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)  # the re-run tries cp-b again, not cp-c
    assert again.stopped_at == "cp-b" and fake.upgraded() == ["cp-a", "cp-b", "cp-b"]


def test_a_node_on_the_target_version_but_another_image_is_upgraded_and_checked(site, tmp_path):
    other = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), schematics={"wk-a": other})
    messages: list[str] = []
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=messages.append)
    assert outcome.ok and outcome.upgraded == ["wk-a"] and outcome.skipped == ["cp-a", "cp-b", "cp-c", "wk-b"]
    assert (
        "5. wk-a (worker, 127.11.1.21): re-image at v1.11.6 (schematic change: 376567988ad3 -> ce4c980550dd) — "
        "talosctl upgrade, read back (version and schematic), talosctl health"
    ) in messages
    assert fake.state()["schematics"]["127.11.1.21"] == SCHEMATIC


def test_a_node_not_booted_from_a_factory_image_is_refused_naming_it_unless_forced(site, tmp_path):
    """No `schematic` extension: the node was installed from another image (ghcr.io/siderolabs/installer, a custom
    build): what it carries cannot be compared with the site's image, so the run does not guess."""
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), schematics={"wk-b": None})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.exit_code == ExitCode.REFUSED
    assert outcome.summary() == (
        "refused: wk-b booted an image that is not an Image Factory one (talosctl get extensions lists no "
        "`schematic` extension): what it runs cannot be compared with the site's image. Look at it (talosctl -n "
        f"127.11.1.22 get extensions); to replace it with the site's image, pass --force (re-imaged with {IMAGE}); "
        "nothing touched"
    )
    assert fake.upgraded() == [] and fake.kinds() == ["health"] + READ * 5
    messages: list[str] = []
    forced = rolling_upgrade(site, "prod", fake.talosctl(), force=True, log=messages.append)
    assert forced.ok and forced.upgraded == ["wk-b"] and fake.state()["schematics"]["127.11.1.22"] == SCHEMATIC
    assert "   wk-b (worker, 127.11.1.22): v1.11.6, schematic none (not an Image Factory image)" in messages
    assert messages[-3].startswith(
        "6. wk-b (worker, 127.11.1.22): re-image at v1.11.6 (schematic change: none (not an Image Factory image) -> "
        "ce4c980550dd)"
    )


def test_a_node_re_imaged_that_comes_back_with_its_old_schematic_stops_naming_it(site, tmp_path):
    """Right version, wrong image: cp-a is re-imaged, `talosctl upgrade --wait` returns 0, but it booted its
    previous image again (Talos' A/B fallback): read back, it is a stop, not a success."""
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), rolls_back=["cp-a"], schematics={"cp-a": "0" * 64})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.summary() == (
        "stopped at cp-a: not on the target after its upgrade (cp-a still runs schematic 000000000000 (not "
        "ce4c980550dd) after talosctl upgrade --wait returned: Talos rolled back to its previous image (A/B fallback "
        "after a failed boot); look at its console or `talosctl dmesg`, fix the cause and run the same command "
        "again); done: none; not touched: cp-b, cp-c, wk-a, wk-b"
    )
    assert outcome.exit_code == ExitCode.FAILED


def test_a_node_that_boots_another_image_than_asked_is_named_with_both_images(site):
    """Neither its old image nor the one asked for (e.g. a registry mirror serving another build)."""
    [step] = [s for s in upgrade_plan(site, "prod") if s.node == "wk-a"]
    target = parse_version("v1.11.6")
    before, after = Running(target, "1" * 64), Running(target, "2" * 64)
    assert not_on_target(step, before, after, target) == (
        f"wk-a runs v1.11.6 but booted schematic {'2' * 64}, not {SCHEMATIC}: it is not the installer image {IMAGE}"
    )
    not_factory = Running(target, None)  # the node came back from an image that is not an Image Factory one
    assert not_on_target(step, before, not_factory, target) == (
        f"wk-a runs v1.11.6 but booted schematic none (not an Image Factory image), not {SCHEMATIC}: it is not the "
        f"installer image {IMAGE}"
    )


@pytest.mark.parametrize(
    "tag, understood",
    [
        ("v1.11.5", True),
        ("1.11.5", True),
        ("v1.12.0-beta.1", True),
        ("v1.11.5+custom", True),
        ("v1.12.0-alpha.1-45-gabc1234-dirty", True),
        (
            "v1.11",
            (
                "cannot understand its Talos version: 'v1.11' has no patch number: it cannot be compared with a "
                "release like v1.11.6"
            ),
        ),
        ("garbage", "cannot understand its Talos version: 'garbage' is not a Talos version like v1.11.6"),
        ("v1.11.x", "cannot understand its Talos version: 'v1.11.x' is not a Talos version like v1.11.6"),
    ],
)
def test_any_version_talosctl_prints_is_understood_or_a_clean_stop(site, tmp_path, tag, understood):
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.11.6"), "cp-b": tag})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), force=True, log=quiet)
    if understood is True:  # read, compared (--force: newer ones are downgraded), upgraded, read back
        assert outcome.ok and outcome.upgraded == ["cp-b"]
        assert fake.state()["versions"]["127.11.1.12"] == "v1.11.6"
    else:
        assert outcome.summary() == f"stopped at cp-b: {understood}; done: none; not touched: {', '.join(FIVE)}"
        assert fake.upgraded() == []


def test_the_same_release_written_without_v_is_current(site, tmp_path):
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.11.6"), "cp-b": "1.11.6"})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.ok and outcome.skipped == FIVE and fake.upgraded() == []


def test_version_parsing_and_order():
    assert parse_version("v1.11.5+custom").build == "custom" and parse_version("1.11.5").key == release("v1.11.5")
    assert not parse_version("v1.11.5+custom").same(parse_version("v1.11.5"))
    assert parse_version("v1.11.5").same(parse_version("1.11.5"))
    assert release("v1.12.0-beta.2") < release("v1.12.0-beta.10") < release("v1.12.0-rc.1") < release("v1.12.0")
    assert release("v1.12.0-alpha.1") < release("v1.12.0-alpha.1.1")
    assert release("v1.11.5+custom") == release("v1.11.5")  # build metadata does not order
    assert parse_version("  ") == "'nothing' is not a Talos version like v1.11.6"


# ---------------------------------------------------------------------------------------------------------- downgrade
def test_a_downgrade_is_refused_before_anything_is_touched(site, tmp_path):
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.11.6"), "wk-b": "v1.11.7", "cp-c": "v1.12.0-beta.1"})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.exit_code == ExitCode.REFUSED and outcome.refused
    assert outcome.summary() == (
        "refused: cp-c runs v1.12.0-beta.1, wk-b runs v1.11.7, newer than the target v1.11.6: that is a downgrade. "
        "Set talos_version to the version the nodes run, or pass --force to downgrade; nothing touched"
    )
    assert fake.upgraded() == [] and fake.kinds() == ["health"] + READ * 5


def test_force_downgrades(tmp_path):
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.11.6"), "wk-b": "v1.11.7"})
    refused = cli(tmp_path, "--talosctl", str(fake.path))
    assert refused.returncode == ExitCode.REFUSED and fake.upgraded() == []
    forced = cli(tmp_path, "--talosctl", str(fake.path), "--force")
    assert forced.returncode == 0 and fake.upgraded() == ["wk-b"]
    assert (
        "6. wk-b (worker, 127.11.1.22): v1.11.7 -> v1.11.6 (version change; schematic ce4c980550dd kept) — talosctl "
        "upgrade, read back (version and schematic), talosctl health"
    ) in forced.stdout.splitlines()
    assert "5. talosctl health after the skipped cp-a, cp-b, cp-c, wk-a" in forced.stdout.splitlines()
    assert fake.snapshots() == []  # no control plane upgraded: no etcd snapshot
    assert fake.state()["versions"]["127.11.1.22"] == "v1.11.6"


# ---------------------------------------------------------------------------------------------------------- minors
def test_skipping_a_talos_minor_is_refused_before_anything_is_touched(tmp_path):
    """1.11 -> 1.13 in one run: Talos upgrades one minor at a time (ADR 0023); nodes already on 1.12 may go on."""
    site = support.site_from(site_data(talos_version="v1.13.0"))
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.12.7"), "cp-b": "v1.11.6", "wk-a": "v1.11.5"})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.exit_code == ExitCode.REFUSED and outcome.refused
    assert outcome.summary() == (
        "refused: cp-b runs v1.11.6, wk-a runs v1.11.5, more than one minor behind the target v1.13.0: Talos "
        "upgrades one minor at a time. Set talos_version to the newest patch of the next minor, run the upgrade, "
        "then go on; or pass --force; nothing touched"
    )
    assert fake.upgraded() == [] and fake.kinds() == ["health"] + READ * 5


def test_one_minor_at_a_time_goes_through(tmp_path):
    site = support.site_from(site_data(talos_version="v1.13.0"))
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.12.7"), "cp-a": "v1.13.0"})
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.ok and outcome.upgraded == ["cp-b", "cp-c", "wk-a", "wk-b"] and outcome.skipped == ["cp-a"]
    assert set(fake.state()["versions"].values()) == {"v1.13.0"}


def test_force_skips_a_minor(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"))
    data = site_data(talos_version="v1.13.0")
    refused = cli(tmp_path, "--talosctl", str(fake.path), data=data)
    assert refused.returncode == ExitCode.REFUSED and fake.upgraded() == []
    assert refused.stdout.splitlines()[-1].startswith("refused: cp-a runs v1.11.6, cp-b runs v1.11.6")
    forced = cli(tmp_path, "--talosctl", str(fake.path), "--force", data=data)
    assert forced.returncode == 0 and fake.upgraded() == FIVE
    assert (
        "1. cp-a (controlplane, 127.11.1.11): v1.11.6 -> v1.13.0 (version change; schematic ce4c980550dd kept) — etcd "
        "snapshot through another control plane, talosctl upgrade, read back (version and schematic), talosctl health"
    ) in forced.stdout.splitlines()


def test_what_skips_a_minor():
    assert [
        skips_a_minor(running, target)
        for running, target in [
            ("v1.11.6", "v1.13.0"),
            ("v1.11.6", "v1.12.7"),
            ("v1.12.0-beta.1", "v1.13.0"),
            ("v1.13.0", "v1.13.0"),
            ("v1.13.0", "v1.11.6"),
            ("v1.10.7", "v1.12.0"),
            ("v1.13.0", "v2.0.0"),
        ]
    ] == [True, False, False, False, False, True, True]


def test_versions_are_ordered_as_releases():
    assert release("v1.12.0-beta.1") < release("v1.12.0") < release("v1.12.1") < release("1.13.0")
    assert release("v1.11.10") > release("v1.11.9")
    with pytest.raises(ValueError, match=r"'latest' is not a Talos version like v1.11.6"):
        release("latest")


# ---------------------------------------------------------------------------------------------------------- batches
def test_workers_in_batches_control_planes_alone_each_gated(site3, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(ADDRESSES, "v1.11.5"), together=["wk-a", "wk-b"])
    outcome = rolling_upgrade(site3, "prod", fake.talosctl(), worker_batch=2, log=quiet)
    assert outcome.ok and sorted(outcome.upgraded) == sorted(ADDRESSES)
    kinds = fake.kinds()
    assert kinds == ["health"] + READ * 6 + ["upgrade", *READ, "health"] * 3 + [
        "upgrade",
        "upgrade",
        *READ * 2,
        "health",
    ] + ["upgrade", *READ, "health"]
    assert fake.upgraded()[:3] == ["cp-a", "cp-b", "cp-c"] and fake.upgraded()[-1] == "wk-c"


def test_a_batch_run_one_by_one_would_fail_the_fake(site3, tmp_path):
    """The check above can fail: with batches of one, the fake's 'together' pair is not upgraded together."""
    fake = Fake(tmp_path, dict.fromkeys(ADDRESSES, "v1.11.5"), together=["wk-a", "wk-b"], together_wait=1)
    outcome = rolling_upgrade(site3, "prod", fake.talosctl(), worker_batch=1, log=quiet)
    assert outcome.stopped_at == "wk-a" and "upgraded alone" in outcome.reason


def test_control_planes_stay_one_at_a_time_whatever_the_batch(site3, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(ADDRESSES, "v1.11.5"))
    rolling_upgrade(site3, "prod", fake.talosctl(), worker_batch=5, log=quiet)
    assert fake.kinds() == ["health"] + READ * 6 + ["upgrade", *READ, "health"] * 3 + ["upgrade"] * 3 + READ * 3 + [
        "health"
    ]


def test_a_failure_in_a_batch_says_what_is_done(site3, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(ADDRESSES, "v1.11.5"), fail={"upgrade": ["wk-b"]})
    outcome = rolling_upgrade(site3, "prod", fake.talosctl(), worker_batch=2, log=quiet)
    assert outcome.summary() == (
        "stopped at wk-b: talosctl upgrade failed (on wk-b: exit 1: error: upgrade on 127.11.1.22 failed: rpc "
        "error: code = Unavailable); done: cp-a, cp-b, cp-c, wk-a; not touched: wk-c"
    )


def test_skipped_workers_do_not_take_a_batch_slot(site3, tmp_path):
    fake = Fake(
        tmp_path,
        {**dict.fromkeys(ADDRESSES, "v1.11.6"), "wk-a": "v1.11.5", "wk-c": "v1.11.5"},
        together=["wk-a", "wk-c"],
    )
    outcome = rolling_upgrade(site3, "prod", fake.talosctl(), worker_batch=2, log=quiet)
    assert outcome.ok and outcome.upgraded == ["wk-a", "wk-c"]
    assert fake.kinds() == ["health"] + READ * 6 + ["health", "upgrade", "upgrade", *READ * 2, "health"]


# ---------------------------------------------------------------------------------------------------------- kubernetes
def test_kubernetes_upgrade_between_two_health_gates(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"))
    result = kubernetes_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert result.ok
    assert fake.kinds() == ["health", "upgrade-k8s", "health"]
    assert fake.calls()[1][2:] == ["--nodes", "127.11.1.11", "upgrade-k8s", "--to", "1.34.2"]
    assert fake.state()["kubernetes"] == "1.34.2"


def test_kubernetes_upgrade_is_not_started_on_an_unhealthy_cluster(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), broken=["wk-a"])
    result = kubernetes_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert result.summary() == (
        "stopped at cp-a: health check before upgrade-k8s failed (exit 1: waiting for etcd members to be healthy: "
        "127.11.1.21: context deadline exceeded); done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b"
    )
    assert fake.kinds() == ["health"]


def test_kubernetes_upgrade_failure_stops(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), fail={"upgrade-k8s": ["*"]})
    result = kubernetes_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert result.exit_code == ExitCode.FAILED
    assert result.summary() == (
        "stopped at cp-a: talosctl upgrade-k8s failed (exit 1: error: upgrade-k8s on 127.11.1.11 failed: rpc "
        "error: code = Unavailable); components may be partly upgraded: fix the cause and run it again; done: none; "
        "not touched: none"
    )
    assert fake.kinds() == ["health", "upgrade-k8s"]


def test_the_kubernetes_plan_names_the_control_plane_it_goes_through_and_every_node_by_role(site3):
    """What `upgrade --kubernetes --dry-run` prints: through the first control plane by name, at the version without
    its `v`, control planes then every node's kubelet, then health over both groups."""
    assert describe_kubernetes(site3, "prod") == [
        "0. talosctl health: the cluster must be healthy first",
        (
            "1. talosctl upgrade-k8s --to 1.34.2 through cp-a (controlplane, 127.11.1.11): kube-apiserver, "
            "kube-controller-manager and kube-scheduler on cp-a, cp-b, cp-c one node at a time, then the kubelet of "
            "every node (cp-a, cp-b, cp-c, wk-a, wk-b, wk-c), each machine configuration updated"
        ),
        "2. talosctl health over cp-a, cp-b, cp-c (control planes) and wk-a, wk-b, wk-c (workers)",
        "for the cluster's own view of each change: talosctl upgrade-k8s --dry-run (contacts the cluster)",
    ]


# ---------------------------------------------------------------------------------------------------------- CLI
def test_cli_dry_run_honours_kubernetes(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"))
    dry = cli(tmp_path, "--dry-run", "--kubernetes", "--talosctl", str(fake.path))
    assert dry.returncode == 0 and fake.calls() == []
    assert dry.stdout.splitlines() == describe_kubernetes(site, "prod")
    assert dry.stdout.splitlines()[1].startswith(
        "1. talosctl upgrade-k8s --to 1.34.2 through cp-a (controlplane, 127.11.1.11): kube-apiserver"
    )


def test_cli_exit_codes_and_last_line(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), breaks_on_upgrade=["cp-a"])
    run = cli(tmp_path, "--talosctl", str(fake.path), "--timeout", "90s")
    assert run.returncode == ExitCode.FAILED and run.stderr == ""
    assert run.stdout.splitlines()[:2] == [
        "0. talosctl health: the cluster must be healthy before the first node",
        "   cluster healthy",
    ]
    assert run.stdout.splitlines()[-1].startswith("stopped at cp-a: health check after upgrading cp-a failed")
    assert fake.calls()[0][fake.calls()[0].index("--wait-timeout") + 1] == "90s"
    (tmp_path / "ok").mkdir()
    ok = Fake(tmp_path / "ok", dict.fromkeys(FIVE, "v1.11.5"))
    done = cli(tmp_path, "--talosctl", str(ok.path))
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "upgraded: cp-a, cp-b, cp-c, wk-a, wk-b; already current: none"


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--timeout", "soon", "'soon' is not a duration: write seconds or a number with s, m or h, e.g. 90s, 15m, 1h"),
        ("--worker-batch", "0", "'0' is not a batch size of workers: give a whole number, 1 or more"),
    ],
)
def test_cli_refuses_bad_options(option, value, message, tmp_path):
    run = cli(tmp_path, option, value)
    assert run.returncode == 2 and run.stderr.splitlines()[-1].endswith(message)


def test_durations():
    assert [parse_duration(text) for text in ("45", "90s", "15m", "2h")] == [45, 90, 900, 7200]
    with pytest.raises(ValueError):
        parse_duration("0s")


# ---------------------------------------------------------------------------------------------------------- roll-outs
# An image roll-out: the site's Talos image changes (an extension added: a new Image Factory schematic) while
# talos_version may stay. The fake's `images` say which extensions each schematic carries (`talosctl get extensions`
# lists them before the factory's `schematic` row); a real factory builds the new installer on first pull.
NEW_IMAGE = f"127.0.0.1:9/nocloud-installer/{NEW}:v1.11.6"
CONTROL_PLANES = ["cp-a", "cp-b", "cp-c"]


def snapshot_files(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "etcd-snapshots" / "homelab" / "prod"
    return sorted(folder.glob("*.snapshot")) if folder.is_dir() else []


def numbered(output: str) -> list[str]:
    """The plan's lines (`N. …`): what --dry-run prints, and what the run prints as it starts each unit."""
    return [line for line in output.splitlines() if re.match(r"^\d+\. ", line)]


PLAN_LINE = re.compile(r"^(\d+)\. (?:talosctl health|(\S+) \((?:controlplane|worker), [\d.]+\): (.*))")


def planned_events(output: str) -> list[tuple[str, ...]]:
    """What the plan lines say will be run, as events: ("health",), ("snapshot",), ("upgrade", nodes…)."""
    events: list[tuple[str, ...]] = []
    units: dict[str, list[tuple[str, str]]] = {}
    for line in numbered(output):
        found = PLAN_LINE.match(line)
        assert found, line
        number, node, rest = found.groups()
        units.setdefault(number, []).append(("health", "") if node is None else (node, rest))
    for members in units.values():
        if members[0][0] == "health":
            events.append(("health",))
            continue
        if all(rest.startswith("already current") for _, rest in members):
            continue  # a skipped node: no call
        if "etcd snapshot through another control plane" in members[-1][1]:
            events.append(("snapshot",))
        events.append(("upgrade", *sorted(node for node, _ in members)))
        events.append(("health",))
    return events


def executed_events(calls: list[list[str]]) -> list[tuple[str, ...]]:
    """What the fake talosctl was asked, as the same events (reads left out; a batch's parallel upgrades are one)."""
    events: list[tuple[str, ...]] = []
    for call in calls:
        if call[4] == "health":
            events.append(("health",))
        elif call[4:6] == ["etcd", "snapshot"]:
            events.append(("snapshot",))
        elif call[4] == "upgrade":
            node = NAMES[call[call.index("--nodes") + 1]]
            if events and events[-1][0] == "upgrade" and events[-1][-1] != "read":
                events[-1] = ("upgrade", *sorted([*events[-1][1:], node]))
            else:
                events.append(("upgrade", node))
        elif call[4] == "version" and events and events[-1][0] == "upgrade":
            events[-1] = (*events[-1], "read") if events[-1][-1] != "read" else events[-1]
    return [event[:-1] if event[-1] == "read" else event for event in events]


def test_an_extension_added_at_the_same_version_re_images_every_node_once_in_order(tmp_path):
    """The issue's report: with an extension added at the same Talos version, upgrade said "already v1.11.5" for every
    node. Now each node is re-imaged once — control planes one by one, each after an etcd snapshot through another
    control plane, then the workers — and a re-run touches none."""
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), images=IMAGES)
    data = with_extensions(site_data(), ISCSI)
    run = cli(tmp_path, "--talosctl", str(fake.path), data=data)
    assert (run.returncode, run.stderr) == (0, "")
    assert fake.upgraded() == FIVE  # once each, in order
    assert (
        fake.kinds()
        == ["health"]
        + READ * 5
        + ["etcd", "upgrade", *READ, "health"] * 3
        + [
            "upgrade",
            *READ,
            "health",
        ]
        * 2
    )
    assert {call[call.index("--image") + 1] for call in fake.calls() if call[4] == "upgrade"} == {NEW_IMAGE}
    assert fake.snapshots() == ["cp-b", "cp-a", "cp-a"]  # never through the control plane about to be upgraded
    files = snapshot_files(tmp_path)
    assert sorted(f.name.split("_", 2)[2] for f in files) == [  # `prod_<UTC time>_<node>_<reason>.snapshot`
        "cp-a_the-upgrade-of-cp-b.snapshot",
        "cp-a_the-upgrade-of-cp-c.snapshot",
        "cp-b_the-upgrade-of-cp-a.snapshot",
    ]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert set(fake.state()["schematics"].values()) == {NEW}
    lines = run.stdout.splitlines()
    assert lines[:9] == [
        "0. talosctl health: the cluster must be healthy before the first node",
        "   cluster healthy",
        "what the nodes run (talosctl version, talosctl get extensions):",
        "   cp-a (controlplane, 127.11.1.11): v1.11.6, schematic ce4c980550dd",
        "   cp-b (controlplane, 127.11.1.12): v1.11.6, schematic ce4c980550dd",
        "   cp-c (controlplane, 127.11.1.13): v1.11.6, schematic ce4c980550dd",
        "   wk-a (worker, 127.11.1.21): v1.11.6, schematic ce4c980550dd",
        "   wk-b (worker, 127.11.1.22): v1.11.6, schematic ce4c980550dd",
        (
            f"target v1.11.6 for cp-a, cp-b, cp-c, wk-a, wk-b: {NEW_IMAGE} (schematic {NEW[:12]}, extensions: "
            "siderolabs/iscsi-tools, siderolabs/qemu-guest-agent)"
        ),
    ]
    assert lines[9] == (
        f"1. cp-a (controlplane, 127.11.1.11): re-image at v1.11.6 (schematic change: ce4c980550dd -> {NEW[:12]}) — "
        "etcd snapshot through another control plane, talosctl upgrade, read back (version and schematic), talosctl "
        "health"
    )
    assert re.match(
        r"^\[ *\d+\.\ds\] platform-prod: snapshot — etcd-snapshots/homelab/prod/prod_\S+_cp-b_the-upgrade-of-cp-a"
        r"\.snapshot through cp-b, before the upgrade of cp-a: ",
        lines[10],
    )
    assert lines[11] == (
        f"   cp-a: upgraded to v1.11.6, schematic {NEW[:12]} (read back: version and schematic), cluster healthy"
    )
    assert lines[-1] == "upgraded: cp-a, cp-b, cp-c, wk-a, wk-b; already current: none"

    again = cli(tmp_path, "--talosctl", str(fake.path), data=data)
    assert again.returncode == 0 and fake.upgraded() == FIVE and len(snapshot_files(tmp_path)) == 3
    assert numbered(again.stdout) == [
        "0. talosctl health: the cluster must be healthy before the first node",
        f"1. cp-a (controlplane, 127.11.1.11): already current (v1.11.6, schematic {NEW[:12]}): skipped",
        f"2. cp-b (controlplane, 127.11.1.12): already current (v1.11.6, schematic {NEW[:12]}): skipped",
        f"3. cp-c (controlplane, 127.11.1.13): already current (v1.11.6, schematic {NEW[:12]}): skipped",
        f"4. wk-a (worker, 127.11.1.21): already current (v1.11.6, schematic {NEW[:12]}): skipped",
        f"5. wk-b (worker, 127.11.1.22): already current (v1.11.6, schematic {NEW[:12]}): skipped",
        "6. talosctl health after the skipped cp-a, cp-b, cp-c, wk-a, wk-b",
    ]
    assert again.stdout.splitlines()[-1] == "upgraded: none; already current: cp-a, cp-b, cp-c, wk-a, wk-b"


def test_the_extensions_a_node_runs_are_what_the_fake_lists_after_the_roll_out(tmp_path):
    """The fake's `get extensions` as talosctl prints it: the image's extensions, then the factory's schematic."""
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), images=IMAGES, schematics={"wk-a": NEW})
    listing = fake.talosctl().extensions("127.11.1.21")
    assert listing.ok and listing.stdout.splitlines() == [
        "NODE          NAMESPACE   TYPE              ID   VERSION   NAME               VERSION",
        "127.11.1.21   runtime     ExtensionStatus   0    1         iscsi-tools        v0.2.0",
        "127.11.1.21   runtime     ExtensionStatus   1    1         qemu-guest-agent   10.0.2",
        f"127.11.1.21   runtime     ExtensionStatus   2    1         schematic          {NEW}",
    ]


@pytest.mark.parametrize("worker_batch", [1, 2])
def test_the_dry_run_prints_exactly_what_the_run_then_does(tmp_path, worker_batch):
    """Every reason at once, on six nodes: the new extension on pve1 and pve3 (cp-a, wk-a, cp-c); cp-b and wk-b already
    current; cp-a and wk-a change version and schematic, cp-c only its schematic, wk-c only its version. The dry run
    reads (version, get extensions) and touches nothing; then the run prints the same numbered plan and the fake's
    calls follow it: snapshots, upgrades (batches together), health checks, in that order."""
    data = with_extensions(site_data(workers=3), ISCSI, ("pve1", "pve3"))
    versions = {**dict.fromkeys(ADDRESSES, "v1.11.5"), "cp-b": "v1.11.6", "cp-c": "v1.11.6", "wk-b": "v1.11.6"}
    fake = Fake(tmp_path, versions, images=IMAGES)
    options = ["--talosctl", str(fake.path), "--worker-batch", str(worker_batch)]
    dry = cli(tmp_path, *options, "--dry-run", data=data)
    assert (dry.returncode, dry.stderr) == (0, "")
    assert set(fake.kinds()) == {"version", "get"} and fake.kinds() == READ * 6  # read-only calls, each node once
    assert snapshot_files(tmp_path) == []
    change = {
        "cp-a": f"v1.11.5 -> v1.11.6 (version and schematic change: ce4c980550dd -> {NEW[:12]})",
        "cp-c": f"re-image at v1.11.6 (schematic change: ce4c980550dd -> {NEW[:12]})",
        "wk-a": f"v1.11.5 -> v1.11.6 (version and schematic change: ce4c980550dd -> {NEW[:12]})",
        "wk-c": "v1.11.5 -> v1.11.6 (version change; schematic ce4c980550dd kept)",
    }
    gate = "talosctl upgrade, read back (version and schematic), talosctl health"
    skipped = "already current (v1.11.6, schematic ce4c980550dd): skipped"
    head = [
        "0. talosctl health: the cluster must be healthy before the first node",
        f"1. cp-a (controlplane, 127.11.1.11): {change['cp-a']} — etcd snapshot through another control plane, {gate}",
        f"2. cp-b (controlplane, 127.11.1.12): {skipped}",
        "3. talosctl health after the skipped cp-b",
        f"4. cp-c (controlplane, 127.11.1.13): {change['cp-c']} — etcd snapshot through another control plane, {gate}",
        f"5. wk-b (worker, 127.11.1.22): {skipped}",
    ]
    if worker_batch == 1:
        expected = [
            *head[:5],
            f"5. wk-a (worker, 127.11.1.21): {change['wk-a']} — {gate}",
            f"6. wk-b (worker, 127.11.1.22): {skipped}",
            "7. talosctl health after the skipped wk-b",
            f"8. wk-c (worker, 127.11.1.23): {change['wk-c']} — {gate}",
        ]
    else:  # wk-b takes no slot: wk-a and wk-c go together, after the health check that follows wk-b
        expected = [
            *head,
            "6. talosctl health after the skipped wk-b",
            f"7. wk-a (worker, 127.11.1.21): {change['wk-a']}",
            f"7. wk-c (worker, 127.11.1.23): {change['wk-c']} — wk-a, wk-c together: {gate}",
        ]
    assert numbered(dry.stdout) == expected
    assert dry.stdout.splitlines()[-1] == (
        "dry run: nothing was changed (4 to upgrade, 2 already current); the run reads every node again first and "
        "follows this plan while they run what is shown above"
    )

    run = cli(tmp_path, *options, data=data)
    assert (run.returncode, run.stderr) == (0, "")
    assert numbered(run.stdout) == numbered(dry.stdout)
    executed = executed_events(fake.calls()[len(READ) * 6 :])
    assert executed == planned_events(dry.stdout)
    assert executed[:4] == [("health",), ("snapshot",), ("upgrade", "cp-a"), ("health",)]  # control planes first
    assert fake.upgraded()[:2] == ["cp-a", "cp-c"] and sorted(fake.upgraded()) == ["cp-a", "cp-c", "wk-a", "wk-c"]
    schematics = {NAMES[address]: value for address, value in fake.state()["schematics"].items()}
    assert schematics == {
        "cp-a": NEW,
        "cp-b": SCHEMATIC,
        "cp-c": NEW,
        "wk-a": NEW,
        "wk-b": SCHEMATIC,
        "wk-c": SCHEMATIC,
    }
    assert set(fake.state()["versions"].values()) == {"v1.11.6"}


def test_the_comparison_of_plan_and_run_can_fail():
    """The two event lists above are compared for real: a run in another order, or a batch run one by one, differs."""
    plan = (
        "0. talosctl health: x\n1. cp-a (controlplane, 127.11.1.11): v1 -> v2 — etcd snapshot through another control "
        "plane, talosctl upgrade\n2. wk-a (worker, 127.11.1.21): a\n2. wk-b (worker, 127.11.1.22): b — together\n"
    )
    call = ["--talosconfig", "t", "--nodes"]
    in_order = [
        [*call, "127.11.1.11", "health"],
        [*call, "127.11.1.11", "etcd", "snapshot", "x"],
        [*call, "127.11.1.11", "upgrade"],
        [*call, "127.11.1.11", "version"],
        [*call, "127.11.1.11", "health"],
        [*call, "127.11.1.22", "upgrade"],
        [*call, "127.11.1.21", "upgrade"],
        [*call, "127.11.1.21", "version"],
        [*call, "127.11.1.11", "health"],
    ]
    assert executed_events(in_order) == planned_events(plan)
    one_by_one = [*in_order[:6], [*call, "127.11.1.22", "version"], *in_order[6:]]
    assert executed_events(one_by_one) != planned_events(plan)
    no_snapshot = [in_order[0], *in_order[2:]]
    assert executed_events(no_snapshot) != planned_events(plan)


def test_a_version_bump_and_an_extension_change_in_one_run(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), images=IMAGES)
    run = cli(tmp_path, "--talosctl", str(fake.path), data=with_extensions(site_data(), ISCSI))
    assert run.returncode == 0 and fake.upgraded() == FIVE and fake.snapshots() == ["cp-b", "cp-a", "cp-a"]
    assert {call[call.index("--image") + 1] for call in fake.calls() if call[4] == "upgrade"} == {NEW_IMAGE}
    assert (
        f"4. wk-a (worker, 127.11.1.21): v1.11.5 -> v1.11.6 (version and schematic change: ce4c980550dd -> "
        f"{NEW[:12]}) — talosctl upgrade, read back (version and schematic), talosctl health"
    ) in run.stdout.splitlines()
    assert set(fake.state()["versions"].values()) == {"v1.11.6"} and set(fake.state()["schematics"].values()) == {NEW}


def test_a_control_plane_that_comes_back_with_its_old_schematic_stops_the_roll_out_naming_it(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), images=IMAGES, rolls_back=["cp-b"])
    data = with_extensions(site_data(), ISCSI)
    run = cli(tmp_path, "--talosctl", str(fake.path), data=data)
    assert run.returncode == ExitCode.FAILED
    assert run.stdout.splitlines()[-1] == (
        f"stopped at cp-b: not on the target after its upgrade (cp-b still runs schematic ce4c980550dd (not "
        f"{NEW[:12]}) after talosctl upgrade --wait returned: Talos rolled back to its previous image (A/B fallback "
        "after a failed boot); look at its console or `talosctl dmesg`, fix the cause and run the same command "
        "again); done: cp-a; not touched: cp-c, wk-a, wk-b"
    )
    assert fake.upgraded() == ["cp-a", "cp-b"] and fake.kinds()[-3:] == ["upgrade", "version", "get"]
    again = cli(tmp_path, "--talosctl", str(fake.path), data=data)  # cp-a skipped, cp-b tried again, not cp-c
    assert again.returncode == ExitCode.FAILED and fake.upgraded() == ["cp-a", "cp-b", "cp-b"]
    assert fake.snapshots() == ["cp-b", "cp-a", "cp-a"]  # a fresh snapshot before each attempt


def test_an_interrupted_roll_out_resumes_where_it_stopped(tmp_path):
    """SIGTERM during cp-b's re-image; the upgrade Talos had started finishes inside the node; the same command
    again skips cp-a and cp-b and re-images the rest: every node re-imaged once."""
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), images=IMAGES)
    data = with_extensions(site_data(), ISCSI)
    code, stdout, stderr, pids = interrupted(tmp_path, signal.SIGTERM, {"upgrade": ["cp-b"]}, data=data, fake=fake)
    assert code == 130 and processes.all_gone(pids)
    assert (
        f"   cp-a: upgraded to v1.11.6, schematic {NEW[:12]} (read back: version and schematic), cluster healthy"
        in (stdout.splitlines())
    )
    assert stderr == (
        "terravixens upgrade: interrupted by SIGTERM during talosctl upgrade of cp-b (talosctl upgrade stopped with "
        f"its process group); done: cp-a; not touched: cp-c, wk-a, wk-b; {RESUME}\n"
    )
    state = fake.state()
    state["schematics"][ADDRESSES["cp-b"]] = NEW  # Talos finished it: the node rebooted into the new image
    fake.change(hang={}, schematics=state["schematics"])
    again = cli(tmp_path, "--talosctl", str(fake.path), data=data)
    assert again.returncode == 0
    assert again.stdout.splitlines()[-1] == "upgraded: cp-c, wk-a, wk-b; already current: cp-a, cp-b"
    assert fake.upgraded() == FIVE and fake.snapshots() == ["cp-b", "cp-a", "cp-a"]


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_no_verified_snapshot_stops_before_the_control_plane(tmp_path, damage):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), images=IMAGES, snapshot_damage=damage)
    run = cli(tmp_path, "--talosctl", str(fake.path), data=with_extensions(site_data(), ISCSI))
    assert run.returncode == ExitCode.BACKUP_FAILED and fake.upgraded() == []
    assert fake.snapshots() == ["cp-b", "cp-c", "cp-a"]  # every control plane tried, the one to upgrade last
    assert run.stdout.splitlines()[-1] == (
        "stopped at cp-a: platform-prod: no verified etcd snapshot before the upgrade of cp-a (3 control planes "
        "tried); nothing was changed. Fix what the lines above say, or — knowing the risk — pass --no-snapshot "
        "REASON; done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b"
    )
    assert snapshot_files(tmp_path) == []


def test_a_snapshot_that_fails_before_a_later_control_plane_keeps_what_is_done(site, tmp_path):
    from terravixens.operations.outcome import OperationError
    from terravixens.operations.upgrade import Snapshots

    taken: list[str] = []

    def take(step) -> None:
        if taken:
            raise OperationError(f"no verified etcd snapshot before the upgrade of {step.node}", ExitCode.BACKUP_FAILED)
        taken.append(step.node)

    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"))
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), snapshots=Snapshots(take), log=quiet)
    assert outcome.exit_code == ExitCode.BACKUP_FAILED and taken == ["cp-a"] and fake.upgraded() == ["cp-a"]
    assert outcome.summary() == (
        "stopped at cp-b: no verified etcd snapshot before the upgrade of cp-b; done: cp-a; not touched: cp-b, cp-c, "
        "wk-a, wk-b"
    )


def test_no_snapshot_with_a_reason_is_said_where_each_snapshot_would_be(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), images=IMAGES)
    data = with_extensions(site_data(), ISCSI)
    reason = ["--no-snapshot", "taken by hand at 10:02"]
    dry = cli(tmp_path, "--talosctl", str(fake.path), "--dry-run", *reason, data=data)
    assert numbered(dry.stdout)[1].endswith(
        "— no etcd snapshot (--no-snapshot: taken by hand at 10:02), talosctl upgrade, read back (version and "
        "schematic), talosctl health"
    )
    run = cli(tmp_path, "--talosctl", str(fake.path), *reason, data=data)
    assert run.returncode == 0 and fake.snapshots() == [] and fake.upgraded() == FIVE
    skips = [line for line in run.stdout.splitlines() if "(--no-snapshot)" in line]
    assert [line.split("] ", 1)[1] for line in skips] == [
        f"platform-prod: snapshot — skipped before the upgrade of {node}: taken by hand at 10:02 (--no-snapshot)"
        for node in CONTROL_PLANES
    ]
    assert numbered(run.stdout) == numbered(dry.stdout)


def test_a_dry_run_that_cannot_reach_a_node_says_so_with_the_runs_exit_code(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), unreachable=["wk-a"])
    dry = cli(tmp_path, "--talosctl", str(fake.path), "--dry-run")
    assert dry.returncode == ExitCode.FAILED and dry.stderr == ""
    assert dry.stdout.splitlines() == [
        (
            "stopped at wk-a: cannot read its Talos version (exit 1: error getting version from node 127.11.1.21: rpc "
            'error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp '
            '127.11.1.21:50000: connect: no route to host"); done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b'
        )
    ]
    assert fake.kinds() == READ * 3 + ["version"] and fake.upgraded() == []


def test_a_dry_run_says_what_the_run_would_refuse_with_its_exit_code(tmp_path):
    fake = Fake(tmp_path, {**dict.fromkeys(FIVE, "v1.11.6"), "wk-b": "v1.11.7"})
    dry = cli(tmp_path, "--talosctl", str(fake.path), "--dry-run")
    run = cli(tmp_path, "--talosctl", str(fake.path))
    assert dry.returncode == run.returncode == ExitCode.REFUSED
    assert (
        dry.stdout.splitlines()[-1]
        == run.stdout.splitlines()[-1]
        == (
            "refused: wk-b runs v1.11.7, newer than the target v1.11.6: that is a downgrade. Set talos_version to the "
            "version the nodes run, or pass --force to downgrade; nothing touched"
        )
    )
    assert "upgrade" not in fake.kinds() and "etcd" not in fake.kinds()


# ---------------------------------------------------------------------------------------------------------- talosconfig
def _command(
    tmp_path: Path, fake: Fake, tf: Outputs, talosconfig: str | None, capsys, monkeypatch
) -> tuple[int, list, str]:
    """`terravixens upgrade prod --dry-run` through the command line, in this process: its Terraform (the seam of
    terravixens.cli, read only for the platform layer's talosconfig output) is `tf`."""
    from terravixens import cli

    site_file = tmp_path / "site.yaml"
    site_file.write_text(json.dumps(site_data()))
    monkeypatch.setattr(cli, "_terraform", lambda layer_env: tf)
    umask = os.umask(0o022)  # the operation sets 077 for the process, as the operations do: given back afterwards
    os.umask(umask)
    given = ["--talosconfig", talosconfig] if talosconfig else []
    code = cli.main(["upgrade", "prod", "--site", str(site_file), "--talosctl", str(fake.path), "--dry-run", *given])
    os.umask(umask)
    used = {call[1] for call in fake.calls()}
    return code, sorted(used), capsys.readouterr().err


def test_the_talosconfig_is_the_given_one_else_the_local_one_else_the_platform_layers(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"))
    tf = Outputs({"talosconfig": "context: prod\n"})
    assert _command(tmp_path, fake, tf, "mine", capsys, monkeypatch)[:2] == (0, ["mine"]) and tf.calls == []
    (tmp_path / "cdktf.out" / "stacks" / "platform-prod").mkdir(parents=True)
    code, used, _ = _command(tmp_path, fake, tf, None, capsys, monkeypatch)
    assert code == 0 and tf.calls == [("platform-prod", "output", "-raw", "talosconfig")]
    [written] = [path for path in used if path != "mine"]
    assert written.endswith("/talosconfig") and not Path(written).exists()  # 0600 in a 0700 folder, removed after
    (tmp_path / "talosconfig").write_text("context: local\n")  # upgrade's default before: still taken first
    tf.calls.clear()
    assert _command(tmp_path, fake, tf, None, capsys, monkeypatch)[:2] == (0, sorted({"mine", written, "talosconfig"}))
    assert tf.calls == []


def test_no_talosconfig_anywhere_is_bad_input_naming_the_ways_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"))
    code, used, err = _command(tmp_path, fake, Outputs({}), None, capsys, monkeypatch)
    assert code == ExitCode.BAD_INPUT and used == []
    assert err == (
        "terravixens upgrade: no talosconfig: none given (--talosconfig FILE), no ./talosconfig here, and "
        "platform-prod was not deployed from this folder (no cdktf.out/stacks/platform-prod to read its talosconfig "
        "output from)\n"
    )
    (tmp_path / "cdktf.out" / "stacks" / "platform-prod").mkdir(parents=True)  # deployed here, no output (yet)
    code, used, err = _command(tmp_path, fake, Outputs({}), None, capsys, monkeypatch)
    assert code == ExitCode.BAD_INPUT and used == []
    assert "platform-prod has no talosconfig output" in err and "--talosconfig FILE" in err


def test_a_single_control_plane_is_snapshotted_through_itself(tmp_path):
    """No other control plane to go through: the snapshot is taken through the one about to be upgraded, and the
    plan says so."""
    data = with_extensions(site_data(), ISCSI)
    for name in ("cp-b", "cp-c"):
        del data["clusters"]["prod"]["control_planes"][name]
    fake = Fake(tmp_path, dict.fromkeys(["cp-a", "wk-a", "wk-b"], "v1.11.6"), images=IMAGES)
    dry = cli(tmp_path, "--talosctl", str(fake.path), "--dry-run", data=data)
    assert numbered(dry.stdout)[1] == (
        f"1. cp-a (controlplane, 127.11.1.11): re-image at v1.11.6 (schematic change: ce4c980550dd -> {NEW[:12]}) — "
        "etcd snapshot through it (the only control plane), talosctl upgrade, read back (version and schematic), "
        "talosctl health"
    )
    run = cli(tmp_path, "--talosctl", str(fake.path), data=data)
    assert run.returncode == 0 and fake.snapshots() == ["cp-a"] and fake.upgraded() == ["cp-a", "wk-a", "wk-b"]
    assert numbered(run.stdout) == numbered(dry.stdout)


def test_an_interrupt_during_a_snapshot_touched_no_node(tmp_path):
    code, _, stderr, pids = interrupted(tmp_path, signal.SIGTERM, {"etcd snapshot": CONTROL_PLANES})
    assert code == 130 and processes.all_gone(pids)
    assert stderr == (
        "terravixens upgrade: interrupted by SIGTERM during the etcd snapshot before the upgrade of cp-a (talosctl "
        "etcd snapshot stopped with its process group); done: none; not touched: cp-a, cp-b, cp-c, wk-a, wk-b\n"
    )
    assert snapshot_files(tmp_path) == []


# ---------------------------------------------------------------------------------------------------------- the lines
# What the run and --dry-run print, from terravixens.talos.rolling's values, each compared whole (the runs above
# compare the numbered lines of a plan with what the run then does; these pin the words of every kind of line).
def test_the_target_lines_name_each_image_its_nodes_its_schematic_and_its_extensions():
    """Three hypervisors, three images: pve1's default (cp-a, wk-a), pve2's with two extensions (cp-b, wk-b) and
    pve3's without any (cp-c alone); one line per image, in the plan's order."""
    data = with_extensions(site_data(), ISCSI, ("pve2",))
    data = with_extensions(data, [], ("pve3",))
    steps = upgrade_plan(support.site_from(data), "prod")
    assert [s.extensions for s in steps if s.node in ("cp-a", "cp-b", "cp-c")] == [
        ("siderolabs/qemu-guest-agent",),
        ("siderolabs/iscsi-tools", "siderolabs/qemu-guest-agent"),
        (),
    ]
    bare = schematic_id(TalosImage(extensions=[]))
    bare_image = f"127.0.0.1:9/nocloud-installer/{bare}:v1.11.6"
    assert target_lines(steps, parse_version("v1.11.6")) == [
        f"target v1.11.6 for cp-a, wk-a: {IMAGE} (schematic {SCHEMATIC[:12]}, extensions: siderolabs/qemu-guest-agent)",
        (
            f"target v1.11.6 for cp-b, wk-b: {NEW_IMAGE} (schematic {NEW[:12]}, extensions: siderolabs/iscsi-tools, "
            "siderolabs/qemu-guest-agent)"
        ),
        f"target v1.11.6 for cp-c: {bare_image} (schematic {bare[:12]}, extensions: none)",
    ]


def test_what_a_node_runs_is_said_with_its_version_and_short_schematic():
    version = parse_version("v1.11.5")
    assert Running(version, SCHEMATIC).describe() == f"v1.11.5, schematic {SCHEMATIC[:12]}"
    assert Running(version, None).describe() == "v1.11.5, schematic none (not an Image Factory image)"


def decisions(site, running: dict[str, str]) -> list[Decision]:
    """Each node of the plan running the version given (its image already the site's), against v1.11.6."""
    target = parse_version("v1.11.6")
    steps = upgrade_plan(site, "prod")
    return [Decision(s, Running(parse_version(running[s.node]), s.schematic), target) for s in steps]


SNAPSHOT = "etcd snapshot through cp-b"


def test_every_kind_of_unit_line_whole(site):
    """cp-a current (skipped, then a health check before the next upgrade), cp-b and cp-c alone, each after its
    etcd snapshot, the two workers in one batch: the snapshot only for control planes and first, `together` for a
    batch of two."""
    units = schedule(decisions(site, {**dict.fromkeys(FIVE, "v1.11.5"), "cp-a": "v1.11.6"}), 2)
    assert [(u.kind, u.names, u.after) for u in units] == [
        ("skip", "cp-a", ()),
        ("health", "", ("cp-a",)),
        ("upgrade", "cp-b", ()),
        ("upgrade", "cp-c", ()),
        ("upgrade", "wk-a, wk-b", ()),
    ]
    lines = [line for number, unit in enumerate(units, 1) for line in unit_lines(number, unit, SNAPSHOT)]
    change = f"v1.11.5 -> v1.11.6 (version change; schematic {SCHEMATIC[:12]} kept)"
    gate = "talosctl upgrade, read back (version and schematic), talosctl health"
    assert lines == [
        f"1. cp-a (controlplane, 127.11.1.11): already current (v1.11.6, schematic {SCHEMATIC[:12]}): skipped",
        "2. talosctl health after the skipped cp-a",
        f"3. cp-b (controlplane, 127.11.1.12): {change} — {SNAPSHOT}, {gate}",
        f"4. cp-c (controlplane, 127.11.1.13): {change} — {SNAPSHOT}, {gate}",
        f"5. wk-a (worker, 127.11.1.21): {change}",
        f"5. wk-b (worker, 127.11.1.22): {change} — wk-a, wk-b together: {gate}",
    ]


def test_a_batch_of_one_is_not_together_and_skipped_nodes_at_the_end_get_their_health_check(site):
    units = schedule(decisions(site, {**dict.fromkeys(FIVE, "v1.11.5"), "wk-b": "v1.11.6"}), 1)
    assert units[-2:] == [units[-2], Unit("health", after=("wk-b",))] and units[-2].kind == "skip"
    assert unit_lines(4, units[3], SNAPSHOT) == [
        (
            f"4. wk-a (worker, 127.11.1.21): v1.11.5 -> v1.11.6 (version change; schematic {SCHEMATIC[:12]} kept) — "
            "talosctl upgrade, read back (version and schematic), talosctl health"
        )
    ]
    assert unit_lines(6, units[-1], SNAPSHOT) == ["6. talosctl health after the skipped wk-b"]
