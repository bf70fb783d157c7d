"""Rolling Talos upgrades, driven against a fake `talosctl` (a script that records its calls and answers from a
state file). Nothing is contacted: the site is the loopback version of the example."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from terravixens.upgrade import kubernetes_upgrade, rolling_upgrade, upgrade_plan
from tests import support

ROOT = Path(__file__).resolve().parent.parent
FAKE_TALOSCTL = '''#!{python}
import json, re, sys
state_path = {state!r}
state = json.load(open(state_path))
args = sys.argv[1:]
state["calls"].append(args)
node = args[args.index("--nodes") + 1]
command = args[4]
code = 0
if command == "version":
    print("Client:\\n\\tTag: v1.11.6\\nServer:\\n\\tNODE: %s\\n\\tTag: %s" % (node, state["versions"][node]))
elif command == "upgrade":
    if node in state["fail_upgrade"]:
        print("error: upgrade of %s failed" % node, file=sys.stderr); code = 1
    else:
        state["versions"][node] = re.search(r":(v[^:]+)$", args[args.index("--image") + 1]).group(1)
elif command == "upgrade-k8s":
    state["kubernetes"] = args[args.index("--to") + 1]
    if state.get("fail_k8s"):
        print("error: upgrade-k8s failed: apiserver not ready", file=sys.stderr); code = 1
elif command == "health":
    upgraded = [n for n, v in state["versions"].items() if v == "v1.11.6"]
    if len(upgraded) in state["unhealthy_after"]:
        print("waiting for etcd members to be healthy: timeout", file=sys.stderr); code = 1
json.dump(state, open(state_path, "w"))
sys.exit(code)
'''
ADDRESSES = {"cp-a": "127.11.1.11", "cp-b": "127.11.1.12", "cp-c": "127.11.1.13", "wk-a": "127.11.1.21",
             "wk-b": "127.11.1.22"}
IMAGE = "127.0.0.1:9/nocloud-installer/ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515:v1.11.6"


@pytest.fixture()
def site():
    data = support.loopback_data()
    data["clusters"]["prod"]["talos_version"] = "v1.11.6"
    return support.site_from(data)


@pytest.fixture()
def talosctl(tmp_path):
    state = tmp_path / "state.json"

    def make(versions: dict[str, str], fail_upgrade=(), unhealthy_after=()):
        state.write_text(json.dumps({"versions": {ADDRESSES[n]: v for n, v in versions.items()}, "calls": [],
                                     "fail_upgrade": [ADDRESSES[n] for n in fail_upgrade],
                                     "unhealthy_after": list(unhealthy_after)}))
        script = tmp_path / "talosctl"
        script.write_text(FAKE_TALOSCTL.format(python=sys.executable, state=str(state)))
        script.chmod(0o755)
        return str(script), lambda: json.loads(state.read_text())
    return make


def upgrades(calls: list[list[str]]) -> list[str]:
    by_address = {address: name for name, address in ADDRESSES.items()}
    return [by_address[c[c.index("--nodes") + 1]] for c in calls if c[4] == "upgrade"]


def test_plan_is_control_planes_then_workers_by_name(site):
    steps = upgrade_plan(site, "prod")
    assert [(s.node, s.role, s.address) for s in steps] == [
        ("cp-a", "controlplane", "127.11.1.11"), ("cp-b", "controlplane", "127.11.1.12"),
        ("cp-c", "controlplane", "127.11.1.13"), ("wk-a", "worker", "127.11.1.21"), ("wk-b", "worker", "127.11.1.22")]
    assert {s.image for s in steps} == {IMAGE}


def test_one_node_at_a_time_each_gated_on_health(site, talosctl):
    binary, state = talosctl(dict.fromkeys(ADDRESSES, "v1.11.5"))
    outcome = rolling_upgrade(site, "prod", "talosconfig", talosctl=binary, log=lambda _: None)
    assert outcome.ok and outcome.upgraded == ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"]
    kinds = [call[4] for call in state()["calls"]]
    assert kinds == ["version", "upgrade", "health"] * 5
    health = state()["calls"][2]
    assert health[health.index("--control-plane-nodes") + 1] == "127.11.1.11,127.11.1.12,127.11.1.13"
    assert health[health.index("--worker-nodes") + 1] == "127.11.1.21,127.11.1.22"
    upgrade = state()["calls"][1]
    assert upgrade[upgrade.index("--image") + 1] == IMAGE and "--wait" in upgrade


def test_nodes_already_on_target_are_skipped(site, talosctl):
    binary, state = talosctl({**dict.fromkeys(ADDRESSES, "v1.11.6"), "wk-b": "v1.11.5"})
    outcome = rolling_upgrade(site, "prod", "talosconfig", talosctl=binary, log=lambda _: None)
    assert outcome.upgraded == ["wk-b"] and outcome.skipped == ["cp-a", "cp-b", "cp-c", "wk-a"]
    assert upgrades(state()["calls"]) == ["wk-b"]


def test_unhealthy_cluster_stops_the_rollout(site, talosctl):
    binary, state = talosctl(dict.fromkeys(ADDRESSES, "v1.11.5"), unhealthy_after=[2])
    messages = []
    outcome = rolling_upgrade(site, "prod", "talosconfig", talosctl=binary, log=messages.append)
    assert not outcome.ok and outcome.stopped_at == "cp-b" and outcome.upgraded == ["cp-a", "cp-b"]
    assert upgrades(state()["calls"]) == ["cp-a", "cp-b"]
    assert messages[-1] == ("stopped at cp-b: the cluster is not healthy after upgrading it (waiting for etcd "
                            "members to be healthy: timeout); not touched: cp-c, wk-a, wk-b")


def test_failed_upgrade_stops_the_rollout(site, talosctl):
    binary, state = talosctl(dict.fromkeys(ADDRESSES, "v1.11.5"), fail_upgrade=["cp-a"])
    outcome = rolling_upgrade(site, "prod", "talosconfig", talosctl=binary, log=lambda _: None)
    assert outcome.stopped_at == "cp-a" and outcome.upgraded == []
    assert "talosctl upgrade failed (error: upgrade of 127.11.1.11 failed)" in outcome.reason
    assert [call[4] for call in state()["calls"]] == ["version", "upgrade"]


def test_rerun_after_a_stop_finishes_the_rollout(site, talosctl):
    binary, state = talosctl({"cp-a": "v1.11.6", "cp-b": "v1.11.6", "cp-c": "v1.11.5", "wk-a": "v1.11.5",
                              "wk-b": "v1.11.5"})
    outcome = rolling_upgrade(site, "prod", "talosconfig", talosctl=binary, log=lambda _: None)
    assert outcome.ok and outcome.skipped == ["cp-a", "cp-b"] and outcome.upgraded == ["cp-c", "wk-a", "wk-b"]


def test_cli_dry_run_and_exit_code(site, talosctl, tmp_path):
    site_file = tmp_path / "site.yaml"
    data = support.loopback_data()
    data["clusters"]["prod"]["talos_version"] = "v1.11.6"
    site_file.write_text(json.dumps(data))  # JSON is YAML
    dry = subprocess.run([sys.executable, "-m", "terravixens.cli", "upgrade", "prod", "--site", str(site_file),
                          "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0
    assert dry.stdout.splitlines()[0] == f"1. cp-a (controlplane, 127.11.1.11) -> {IMAGE}, then talosctl health"
    binary, _ = talosctl(dict.fromkeys(ADDRESSES, "v1.11.5"), unhealthy_after=[1])
    run = subprocess.run([sys.executable, "-m", "terravixens.cli", "upgrade", "prod", "--site", str(site_file),
                          "--talosctl", binary], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stdout.splitlines()[-1] == "upgraded: cp-a; already current: none"


def test_kubernetes_upgrade_goes_through_upgrade_k8s_then_health(site, talosctl):
    binary, state = talosctl(dict.fromkeys(ADDRESSES, "v1.11.6"))
    result = kubernetes_upgrade(site, "prod", "talosconfig", talosctl=binary, log=lambda _: None)
    assert result.ok
    calls = state()["calls"]
    assert [c[4] for c in calls] == ["upgrade-k8s", "health"]
    assert calls[0][2:] == ["--nodes", "127.11.1.11", "upgrade-k8s", "--to", "1.34.2"]
    assert state()["kubernetes"] == "1.34.2"


def test_kubernetes_upgrade_failure_stops(site, talosctl, tmp_path):
    binary, state = talosctl(dict.fromkeys(ADDRESSES, "v1.11.6"))
    data = json.loads((tmp_path / "state.json").read_text())
    data["fail_k8s"] = True
    (tmp_path / "state.json").write_text(json.dumps(data))
    result = kubernetes_upgrade(site, "prod", "talosconfig", talosctl=binary, log=lambda _: None)
    assert not result.ok and "talosctl upgrade-k8s failed (error: upgrade-k8s failed: apiserver not ready)" in result.reason
    assert [c[4] for c in state()["calls"]] == ["upgrade-k8s"]
