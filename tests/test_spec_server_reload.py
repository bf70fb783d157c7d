"""The spec server's lifecycle: reload on SIGHUP and on file change, keeping the old set when the new one is broken,
token rotation, TLS, and refusing to start on bad input. Each test runs its own `spec serve` on loopback."""

from __future__ import annotations

import signal
import ssl
import time
import urllib.request
from types import SimpleNamespace

import pytest
import yaml

from terravixens import cli
from terravixens.exitcodes import ExitCode
from tests import spec_support as s
from tests.spec_support import ALL_TOKENS, NODE_TOKENS, SITE_TOKEN

NEW_DNS1_TOKEN = "dns1-rotated-7e6d5c4b3a2910f8e7d6c5b4a3928170"


@pytest.fixture
def lab(tmp_path):
    site, secrets = s.standalone_copy(tmp_path)
    servers = []

    def start(*extra: str, **options):
        server = s.start_server(
            site, secrets, tmp_path / f"serve{len(servers)}.log", host="127.0.0.8", extra=list(extra), **options
        )
        servers.append(server)
        return server

    yield tmp_path, site, secrets, start
    for server in servers:
        server.stop()


def _edit_spec(folder, name, change):
    path = folder / "specs" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def _packages(server, identity="tools"):
    return s.get(server, f"/spec/{identity}").json()["platform"]["packages"]


def test_sighup_reloads_the_specs(lab):
    folder, _, _, start = lab
    server = start("--watch-interval", "0")
    assert _packages(server) == ["git", "curl", "jq"]
    _edit_spec(folder, "tools", lambda d: d["platform"]["packages"].append("tmux"))
    time.sleep(0.3)
    assert _packages(server) == ["git", "curl", "jq"]  # no watcher: nothing changes until the signal
    server.hangup()
    server.wait_for(lambda r: r["event"] == "reloaded" and r["reason"] == "sighup" and r["generation"] == 2)
    assert _packages(server) == ["git", "curl", "jq", "tmux"]
    assert s.get(server, "/healthz").json()["generation"] == 2


def test_a_file_change_reloads_the_specs(lab):
    folder, _, _, start = lab
    server = start("--watch-interval", "0.2")
    _edit_spec(folder, "tools", lambda d: d["platform"]["packages"].append("htop"))
    server.wait_for(lambda r: r["event"] == "reloaded" and r["reason"] == "file_change")
    assert _packages(server)[-1] == "htop"


def test_a_broken_edit_keeps_the_served_set_and_says_why(lab):
    folder, _, _, start = lab
    server = start("--watch-interval", "0.2")
    _edit_spec(folder, "tools", lambda d: d["platform"].update(pakages=["oops"]))
    failed = server.wait_for(lambda r: r["event"] == "reload_failed")
    assert failed["reason"] == "file_change" and failed["kept_generation"] == 1
    assert any(
        "platform.pakages: unknown key" in line and "tools.yaml" in "".join(failed["problems"])
        for line in failed["problems"]
    )
    assert _packages(server) == ["git", "curl", "jq"]
    assert s.get(server, "/healthz").json()["generation"] == 1
    _edit_spec(folder, "tools", lambda d: d["platform"].pop("pakages"))  # fixed: the next change loads
    server.wait_for(lambda r: r["event"] == "reloaded")
    assert s.get(server, "/healthz").json()["generation"] == 2


def test_a_broken_reference_after_reload_is_refused_too(lab):
    _, site, _, start = lab
    server = start("--watch-interval", "0")
    site.write_text(site.read_text().replace("spec: tools", "spec: toolz"))
    server.hangup()
    failed = server.wait_for(lambda r: r["event"] == "reload_failed")
    assert any("standalone.nodes.tools.spec: unknown spec 'toolz'" in line for line in failed["problems"])
    assert s.get(server, "/spec/tools").status == 200


def test_token_rotation_by_reload(lab):
    _, _, secrets, start = lab
    server = start("--watch-interval", "0")
    assert s.get(server, "/spec/dns1", NODE_TOKENS["dns1"]).status == 200
    s.write_secrets(secrets, s.secrets_data(node_tokens={**NODE_TOKENS, "dns1": NEW_DNS1_TOKEN}))
    server.hangup()
    server.wait_for(lambda r: r["event"] == "reloaded")
    assert s.get(server, "/spec/dns1", NODE_TOKENS["dns1"]).status == 401
    assert s.get(server, "/spec/dns1", NEW_DNS1_TOKEN).status == 200


def test_a_broken_secrets_file_on_reload_never_logs_a_token(lab):
    _, _, secrets, start = lab
    server = start("--watch-interval", "0")
    broken = s.secrets_data(site_token="short", node_tokens={**NODE_TOKENS, "dns1": NODE_TOKENS["dns1"] + " x"})
    s.write_secrets(secrets, broken)
    server.hangup()
    failed = server.wait_for(lambda r: r["event"] == "reload_failed")
    assert [line.split(":")[0].strip(" -") for line in failed["problems"][1:]] == [
        "line 7, site_token",
        "line 10, node_tokens.dns1",
    ]
    assert "is not a usable token" in failed["problems"][1]
    assert "short" not in server.log_text()
    assert not any(token in server.log_text() for token in ALL_TOKENS)
    # Fail closed (ADR 0046): a secrets file that cannot be read keeps no token; the specs themselves stay served.
    assert s.get(server, "/spec/jump1", SITE_TOKEN).status == 401
    assert s.get(server, "/spec/tools").status == 200 and s.get(server, "/healthz").status == 503


def test_a_secrets_file_others_can_read_is_refused_on_reload(lab):
    _, _, secrets, start = lab
    server = start("--watch-interval", "0")
    secrets.chmod(0o644)
    server.hangup()
    failed = server.wait_for(lambda r: r["event"] == "reload_failed")
    assert "is accessible by group or others (mode 0644)" in failed["problems"][1]
    assert f"chmod 600 {secrets}" in failed["problems"][1]


def test_a_node_added_with_its_spec_is_served_after_reload(lab):
    _folder, site, _secrets, start = lab
    server = start("--watch-interval", "0")
    assert s.get(server, "/spec/ntp1", s.SITE_TOKEN).status == 404
    data = yaml.safe_load(site.read_text())
    data["standalone"]["nodes"]["ntp1"] = {
        "type": "vm",
        "parent": "pve1",
        "spec": "tools",
        "image": "local:import/debian-12-genericcloud-amd64.qcow2",
        "vm_id": 3003,
        "bridge": "vmbr1",
        "networks": {"vlans": {111: {"address": "10.11.1.63/24"}}},
    }
    site.write_text(yaml.safe_dump(data))
    server.hangup()
    server.wait_for(lambda r: r["event"] == "reloaded")
    assert s.get(server, "/spec/ntp1").json()["network"]["ip"] == "10.11.1.63/24"


# ---------------------------------------------------------------------------------------------------- start-up
@pytest.fixture
def _serve(capsys):
    """`terravixens spec serve` through main(), in this process: each case here stops before listening."""

    def run(*args: str) -> SimpleNamespace:
        code = cli.main(["spec", "serve", *args])
        captured = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=captured.out, stderr=captured.err)

    return run


def test_serve_refuses_to_start_on_a_missing_token(tmp_path, _serve):
    site, secrets = s.standalone_copy(tmp_path)
    s.write_secrets(secrets, s.secrets_data(node_tokens={"nest1": NODE_TOKENS["nest1"]}))
    result = _serve("--site", str(site), "--secrets", str(secrets), "--host", "127.0.0.8", "--port", "0")
    assert result.returncode == 2
    assert "node_tokens.dns1: is required: node 'dns1' uses a node_token posture" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_needs_a_secrets_file(tmp_path, monkeypatch, _serve):
    monkeypatch.delenv("TERRAVIXENS_SECRETS", raising=False)
    site, _ = s.standalone_copy(tmp_path)
    result = _serve("--site", str(site), "--port", "0")
    assert result.returncode == 2 and "give the secrets file" in result.stderr


def test_serve_refuses_a_port_in_use(tmp_path, _serve):
    site, secrets = s.standalone_copy(tmp_path)
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.8", 0))
        taken.listen()
        result = _serve(
            "--site", str(site), "--secrets", str(secrets), "--host", "127.0.0.8", "--port", str(taken.getsockname()[1])
        )
    assert result.returncode == 2 and "cannot listen on 127.0.0.8" in result.stderr


# ---------------------------------------------------------------------------------------------------- TLS
def test_tls_serves_https_with_the_given_certificate(lab):
    folder, _, _, start = lab
    tls = s.make_tls(folder)
    server = start("--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"]), scheme="https")
    assert next(event for event in server.log() if event["event"] == "listening")["tls"] is True
    context = ssl.create_default_context(cafile=str(tls["ca"]))
    request = urllib.request.Request(
        f"{server.url}/spec/dns1", headers={"Authorization": f"Bearer {NODE_TOKENS['dns1']}"}
    )
    with urllib.request.urlopen(request, context=context, timeout=5) as response:
        assert response.status == 200 and b'"name":"dns1"' in response.read()
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"{server.url}/healthz", context=ssl.create_default_context(), timeout=5)
    with pytest.raises(ConnectionError):  # plain http on the TLS port: the handshake fails, the server goes on
        s.raw(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    with urllib.request.urlopen(f"{server.url}/healthz", context=context, timeout=5) as response:
        assert response.status == 200


def test_tls_needs_both_files_and_a_matching_pair(tmp_path, _serve):
    site, secrets = s.standalone_copy(tmp_path)
    tls = s.make_tls(tmp_path)
    result = _serve("--site", str(site), "--secrets", str(secrets), "--tls-cert", str(tls["cert"]))
    assert result.returncode == 2 and "give both --tls-cert and --tls-key" in result.stderr
    result = _serve(
        "--site", str(site), "--secrets", str(secrets), "--tls-cert", str(tls["ca"]), "--tls-key", str(tls["key"])
    )
    assert result.returncode == 2 and "cannot use the TLS certificate/key" in result.stderr


def test_ctrl_c_is_130_even_when_sigint_was_inherited_ignored(tmp_path):
    """A job a script starts with `&` inherits SIGINT ignored; uvicorn catches it anyway and stops gracefully, then
    raises it again for the ignoring handler, which ended the process with 0. A SIGINT that stopped the server is
    Ctrl-C: 130 and its one line, whatever the parent did."""
    site, secrets = s.standalone_copy(tmp_path)
    for ignored in (False, True):
        server = s.start_server(site, secrets, tmp_path / f"serve-{ignored}.log", sigint_ignored=ignored)
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=30) == ExitCode.INTERRUPTED, (ignored, server.log_text())
        lines = server.log_text().splitlines()
        assert "Traceback" not in server.log_text() and lines[-1].startswith("terravixens spec serve: interrupted")
