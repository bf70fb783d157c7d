"""Zero-touch first boot of a stock cloud image (issue 30 item 2, ADR 0059), from a throwaway root with the agent's
stand-in managers, against a real `terravixens spec serve` on loopback.

The vendor data the stacks render (render_cloud_config, held to the synthesized JSON and to `cloud-init schema` by
tests/test_cloud_init_schema.py) is unpacked into the root as cloud-init's write_files would, and its runcmd is run
with this machine's python3 in isolated mode (-I -S: the bootstrap has nothing but the standard library): it fetches
GET /agent.pyz with the node's credentials, checks the SHA-256 node.env pins, installs the bundle and runs `agent
run --first-boot`, which fetches the spec and converges. A bundle with another hash — a spec server of another
version, or bytes changed on the way (a loopback proxy flips one) — is refused in one line, nothing written or run.

What a real VM adds: cloud-init itself running write_files and runcmd as root once per instance, a real network
and DNS between the node and the server, real managers (apt, systemd) instead of the stand-ins.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from terravixens.agent import bundle
from terravixens.exitcodes import SpecGetExit
from terravixens.standalone import first_boot
from terravixens.standalone.node_env import AGENT_BUNDLE, FIRST_BOOT, FIRST_BOOT_SCRIPT, render_cloud_config
from tests import loopback, spec_support
from tests.agent_support import calls, node_root

ROOT = Path(__file__).resolve().parent.parent
FIRST_BOOT_RECORD = "var/lib/terravixens/first-boot.json"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("first-boot")
    site, secrets = spec_support.standalone_copy(folder)
    running = spec_support.start_server(site, secrets, folder / "serve.log")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def pinned() -> str:
    return bundle.built()[1]


def unpack(root: Path, cloud_config: str) -> list[str]:
    """cloud-init's write_files under the root (path, permissions, content); returns the runcmd's one command."""
    document = yaml.safe_load(cloud_config)
    for entry in document["write_files"]:
        path = root / entry["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(entry["content"])
        path.chmod(int(entry["permissions"], 8))
    [command] = document["runcmd"]
    return command


def boot(root: Path, tools: Path, command: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """The runcmd as cloud-init runs it, python3 being this machine's (isolated: standard library only)."""
    assert command == FIRST_BOOT and command[0] == "python3"
    return subprocess.run(
        [sys.executable, "-I", "-S", str(root / command[1].lstrip("/"))],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
        env={
            "PATH": "/usr/bin:/bin",
            "TERRAVIXENS_AGENT_ROOT": str(root),
            "TERRAVIXENS_AGENT_TOOLS": str(tools),
        },
    )


def node(tmp_path: Path, server, pinned: str, name: str = "jump1", token: str | None = spec_support.SITE_TOKEN):
    root, tools = node_root(tmp_path)
    command = unpack(root, render_cloud_config(server.url, name, token, pinned))
    return root, tools, command


def bundle_requests(server) -> list[dict]:
    return [record for record in server.log() if record.get("route") == "/agent.pyz"]


def test_a_stock_image_fetches_the_pinned_bundle_and_converges_once(tmp_path, server, pinned):
    root, tools, command = node(tmp_path, server, pinned)
    assert not (root / AGENT_BUNDLE.lstrip("/")).exists()  # nothing of terravixens on the stock image
    before = len(bundle_requests(server))
    ran = boot(root, tools, command)
    assert ran.returncode == 0, ran.stderr
    installed = root / AGENT_BUNDLE.lstrip("/")
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == pinned
    assert f"terravixens first boot: agent bundle {pinned[:12]}… (" in ran.stderr
    record = json.loads((root / FIRST_BOOT_RECORD).read_text())
    assert record["ok"] is True and record["identity"] == "jump1" and record["changed"] > 0
    assert (root / "etc/hostname").read_text() == "jump1\n"
    assert ["useradd", "--create-home", "--shell", "/bin/bash", "ops"] in calls(root)
    assert (root / "etc/systemd/system/terravixens-agent.timer").exists()
    [request] = bundle_requests(server)[before:]
    assert (request["status"], request["principal"]) == (200, "site")

    # cloud-init run again (`cloud-init clean`): the bundle is there with its hash, the agent's record says done.
    mutations = len(calls(root))
    again = boot(root, tools, command)
    assert again.returncode == 0, again.stderr
    assert "is the pinned bundle" in again.stderr and "first boot already converged" in again.stderr
    assert len(bundle_requests(server)) == before + 1  # not fetched again
    assert len(calls(root)) == mutations  # the agent did not even plan


def test_a_bundle_with_another_hash_is_refused_in_one_line(tmp_path, server, pinned):
    other = hashlib.sha256(b"another terravixens version").hexdigest()
    root, tools, command = node(tmp_path, server, other)
    ran = boot(root, tools, command)
    assert ran.returncode == SpecGetExit.UNVERIFIED == first_boot.UNVERIFIED
    assert ran.stderr == (
        f"terravixens first boot: refused the agent bundle from {server.url}: sha256 {pinned[:12]}… is not the "
        f"{other[:12]}… node.env pins (a spec server of another terravixens version, or a bundle changed on the "
        "way): nothing written, nothing run\n"
    )
    assert not (root / AGENT_BUNDLE.lstrip("/")).exists()
    assert not (root / FIRST_BOOT_RECORD).exists() and calls(root) == []


class Tamper(http.server.ThreadingHTTPServer):
    """A loopback proxy in front of the spec server that flips one byte of the bundle it passes on."""

    def __init__(self, upstream):
        self.upstream = upstream
        super().__init__(("127.0.0.1", 0), TamperHandler)


class TamperHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        upstream = self.server.upstream  # type: ignore[attr-defined]
        connection = http.client.HTTPConnection(upstream.host, upstream.port, timeout=30)
        headers = {"Authorization": self.headers["Authorization"]} if self.headers["Authorization"] else {}
        connection.request("GET", self.path, headers=headers)
        answer = connection.getresponse()
        body = bytearray(answer.read())
        connection.close()
        if body:
            body[len(body) // 2] ^= 0x01
        self.send_response(answer.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(bytes(body))

    def log_message(self, *args) -> None:
        pass


def test_a_bundle_changed_on_the_way_is_refused(tmp_path, server, pinned):
    proxy = Tamper(server)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        root, tools = node_root(tmp_path)
        command = unpack(root, render_cloud_config(url, "jump1", spec_support.SITE_TOKEN, pinned))
        ran = boot(root, tools, command)
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=10)
    assert ran.returncode == SpecGetExit.UNVERIFIED, ran.stderr
    assert ran.stderr.count("\n") == 1 and f"refused the agent bundle from {url}: sha256 " in ran.stderr
    assert f"is not the {pinned[:12]}… node.env pins" in ran.stderr
    assert not (root / AGENT_BUNDLE.lstrip("/")).exists() and calls(root) == []


def test_credentials_the_server_refuses_stop_first_boot(tmp_path, server, pinned):
    root, tools, command = node(tmp_path, server, pinned, token=spec_support.WRONG_TOKEN)
    ran = boot(root, tools, command)
    assert ran.returncode == SpecGetExit.REFUSED == first_boot.REFUSED
    assert ran.stderr == (f"terravixens first boot: {server.url} refused this node's credentials (401): nothing run\n")
    assert not (root / AGENT_BUNDLE.lstrip("/")).exists()


def test_a_node_env_without_a_pin_is_refused(tmp_path, server, pinned):
    root, tools, command = node(tmp_path, server, pinned)
    env = root / "etc/terravixens/node.env"
    env.write_text("".join(line + "\n" for line in env.read_text().splitlines() if "AGENT_SHA256" not in line))
    ran = boot(root, tools, command)
    assert ran.returncode == SpecGetExit.USAGE
    assert "pins no agent bundle (TERRAVIXENS_AGENT_SHA256)" in ran.stderr and ran.stderr.count("\n") == 1


def test_an_unreachable_server_is_retried_within_the_budget_then_given_up(tmp_path, pinned, monkeypatch):
    """In process, with the budget cut to a second: a port nobody listens on is retried, then exit 3."""
    root, _ = node_root(tmp_path)
    port = loopback.free_port("127.0.0.1")
    unpack(root, render_cloud_config(f"http://127.0.0.1:{port}", "jump1", spec_support.SITE_TOKEN, pinned))
    monkeypatch.setattr(first_boot, "ROOT", str(root))
    monkeypatch.setattr(first_boot, "BUDGET", 1.0)
    assert first_boot.main() == SpecGetExit.UNREACHABLE == first_boot.UNREACHABLE


def test_the_bootstrap_codes_are_spec_gets():
    """The bootstrap cannot import the table (it runs before terravixens is on the node): its numbers are pinned
    here."""
    names = ("USAGE", "UNREACHABLE", "REFUSED", "UNKNOWN", "UNVERIFIED", "UNWRITABLE")
    assert {name: getattr(first_boot, name) for name in names} == {name: int(SpecGetExit[name]) for name in names}


def test_the_bootstrap_path_is_the_vendor_datas():
    assert FIRST_BOOT_SCRIPT == "/usr/local/lib/terravixens/first-boot.py"
    assert "/" + first_boot.BUNDLE == AGENT_BUNDLE and "/" + first_boot.NODE_ENV == "/etc/terravixens/node.env"


# ------------------------------------------------------------------------ GET /agent.pyz: who may fetch it


@pytest.mark.parametrize(
    ("token", "status"),
    [
        (spec_support.SITE_TOKEN, 200),
        (spec_support.NODE_TOKENS["dns1"], 200),
        (None, 200),  # the example site serves `tools` under the open dev posture
        (spec_support.WRONG_TOKEN, 401),
    ],
)
def test_the_bundle_opens_to_the_credentials_that_open_a_spec(server, pinned, token, status):
    reply = spec_support.get(server, "/agent.pyz", token)
    assert reply.status == status
    if status == 200:
        assert hashlib.sha256(reply.body).hexdigest() == pinned == reply.headers["x-terravixens-agent-sha256"]
        assert reply.headers["content-type"] == "application/zip"


def test_without_an_open_identity_an_anonymous_caller_gets_no_bundle(tmp_path):
    site, secrets = spec_support.standalone_copy(tmp_path)
    tools = tmp_path / "specs" / "tools.yaml"
    tools.write_text(tools.read_text().replace("posture: dev", "posture: stage"))
    running = spec_support.start_server(site, secrets, tmp_path / "serve.log")
    try:
        assert spec_support.get(running, "/agent.pyz").status == 401
        assert spec_support.get(running, "/agent.pyz", spec_support.SITE_TOKEN).status == 200
    finally:
        running.stop()


def test_the_server_logs_the_hash_it_serves(server, pinned):
    listening = next(record for record in server.log() if record.get("event") == "listening")
    assert listening["agent_sha256"] == pinned
