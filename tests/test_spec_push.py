"""`terravixens spec push` and `spec handoff` against a fake node's SSH side on loopback (tests/fakessh_node.py):
the real `ssh` client, through the bounded runner, the agent bundle run by a bare python3 on a throwaway root.

Push: the driver resolves the spec from the site, specs and secrets files; nothing on the node but python3.
Handoff: the node's own agent (left by a push, or the image's) fetches its spec from a running `spec serve` with the
node.env its carrier wrote, converges and answers; a rotated token and a posture change reach it on the next run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import asyncssh
import pytest
import yaml

from terravixens import cli
from terravixens.standalone.node_env import render_env
from tests import json_shapes, spec_support
from tests.agent_support import mutations, node_root
from tests.fakessh_node import FakeNode

HOST = "127.0.0.1"


@pytest.fixture
def lab(tmp_path):
    """The site, a fake node's SSH side and a running spec server named by the node's node.env (the container's
    hookscript writes it): the agent checks a network change against that server (ADR 0059)."""
    site, secrets = spec_support.standalone_copy(tmp_path)
    root, tools = node_root(tmp_path / "node")
    server = spec_support.start_server(
        site, secrets, tmp_path / "serve.log", host=HOST, extra=["--watch-interval", "0.2"]
    )
    env = root / "etc/terravixens/node.env"
    env.parent.mkdir(parents=True)
    env.write_text(render_env(server.url, "dns1", spec_support.NODE_TOKENS["dns1"]))
    env.chmod(0o600)
    key = asyncssh.generate_private_key("ssh-ed25519")
    identity = tmp_path / "id_ed25519"
    identity.write_bytes(key.export_private_key())
    identity.chmod(0o600)
    node = FakeNode(HOST, root, tools, key).start()
    known = tmp_path / "known_hosts"
    known.write_text(node.known_hosts_line())
    ssh = ["--address", HOST, "--port", str(node.port), "--identity", str(identity), "--known-hosts", str(known)]
    yield site, secrets, node, ssh, server
    node.stop()
    server.stop()


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_push_configures_the_node_then_a_second_push_changes_nothing(lab, capsys):
    site, secrets, node, ssh, _ = lab
    code, out, err = _cli(capsys, "spec", "push", "dns1", "--site", str(site), "--secrets", str(secrets), *ssh)
    assert code == 0, out + err
    assert "dns1: hostname: hostname debian -> dns1" in out and "dns1: packages: install unbound" in out
    assert out.splitlines()[-1].startswith("spec push dns1: changed ")
    assert (node.root / "etc/hostname").read_text() == "dns1\n"
    assert spec_support.ALICE in (node.root / "home/ops/.ssh/authorized_keys").read_text()
    before = len(mutations(node.root))
    code, out, err = _cli(
        capsys, "spec", "push", "dns1", "--site", str(site), "--secrets", str(secrets), *ssh, "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["identity"], result["ok"], result["changed"]) == ("dns1", True, 0)
    assert json_shapes.conforms(result, "agent-result") == []
    assert mutations(node.root)[before:] == []


def test_push_dry_run_changes_nothing_and_a_failing_section_fails_the_command(lab, capsys):
    site, secrets, node, ssh, _ = lab
    code, out, _ = _cli(
        capsys, "spec", "push", "dns1", "--site", str(site), "--secrets", str(secrets), *ssh, "--dry-run"
    )
    assert code == 0 and "spec push dns1: would change" in out.splitlines()[-1]
    assert (node.root / "etc/hostname").read_text() == "debian\n" and mutations(node.root) == []
    spec = site.parent / "specs" / "dns.yaml"
    data = yaml.safe_load(spec.read_text())
    data["platform"]["packages"].append("missing-tool")
    spec.write_text(yaml.safe_dump(data))
    code, out, _ = _cli(capsys, "spec", "push", "dns1", "--site", str(site), "--secrets", str(secrets), *ssh)
    assert code == 4  # ExitCode.FAILED
    assert "E: Unable to locate package missing-tool" in out
    assert "; failed: packages" in out.splitlines()[-1] and "(the other sections are applied)" in out


def test_an_unknown_host_key_or_node_is_refused_in_one_line(lab, capsys, tmp_path):
    site, secrets, node, ssh, _ = lab
    other = tmp_path / "other_known_hosts"
    other.write_text(
        node.known_hosts_line().replace(
            node.known_hosts_line().split()[-1], "AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3RrZXlhbGljZXRlc3RrZXlhbGljZXRlc3RrZXlh"
        )
    )
    ssh = [*ssh[:-1], str(other)]
    code, out, _ = _cli(capsys, "spec", "push", "dns1", "--site", str(site), "--secrets", str(secrets), *ssh)
    assert code == 4 and out.count("\n") == 1
    assert out.startswith("spec push dns1: not done — installing the agent on 127.0.0.1 failed: ")
    assert "Host key verification failed" in out and node.commands == []
    code, _, err = _cli(capsys, "spec", "push", "dns9", "--site", str(site), "--secrets", str(secrets), *ssh)
    assert code == 2 and "'dns9' is not a standalone node of" in err


def test_handoff_runs_the_nodes_own_fetch_and_converge_and_picks_up_rotation(lab, capsys, tmp_path):
    site, secrets, node, ssh, server = lab
    env = node.root / "etc/terravixens/node.env"
    # Handoff before any push: the image has no agent — said in one line.
    code, out, _ = _cli(capsys, "spec", "handoff", "dns1", "--site", str(site), *ssh)
    assert code == 4 and "No module named terravixens.agent" in out
    assert _cli(capsys, "spec", "push", "dns1", "--site", str(site), "--secrets", str(secrets), *ssh)[0] == 0
    code, out, err = _cli(capsys, "spec", "handoff", "dns1", "--site", str(site), *ssh, "--json")
    assert code == 0, out + err
    assert json.loads(out)["changed"] == 0
    assert json.loads((node.root / "var/lib/terravixens/last-run.json").read_text())["ok"] is True
    # The token rotates: the secrets file and node.env (the hookscript's next write); the next run uses it.
    rotated = "dns1-rotated-" + "7" * 32
    spec_support.write_secrets(
        secrets, spec_support.secrets_data(node_tokens={**spec_support.NODE_TOKENS, "dns1": rotated})
    )
    server.hangup()
    server.wait_for(lambda r: r.get("event") == "reloaded")
    code, out, _ = _cli(capsys, "spec", "handoff", "dns1", "--site", str(site), *ssh)
    assert code == 4 and "refused (401)" in out  # the old token: the node's fetch is refused, nothing changed
    env.write_text(render_env(server.url, "dns1", rotated))
    code, out, err = _cli(capsys, "spec", "handoff", "dns1", "--site", str(site), *ssh)
    assert code == 0, out + err
    # A posture change (prod -> a posture allowing password logins) reaches the node on the next run.
    postures = site.parent / "specs" / "postures"
    postures.mkdir(exist_ok=True)
    (postures / "prod.yaml").write_text(
        "schema_version: 1\nauth: node_token\nssh: {password_authentication: true, permit_root_login: false}\n"
    )
    server.hangup()
    server.wait_for(lambda r: r.get("event") == "reloaded" and r is not None, timeout=10)
    code, out, err = _cli(capsys, "spec", "handoff", "dns1", "--site", str(site), *ssh)
    assert code == 0, out + err
    assert "dns1: ssh: rewrite /etc/ssh/sshd_config.d/50-terravixens.conf" in out
    assert "PasswordAuthentication yes" in (node.root / "etc/ssh/sshd_config.d/50-terravixens.conf").read_text()


def test_the_commands_are_in_the_cli_table():
    ran = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "spec", "push", "--help"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=60,
    )
    assert ran.returncode == 0 and "--known-hosts" in ran.stdout and "exit codes" in ran.stdout.lower()
