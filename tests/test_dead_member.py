"""Dead control plane: `terravixens remove-dead-member` asks (typed SITE/CLUSTER/NODE or --confirm), waits (the node
silent over several probes), checks Terraform's state step, and only then removes the etcd member through a healthy
control plane, deletes the Node object and forgets the apply.

talosctl is tests/fake_talosctl.py (talosctl's own output formats and errors; a real cluster would add the apid
proxy's latency and TLS), kubectl a shell script on PATH, Terraform tests/fake_terraform.py; the talosctl fake's
call log also receives the Terraform calls, so the order of everything is visible.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terravixens.etcd_snapshots import no_snapshot_reason
from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.dead_member import (
    member_id,
    remove_dead_member,
    silent,
    snapshot_before_removal,
)
from terravixens.operations.etcd import SnapshotPolicy
from terravixens.operations.workspace import Workspace
from terravixens.runner import Ran
from terravixens.talosctl import Talosctl, members
from tests import etcd_tool
from tests.fake_terraform import APPLY
from tests.tools_on_path import CONFIRM, ETCD, LoggedTerraform, LoggedWorkspace, Tools, options

ROOT = Path(__file__).resolve().parent.parent
# `talosctl etcd members` through 10.11.1.12 as talosctl >= 1.9 prints it (cmd/talosctl/cmd/talos/etcd.go).
MEMBERS = """NODE         ID                 HOSTNAME   PEER URLS                 CLIENT URLS               LEARNER
10.11.1.12   2a8f0e61c5b7d3f9   cp-a       https://10.11.1.11:2380   https://10.11.1.11:2379   false
10.11.1.12   7c1d4b9e0f3a6d21   cp-b       https://10.11.1.12:2380   https://10.11.1.12:2379   false
10.11.1.12   091e2f7a3b6c0d45   cp-c       https://10.11.1.13:2380   https://10.11.1.13:2379   false
"""


def run(example_site, tmp_path, tools: Tools, tf=None, console=None, **changes) -> tuple[int, str]:
    out = console or Console(out=io.StringIO())
    code = remove_dead_member(
        LoggedWorkspace(example_site, tools, root=tmp_path),
        "prod",
        "cp-a",
        tf or LoggedTerraform(tools),
        tools.talosctl(),
        tools.kubectl(),
        out,
        options(**changes),
    )
    return code, out.out.getvalue()


# ---------------------------------------------------------------------------------------------------------- parsing
def test_member_ids_are_read_from_talosctls_table():
    assert member_id(MEMBERS, "cp-b") == "7c1d4b9e0f3a6d21"
    assert member_id(MEMBERS, "cp-c") == "091e2f7a3b6c0d45"
    assert member_id(MEMBERS, "cp-z") is None
    assert member_id(MEMBERS, "HOSTNAME") is None  # the header is not a member
    # talosctl before 1.9 printed no LEARNER column and ids without leading zeros
    old = "NODE ID HOSTNAME PEER URLS CLIENT URLS\n10.11.1.12 91e2f7a3b6c0d45 cp-c https://a https://b\n"
    assert [(m.id, m.hostname, m.learner) for m in members(old)] == [("91e2f7a3b6c0d45", "cp-c", False)]


def test_what_counts_as_silence():
    def failed(stderr: str) -> Ran:
        return Ran(("talosctl",), 1, "", stderr, f"exit 1: {stderr}")

    assert silent(
        failed(
            "error getting version from node 10.11.1.11: rpc error: code = Unavailable desc = connection "
            'error: desc = "transport: Error while dialing: dial tcp 10.11.1.11:50000: connect: no route '
            'to host"'
        )
    )
    assert silent(Ran(("talosctl",), None, "", "", "talosctl version did not answer within 1s", timed_out=True))
    # a wrong talosconfig is Unavailable too, but it proves nothing about the node
    assert not silent(
        failed(
            "error getting version from node 10.11.1.11: rpc error: code = Unavailable desc = "
            'connection error: desc = "transport: authentication handshake failed: tls: failed to '
            'verify certificate: x509: certificate signed by unknown authority"'
        )
    )
    assert not silent(Ran(("talosctl",), None, "", "", "cannot run talosctl: No such file or directory"))


# ---------------------------------------------------------------------------------------------------------- the path
def test_silent_over_the_window_state_checked_then_member_removed(example_site, tmp_path):
    tools = Tools(tmp_path)
    tf = LoggedTerraform(tools)
    console = Console(out=io.StringIO())
    started = time.monotonic()
    code, output = run(example_site, tmp_path, tools, tf, console, probes=3, probe_window=1.0)
    assert code == ExitCode.OK
    assert time.monotonic() - started >= 1.0  # the last probe waited for the end of the window
    assert tools.log() == [
        "synth",  # first: a safety rule stopping it stops everything before any call
        "talosctl 10.11.1.11 version",
        "talosctl 10.11.1.11 version",
        "talosctl 10.11.1.11 version",
        "talosctl 10.11.1.12 etcd members",
        "terraform init -input=false -no-color",
        "terraform state list",
        "terraform output -raw kubeconfig",
        "terraform state pull",
        f"terraform show -json -no-color {_backup(tmp_path)}",  # backup, verified
        "talosctl 10.11.1.12 etcd remove-member 2a8f0e61c5b7d3f9",
        "talosctl 10.11.1.12 etcd members",
        f"terraform state rm {APPLY}.node_cp-a_apply",
    ]
    assert console.journal.done == [
        "synth",
        "probe (silent over 1s)",
        "etcd members (cp-a is member 2a8f0e61c5b7d3f9, through cp-b)",
        "state check (apply in the state)",
        f"backup ({Path(_backup(tmp_path)).relative_to(tmp_path)})",
        "etcd removal (member 2a8f0e61c5b7d3f9)",
        "Node deletion",
        "forget the apply",
    ]
    assert console.journal.pending == [] and console.journal.current is None
    assert [m["hostname"] for m in tools.state()["members"]] == ["cp-b", "cp-c"]
    assert tools.kubectl_log.read_text().split()[2:5] == ["delete", "node", "cp-a"]
    assert f"{APPLY}.node_cp-a_apply" not in tf.states["platform-prod"]
    assert "proxmox_virtual_environment_vm.node_cp-a_vm" in tf.states["platform-prod"]  # deleted by the next deploy
    assert not [c for c in tf.calls if c[1] in ("plan", "apply")]  # no reset was attempted
    assert "platform-prod: probe — cp-a (10.11.1.11) probed 3 times over 1s: no answer" in output
    assert "platform-prod: etcd — 3 members listed through cp-b; cp-a is member 2a8f0e61c5b7d3f9" in output
    assert "platform-prod: etcd — 2 members left (read back through cp-b)" in output
    assert "next: remove cp-a from clusters.prod.control_planes in the site file" in output


def _backup(root: Path) -> str:
    [path] = (root / "state-backups" / "homelab" / "platform-prod").glob("*-remove-dead-cp-a.tfstate")
    return str(path)


def test_one_answer_during_the_window_refuses(example_site, tmp_path):
    """The node is down for two probes and back for the third (a reboot): a live control plane stays in etcd."""
    tools = Tools(tmp_path, version_script={"10.11.1.11": [False, False, True]})
    tf = LoggedTerraform(tools)
    with pytest.raises(OperationError) as caught:
        run(example_site, tmp_path, tools, tf, probes=4, probe_window=0.6)
    assert caught.value.code == ExitCode.REFUSED
    assert str(caught.value).startswith("cp-a (10.11.1.11) answered probe 3 of 4 (at ")
    assert str(caught.value).endswith("nothing was done")
    assert tools.log() == ["synth", *["talosctl 10.11.1.11 version"] * 3] and tf.calls == []
    assert len(tools.state()["members"]) == 3


def test_a_probe_that_fails_for_another_reason_proves_nothing(example_site, tmp_path):
    tools = Tools(tmp_path, fail={"version": ["10.11.1.11"]})  # an error that is not a connection failure
    with pytest.raises(OperationError) as caught:
        run(example_site, tmp_path, tools)
    assert caught.value.code == ExitCode.REFUSED
    assert "talosctl version failed for another reason than silence" in str(caught.value)
    assert len(tools.state()["members"]) == 3


def test_a_missing_talosctl_is_a_stop_not_silence(example_site, tmp_path):
    tools = Tools(tmp_path)
    out = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        remove_dead_member(
            Workspace(example_site, root=tmp_path),
            "prod",
            "cp-a",
            LoggedTerraform(tools),
            Talosctl(str(tmp_path / "nowhere" / "talosctl")),
            tools.kubectl(),
            out,
            options(),
        )
    assert caught.value.code == ExitCode.FAILED  # FAILED: an external step is missing
    assert str(caught.value) == (
        f"probe 1 of 2: cannot run {tmp_path}/nowhere/talosctl: No such file or directory; nothing was done"
    )


def test_terraforms_state_step_is_checked_before_etcd_is_touched(example_site, tmp_path):
    tools = Tools(tmp_path)
    tf = LoggedTerraform(tools, fail=("state list",))
    console = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        run(example_site, tmp_path, tools, tf, console)
    assert caught.value.code == ExitCode.FAILED
    assert "terraform state list failed" in str(caught.value)
    assert console.journal.line(interrupted=False) == (
        "stopped at state check (init): done: synth, probe (silent over 0.5s), etcd members (cp-a is member "
        "2a8f0e61c5b7d3f9, through cp-b); not done: state check, backup, etcd removal, Node deletion, forget the apply"
    )
    assert not [line for line in tools.log() if "remove-member" in line]
    assert len(tools.state()["members"]) == 3 and not tools.kubectl_log.exists()


def test_the_hook_before_the_irreversible_step_runs_last_and_can_stop_it(example_site, tmp_path):
    tools = Tools(tmp_path)
    seen = []

    def snapshot(what):
        seen.append((what.node, what.member_id, what.through, what.through_address, list(tools.log())))
        raise OperationError(
            "etcd snapshot through cp-b could not be verified; nothing was done", ExitCode.BACKUP_FAILED
        )

    with pytest.raises(OperationError) as caught:
        run(example_site, tmp_path, tools, before_irreversible=snapshot)
    assert caught.value.code == ExitCode.BACKUP_FAILED
    [(node, member, through, address, log_then)] = seen
    assert (node, member, through, address) == ("cp-a", "2a8f0e61c5b7d3f9", "cp-b", "10.11.1.12")
    # the verified backup is the last thing before it (the kubeconfig output was read with the state check)
    assert log_then[-3:] == [
        "terraform output -raw kubeconfig",
        "terraform state pull",
        "terraform show -json -no-color " + _backup(tmp_path),
    ]
    assert len(tools.state()["members"]) == 3


# ---------------------------------------------------------------------------------------------------------- snapshot
def _snapshot_calls(tools: Tools) -> list[str]:
    return [line.rsplit(" ", 1)[0] for line in tools.log() if " etcd snapshot " in line]


def test_a_verified_snapshot_through_another_control_plane_comes_right_before_the_removal(example_site, tmp_path):
    """What `terravixens remove-dead-member` wires into the hook: the snapshot is the last thing before
    `etcd remove-member`, through a live control plane (the dead one is tried last: avoid)."""
    tools = Tools(tmp_path)
    ws = LoggedWorkspace(example_site, tools, root=tmp_path)
    console = Console(out=io.StringIO())
    code = remove_dead_member(
        ws,
        "prod",
        "cp-a",
        LoggedTerraform(tools),
        tools.talosctl(),
        tools.kubectl(),
        console,
        options(before_irreversible=snapshot_before_removal(ws)),
    )
    assert code == ExitCode.OK
    log = tools.log()
    at = log.index("talosctl 10.11.1.12 etcd remove-member 2a8f0e61c5b7d3f9")
    assert log[at - 1].startswith("talosctl 10.11.1.12 etcd snapshot ")  # right before the irreversible step
    assert _snapshot_calls(tools) == ["talosctl 10.11.1.12 etcd snapshot"]
    [kept] = (tmp_path / "etcd-snapshots" / "homelab" / "prod").glob("*.snapshot")
    assert kept.name.endswith("_cp-b_the-removal-of-cp-a.snapshot")
    assert kept.read_bytes() == etcd_tool.genuine_snapshot().read_bytes()
    output = console.out.getvalue()
    assert (
        f"platform-prod: snapshot — etcd-snapshots/homelab/prod/{kept.name} through cp-b, before the removal of "
        in (output)
    )
    assert "etcd removal (member 2a8f0e61c5b7d3f9)" in console.journal.done


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_no_verified_snapshot_leaves_etcd_untouched(example_site, tmp_path, damage):
    tools = Tools(tmp_path, etcd_snapshot=etcd_tool.fake_talosctl_setup(damage))
    ws = LoggedWorkspace(example_site, tools, root=tmp_path)
    console = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        remove_dead_member(
            ws,
            "prod",
            "cp-a",
            LoggedTerraform(tools),
            tools.talosctl(),
            tools.kubectl(),
            console,
            options(before_irreversible=snapshot_before_removal(ws)),
        )
    assert caught.value.code == ExitCode.BACKUP_FAILED
    assert str(caught.value).startswith("platform-prod: no verified etcd snapshot before the removal of cp-a (")
    # the live control planes first, the dead one last (it does not answer)
    assert _snapshot_calls(tools) == [f"talosctl {a} etcd snapshot" for a in ("10.11.1.12", "10.11.1.13", "10.11.1.11")]
    assert not [line for line in tools.log() if "remove-member" in line] and len(tools.state()["members"]) == 3
    assert console.journal.line(interrupted=False).endswith("; not done: etcd removal, Node deletion, forget the apply")
    assert console.journal.line(interrupted=False).startswith("stopped at etcd removal (snapshot): done: synth, probe")


def test_no_snapshot_with_a_reason_goes_on_and_says_why(example_site, tmp_path):
    tools = Tools(tmp_path)
    ws = LoggedWorkspace(example_site, tools, root=tmp_path)
    console = Console(out=io.StringIO())
    policy = SnapshotPolicy(skip_reason=no_snapshot_reason("snapshot taken by hand at 10:02"))
    code = remove_dead_member(
        ws,
        "prod",
        "cp-a",
        LoggedTerraform(tools),
        tools.talosctl(),
        tools.kubectl(),
        console,
        options(before_irreversible=snapshot_before_removal(ws, policy)),
    )
    assert code == ExitCode.OK and _snapshot_calls(tools) == []
    assert (
        "platform-prod: snapshot — skipped before the removal of cp-a: snapshot taken by hand at 10:02 (--no-snapshot)"
        in console.out.getvalue()
    )


def test_the_talosconfig_comes_from_the_platform_layer_after_synth(example_site, tmp_path):
    """Without --talosconfig: synth, the layer initialised once, its talosconfig output in a private file that every
    talosctl call is given and that is gone afterwards."""
    tools = Tools(tmp_path)
    ws = LoggedWorkspace(example_site, tools, root=tmp_path)
    console = Console(out=io.StringIO())
    code = remove_dead_member(
        ws,
        "prod",
        "cp-a",
        LoggedTerraform(tools),
        tools.talosctl(),
        tools.kubectl(),
        console,
        options(before_irreversible=snapshot_before_removal(ws), talosconfig_from_layer=True),
    )
    assert code == ExitCode.OK
    log = tools.log()
    assert log[:4] == [
        "synth",
        "terraform init -input=false -no-color",
        "terraform output -raw talosconfig",
        "talosctl 10.11.1.11 version",
    ]
    assert log.count("terraform init -input=false -no-color") == 1
    given = {call[1] for call in tools.state()["calls"] if call[0] == "--talosconfig"}
    [path] = given
    assert Path(path).name == "talosconfig" and Path(path).parent.name.startswith("terravixens-talosconfig-")
    assert not Path(path).exists() and not Path(path).parent.exists()
    assert console.journal.done[:2] == ["synth", "talosconfig"]


def test_a_member_already_gone_still_forgets_the_apply(example_site, tmp_path):
    tools = Tools(tmp_path, members=ETCD[1:])
    code, output = run(example_site, tmp_path, tools)
    assert code == ExitCode.OK and "cp-a is not a member" in output
    assert not [line for line in tools.log() if "remove-member" in line]
    assert tools.log()[-1] == f"terraform state rm {APPLY}.node_cp-a_apply"


# ---------------------------------------------------------------------------------------------------------- asking
def test_typed_confirmation(example_site, tmp_path):
    tools = Tools(tmp_path)
    console = Console(out=io.StringIO(), answers=iter([CONFIRM]))
    code, output = run(example_site, tmp_path, tools, console=console, confirm=None)
    assert code == ExitCode.OK
    assert output.startswith(
        "This removes cp-a from etcd for good (after checking it stays silent and that "
        f"Terraform can forget its apply): type {CONFIRM} to confirm: {CONFIRM}\n"
    )


@pytest.mark.parametrize(
    "given, answers, message",
    [
        ("homelab/prod/cp-b", None, "confirmation 'homelab/prod/cp-b' is not 'homelab/prod/cp-a': nothing was done"),
        (None, ["prod/cp-a"], "confirmation 'prod/cp-a' is not 'homelab/prod/cp-a': nothing was done"),
        (None, None, "no terminal to confirm on: pass --confirm homelab/prod/cp-a; nothing was done"),
    ],
)
def test_a_wrong_or_missing_confirmation_does_nothing(example_site, tmp_path, given, answers, message):
    tools = Tools(tmp_path)
    tf = LoggedTerraform(tools)
    console = Console(out=io.StringIO(), answers=iter(answers) if answers is not None else None)
    with pytest.raises(OperationError) as caught:
        run(example_site, tmp_path, tools, tf, console=console, confirm=given)
    assert caught.value.code == ExitCode.DECLINED and str(caught.value) == message
    assert tools.log() == [] and tf.calls == []  # not even a probe


def test_workers_and_unknown_nodes_are_input_errors(example_site, tmp_path):
    tools = Tools(tmp_path)
    for node in ("wk-a", "cp-z"):
        with pytest.raises(OperationError) as caught:
            remove_dead_member(
                Workspace(example_site, root=tmp_path),
                "prod",
                node,
                LoggedTerraform(tools),
                tools.talosctl(),
                tools.kubectl(),
                Console(out=io.StringIO()),
                options(),
            )
        assert caught.value.code == ExitCode.BAD_INPUT
        assert f"{node!r} is not a control plane of prod in the site file" in str(caught.value)


# ---------------------------------------------------------------------------------------------------------- CLI
def cli(tmp_path: Path, tools: Tools, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "terravixens.cli",
            "remove-dead-member",
            "prod",
            "cp-a",
            "--site",
            str(ROOT / "sites" / "example.yaml"),
            "--talosctl",
            str(tools.talosctl_path),
            "--talosconfig",
            str(tmp_path / "talosconfig"),
            *arguments,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def test_cli_without_a_terminal_or_confirm_is_declined(tmp_path):
    tools = Tools(tmp_path)
    result = cli(tmp_path, tools)
    assert result.returncode == ExitCode.DECLINED and "Traceback" not in result.stderr
    assert result.stderr == (
        "terravixens remove-dead-member: no terminal to confirm on: pass --confirm "
        "homelab/prod/cp-a; nothing was done\n"
    )
    assert tools.log() == []


def test_cli_exit_code_without_a_live_member(tmp_path):
    tools = Tools(tmp_path, unreachable=["10.11.1.11", "10.11.1.12", "10.11.1.13"])  # nobody lists members
    result = cli(tmp_path, tools, "--confirm", CONFIRM, "--probes", "2", "--probe-window", "1s")
    assert result.returncode == ExitCode.REFUSED, result.stderr
    assert "no control plane of prod answers `talosctl etcd members`: etcd has lost quorum" in result.stderr
    assert "probed 2 times over 1s: no answer" in result.stdout


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--probes", "1", "'1' is not a number of probes: give a whole number, 2 or more"),
        ("--probe-window", "soon", "'soon' is not a duration"),
    ],
)
def test_cli_refuses_bad_probe_options(tmp_path, option, value, message):
    tools = Tools(tmp_path)
    result = cli(tmp_path, tools, "--confirm", CONFIRM, option, value)
    assert result.returncode == 2 and message in result.stderr and tools.log() == []
