"""Dead control plane: `terravixens remove-dead-member` removes an unreachable member from etcd through a healthy
control plane (talosctl and kubectl are fakes on PATH), then forgets its apply so that no reset is attempted."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from terravixens.operations import ExitCode, OperationError
from terravixens.operations.console import Console
from terravixens.operations.dead_member import Talosctl, member_id, remove_dead_member
from terravixens.operations.workspace import Workspace
from tests.fake_terraform import APPLY, FakeTerraform, platform_state

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = """NODE         ID                 HOSTNAME   PEER URLS                 CLIENT URLS               LEARNER
10.11.1.12   2a8f0e61c5b7d3f9   cp-a       https://10.11.1.11:2380   https://10.11.1.11:2379   false
10.11.1.12   7c1d4b9e0f3a6d21   cp-b       https://10.11.1.12:2380   https://10.11.1.12:2379   false
10.11.1.12   91e2f7a3b6c0d458   cp-c       https://10.11.1.13:2380   https://10.11.1.13:2379   false
"""
# A fake talosctl: cp-a (10.11.1.11) is dead; the others answer. It records every call.
FAKE_TALOSCTL = """#!/bin/sh
echo "$@" >> "{log}"
node="$4"
shift 4
if [ "$node" = "10.11.1.11" ]; then echo "rpc error: code = Unavailable desc = connection refused" >&2; exit 1; fi
case "$1 $2" in
  "etcd members") cat "{members}";;
  "etcd remove-member") echo "removed";;
  version*) echo "Server: Tag: v1.11.5";;
esac
"""
FAKE_KUBECTL = """#!/bin/sh
echo "$@" >> "{log}"
"""


@pytest.fixture()
def tools(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    (tmp_path / "members.txt").write_text(MEMBERS)
    logs = {"talosctl": tmp_path / "talosctl.log", "kubectl": tmp_path / "kubectl.log"}
    for name, body in (("talosctl", FAKE_TALOSCTL), ("kubectl", FAKE_KUBECTL)):
        script = folder / name
        script.write_text(body.format(log=logs[name], members=tmp_path / "members.txt"))
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return logs


def fake() -> FakeTerraform:
    return FakeTerraform({"platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")})


def test_member_id_is_read_by_hostname():
    assert member_id(MEMBERS, "cp-b") == "7c1d4b9e0f3a6d21"
    assert member_id(MEMBERS, "cp-z") is None
    assert member_id("NODE ID HOSTNAME\n", "HOSTNAME") is None  # the header is not a member


def test_dead_control_plane_removed_through_a_healthy_one(example_site, tmp_path, tools):
    tf, out = fake(), Console(out=io.StringIO())
    ws = Workspace(example_site, root=tmp_path)
    code = remove_dead_member(ws, "prod", "cp-a", tf, Talosctl("talosconfig"), console=out)
    assert code == ExitCode.OK
    calls = [line.split(" ", 2)[2] for line in tools["talosctl"].read_text().splitlines()]
    assert calls == ["--nodes 10.11.1.11 version", "--nodes 10.11.1.12 etcd members",
                     "--nodes 10.11.1.12 etcd remove-member 2a8f0e61c5b7d3f9"]
    assert tools["kubectl"].read_text().split()[2:5] == ["delete", "node", "cp-a"]
    assert f"{APPLY}.node_cp-a_apply" not in tf.states["platform-prod"]
    assert "proxmox_virtual_environment_vm.node_cp-a_vm" in tf.states["platform-prod"]  # deleted by the next deploy
    assert not [c for c in tf.calls if c[1] in ("plan", "apply")]  # no reset was attempted
    assert list((tmp_path / "state-backups" / "homelab" / "platform-prod").glob("*-remove-dead-cp-a.tfstate"))
    assert "next: remove cp-a from clusters.prod.control_planes in the site file" in out.out.getvalue()


def test_a_node_that_answers_is_refused(example_site, tmp_path, tools):
    tf = fake()
    with pytest.raises(OperationError) as caught:
        remove_dead_member(Workspace(example_site, root=tmp_path), "prod", "cp-b", tf, Talosctl("talosconfig"),
                           console=Console(out=io.StringIO()))
    assert caught.value.code == ExitCode.REFUSED
    assert str(caught.value).startswith("cp-b (10.11.1.12) answers: remove it the normal way")
    assert tf.calls == [] and "remove-member" not in tools["talosctl"].read_text()


def test_workers_and_unknown_nodes_are_input_errors(example_site, tmp_path, tools):
    for node in ("wk-a", "cp-z"):
        with pytest.raises(OperationError) as caught:
            remove_dead_member(Workspace(example_site, root=tmp_path), "prod", node, fake(), Talosctl("talosconfig"))
        assert caught.value.code == ExitCode.BAD_INPUT
        assert f"{node!r} is not a control plane of prod in the site file" in str(caught.value)


def test_cli_exit_code_without_a_live_member(tmp_path, tools):
    (tmp_path / "members.txt").write_text("")  # nobody lists members: quorum is gone
    for name in ("talosctl",):
        script = tmp_path / "bin" / name
        script.write_text(script.read_text().replace('"etcd members") cat', '"etcd members") exit 1; cat'))
    result = subprocess.run([sys.executable, "-m", "terravixens.cli", "remove-dead-member", "prod", "cp-a",
                             "--site", str(ROOT / "sites" / "example.yaml")], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == ExitCode.REFUSED, result.stderr
    assert "no control plane of prod answers `talosctl etcd members`: etcd has lost quorum" in result.stderr
