"""Rolling upgrades that cannot make things worse, driven against a fake `talosctl` (tests/fake_talosctl.py: a
wrapper written into tmp_path answers from a scenario file and records its calls). Nothing is contacted: the site
is the loopback version of the example."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.talosctl import Talosctl, parse_duration
from terravixens.upgrade import (
    describe_kubernetes,
    kubernetes_upgrade,
    parse_version,
    release,
    rolling_upgrade,
    skips_a_minor,
    upgrade_plan,
)
from tests import processes, support

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fake_talosctl.py"
ADDRESSES = {
    "cp-a": "127.11.1.11",
    "cp-b": "127.11.1.12",
    "cp-c": "127.11.1.13",
    "wk-a": "127.11.1.21",
    "wk-b": "127.11.1.22",
    "wk-c": "127.11.1.23",
}
NAMES = {address: name for name, address in ADDRESSES.items()}
SCHEMATIC = "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515"
IMAGE = f"127.0.0.1:9/nocloud-installer/{SCHEMATIC}:v1.11.6"
FIVE = ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"]
# What the upgrade reads of a node: `talosctl version`, then `talosctl get extensions` (the booted image).
READ = ["version", "get"]


def site_data(workers: int = 2, talos_version: str = "v1.11.6") -> dict:
    data = support.loopback_data()
    data["clusters"]["prod"]["talos_version"] = talos_version
    if workers == 3:
        data["clusters"]["prod"]["workers"]["wk-c"] = {
            "hypervisor": "pve2",
            "vm_id": 1203,
            "networks": {
                "maintenance_ip": "127.0.0.63",
                "vlans": {111: {"address": "127.11.1.23/24", "gateway": "127.11.1.1"}},
            },
        }
    return data


@pytest.fixture()
def site():
    return support.site_from(site_data())


@pytest.fixture()
def site3():
    return support.site_from(site_data(workers=3))


class Fake:
    """The fake talosctl of one test: its path, its scenario, and what it was asked."""

    def __init__(self, folder: Path, versions: dict[str, str], **scenario):
        self.scenario = folder / "scenario.json"
        addresses = {
            key: [ADDRESSES.get(n, n) for n in value]
            for key, value in scenario.items()
            if key in ("broken", "breaks_on_upgrade", "together", "rolls_back")
        }
        # the image each node booted: the target's schematic unless the test says otherwise (None: no such row)
        tables = {
            key: {command: [ADDRESSES.get(n, n) for n in nodes] for command, nodes in value.items()}
            for key, value in scenario.items()
            if key in ("fail", "hang")
        }
        booted = {**dict.fromkeys(versions, SCHEMATIC), **scenario.get("schematics", {})}
        state = {
            "versions": {ADDRESSES[n]: v for n, v in versions.items()},
            "calls": [],
            **addresses,
            **tables,
            "schematics": {ADDRESSES[n]: v for n, v in booted.items() if v is not None},
            "health_script": scenario.get("health_script", []),
            "together_wait": scenario.get("together_wait", 10),
        }
        self.scenario.write_text(json.dumps(state))
        self.path = folder / "talosctl"
        self.path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} {self.scenario} "$@"\n')
        self.path.chmod(0o755)

    def state(self) -> dict:
        return json.loads(self.scenario.read_text())

    def calls(self) -> list[list[str]]:
        return self.state()["calls"]

    def kinds(self) -> list[str]:
        return [call[4] for call in self.calls()]

    def upgraded(self) -> list[str]:
        return [NAMES[call[call.index("--nodes") + 1]] for call in self.calls() if call[4] == "upgrade"]

    def talosctl(self, timeout: int = 60) -> Talosctl:
        return Talosctl(str(self.path), "talosconfig", timeout)


def quiet(_: str) -> None:
    pass


def cli(tmp_path: Path, *arguments: str, workers: int = 2) -> subprocess.CompletedProcess:
    site_file = tmp_path / "site.yaml"
    site_file.write_text(json.dumps(site_data(workers)))  # JSON is YAML
    return subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "upgrade", "prod", "--site", str(site_file), *arguments],
        cwd=ROOT,
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


def interrupted(tmp_path: Path, signum: int, hang: dict, versions: dict | None = None) -> tuple[int, str, str, list]:
    """Runs `terravixens upgrade` until the fake hangs, sends `signum`, returns (exit code, stdout, stderr, pids of
    the hung talosctl and its child)."""
    fake = Fake(tmp_path, versions or dict.fromkeys(FIVE, "v1.11.5"), hang=hang)
    site_file = tmp_path / "site.yaml"
    site_file.write_text(json.dumps(site_data()))
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
        cwd=ROOT,
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
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.6"), schematics={"wk-a": other, "wk-b": None})
    messages: list[str] = []
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=messages.append)
    assert outcome.ok and outcome.upgraded == ["wk-a", "wk-b"] and outcome.skipped == ["cp-a", "cp-b", "cp-c"]
    assert "wk-a (worker, 127.11.1.21): v1.11.6 (schematic 376567988ad3) -> v1.11.6" in messages
    assert "wk-b (worker, 127.11.1.22): v1.11.6 (schematic none) -> v1.11.6" in messages
    assert fake.state()["schematics"]["127.11.1.21"] == SCHEMATIC


def test_a_node_that_boots_another_image_than_asked_is_a_failure(site, tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), rolls_back=["cp-a"])
    state = fake.state()
    state["versions"]["127.11.1.11"] = "v1.11.6"  # right version already, wrong image: the upgrade must fix it
    state["schematics"]["127.11.1.11"] = "0" * 64
    fake.scenario.write_text(json.dumps(state))
    outcome = rolling_upgrade(site, "prod", fake.talosctl(), log=quiet)
    assert outcome.summary() == (
        f"stopped at cp-a: not on the target after its upgrade (cp-a runs v1.11.6 but booted schematic {'0' * 64}, "
        f"not {SCHEMATIC}: it is not the installer image {IMAGE}); done: none; not touched: cp-b, cp-c, wk-a, wk-b"
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
    assert "wk-b (worker, 127.11.1.22): v1.11.7 -> v1.11.6" in forced.stdout.splitlines()
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
    site_file = tmp_path / "site.yaml"
    site_file.write_text(json.dumps(site_data(talos_version="v1.13.0")))
    command = [
        sys.executable,
        "-m",
        "terravixens.cli",
        "upgrade",
        "prod",
        "--site",
        str(site_file),
        "--talosctl",
        str(fake.path),
    ]
    refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == ExitCode.REFUSED and fake.upgraded() == []
    assert refused.stdout.splitlines()[-1].startswith("refused: cp-a runs v1.11.6, cp-b runs v1.11.6")
    forced = subprocess.run([*command, "--force"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert forced.returncode == 0 and fake.upgraded() == FIVE
    assert "cp-a (controlplane, 127.11.1.11): v1.11.6 -> v1.13.0" in forced.stdout.splitlines()


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


# ---------------------------------------------------------------------------------------------------------- CLI
def test_cli_dry_run_touches_nothing_and_shows_batches(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(ADDRESSES, "v1.11.5"))
    dry = cli(tmp_path, "--dry-run", "--worker-batch", "2", "--talosctl", str(fake.path), workers=3)
    assert dry.returncode == 0 and fake.calls() == []
    lines = dry.stdout.splitlines()
    assert lines[0] == "0. talosctl health: the cluster must be healthy before the first node"
    assert lines[1] == f"1. cp-a (controlplane, 127.11.1.11) -> {IMAGE}, then talosctl health"
    assert lines[4:7] == [
        f"4. wk-a (worker, 127.11.1.21) -> {IMAGE}",
        f"   wk-b (worker, 127.11.1.22) -> {IMAGE}, together, then talosctl health",
        f"5. wk-c (worker, 127.11.1.23) -> {IMAGE}, then talosctl health",
    ]
    assert lines[-1] == (
        "nodes already on v1.11.6 are skipped (talosctl health follows them); a node newer than "
        "v1.11.6, or more than one minor behind it, refuses the run unless --force"
    )


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
    assert run.stdout.splitlines()[0] == "cluster healthy before the first node"
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
        ("--worker-batch", "0", "'0' is not a batch size: give a whole number of workers, 1 or more"),
    ],
)
def test_cli_refuses_bad_options(option, value, message, tmp_path):
    run = cli(tmp_path, option, value)
    assert run.returncode == 2 and run.stderr.splitlines()[-1].endswith(message)


def test_durations():
    assert [parse_duration(text) for text in ("45", "90s", "15m", "2h")] == [45, 90, 900, 7200]
    with pytest.raises(ValueError):
        parse_duration("0s")
