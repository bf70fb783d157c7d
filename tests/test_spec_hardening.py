"""The spec client and server against hostile peers and operator slips (issue 19, item 5), all on loopback:

- client: a wall-clock deadline per attempt (a server dripping one byte at a time cannot hold it), options and node.env
  values checked before anything runs (exit 2, one line, no traceback), one plain-http rule shared with the site, a
  private CA carried from the site into node.env and trusted by the client;
- server: every spec names its posture, a reload waits for files to hold still, a lowered posture is a warning, the
  TLS key must be private, connections are bounded per client, and a failed reload fails closed on tokens.

A real deployment adds what loopback cannot show: a slow WAN, NAT (many nodes behind one client address: raise
--max-connections-per-client), and an operator's editor writing files in its own way.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from terravixens import cli
from terravixens.config.standalone import SpecServer
from terravixens.inputs import InputError
from terravixens.specclient import envfile
from terravixens.specclient.fetch import Transient, request_once
from terravixens.specserver.auth import Tokens
from terravixens.specserver.server import Reloader
from terravixens.specserver.specset import Entry, SpecSet
from terravixens.standalone.node_env import render_env, site_lines
from tests import spec_support as s
from tests import support
from tests.spec_support import NODE_TOKENS, SITE_TOKEN, write_env

HOST = "127.0.0.9"


# ------------------------------------------------------------------------------------------------ a dripping server
@pytest.fixture
def dripping():
    """A server that answers a status line, then one byte every 0.2 s, forever (it never finishes its headers)."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    def drip(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(4096)
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
                    if stop.is_set():
                        return
                    conn.sendall(bytes([byte]))
                    time.sleep(0.2)
            except OSError:
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://{HOST}:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    listener.close()


def test_an_attempt_ends_at_its_wall_clock_deadline_whatever_the_server_sends(dripping):
    started = time.monotonic()
    with pytest.raises(Transient, match=r"no whole answer within 1 s"):
        request_once(dripping, "tools", None, None, timeout=1.0)
    assert time.monotonic() - started < 2.0  # each byte came within the socket timeout: only the deadline ended it


def test_spec_get_gives_up_within_max_time_against_a_dripping_server(dripping, tmp_path, capsys):
    env = write_env(tmp_path / "node.env", dripping, "tools")
    started = time.monotonic()
    out = str(tmp_path / "spec.json")
    code = cli.main(["spec", "get", "--env-file", str(env), "--out", out, "--max-time", "2", "--attempt-timeout", "1"])
    elapsed = time.monotonic() - started
    assert code == 3 and elapsed < 3.5, (code, elapsed)
    assert "no whole answer within 1 s" in capsys.readouterr().err
    assert not (tmp_path / "spec.json").exists()


# ------------------------------------------------------------------------------------------------ options, node.env
@pytest.mark.parametrize("option", ["--max-time", "--attempt-timeout"])
@pytest.mark.parametrize("value", ["nan", "-1", "inf", "0", "1e9", "soon"])
def test_time_options_outside_their_range_are_usage_errors(option, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["spec", "get", "--env-file", str(tmp_path / "node.env"), option, value])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "is not a number of seconds" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("terravixens spec get: error: argument")


@pytest.mark.parametrize("value", ["-1", "nan", "0"])
def test_serve_options_are_checked_too(value, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["spec", "serve", "--header-timeout", value])
    assert exit.value.code == 2 and "is not a number of seconds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["spec", "serve", "--max-connections-per-client", "0"])


@pytest.mark.parametrize("server", ["http://127.0.0.9:99999", "http://127.0.0.9:port", "http://127.0.0.9:0"])
def test_a_bad_port_in_node_env_is_a_located_problem(server, tmp_path, capsys):
    env = write_env(tmp_path / "node.env", server, "tools")
    code = cli.main(["spec", "get", "--env-file", str(env), "--out", str(tmp_path / "spec.json")])
    err = capsys.readouterr().err
    assert code == 2 and "line 2, TERRAVIXENS_SPEC_SERVER" in err and "PORT 1-65535" in err
    assert "Traceback" not in err


# ------------------------------------------------------------------------------------------------ one http rule
URLS = [
    "https://specs.lab.internal:8443",
    "http://specs.lab.internal:8080",
    "http://127.0.0.9:8080",
    "http://localhost:8080",
]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("reason", [None, "an isolated provisioning VLAN"])
def test_every_node_env_the_site_accepts_is_accepted_by_the_client(url, reason, tmp_path):
    """One rule in both places: whatever spec_server the site accepts, the node.env the stacks render from it (with a
    token, the strictest case) is one the client reads."""
    try:
        server = SpecServer(url=url, allow_insecure_http=reason)
    except ValidationError as error:
        if reason is not None and url.startswith("http://"):
            pytest.fail(f"the site refused {url} though it says why")
        # Refused: remote http without a reason, or a reason next to an https URL (it would permit nothing).
        assert (url.startswith("http://specs.") and reason is None) or (url.startswith("https") and reason)
        assert "allow_insecure_http" in str(error)
        return
    text = render_env(
        server.url, "dns1", NODE_TOKENS["dns1"], site_lines(bool(server.allow_insecure_http), server.ca_data)
    )
    env = envfile.parse(text, tmp_path / "node.env")
    assert env.server == server.url and env.token == NODE_TOKENS["dns1"]


def test_the_client_refuses_remote_http_with_a_token_unless_the_site_allowed_it(tmp_path):
    plain = render_env("http://specs.lab.internal:8080", "dns1", NODE_TOKENS["dns1"])
    with pytest.raises(InputError, match="is plain http"):
        envfile.parse(plain, tmp_path / "node.env")
    with pytest.raises(InputError, match="TERRAVIXENS_ALLOW_INSECURE_HTTP: 'sure' is not 'yes'"):
        envfile.parse(plain + "TERRAVIXENS_ALLOW_INSECURE_HTTP=sure\n", tmp_path / "node.env")


# ------------------------------------------------------------------------------------------------ a private CA
def ca_data(tls: dict[str, Path]) -> str:
    return base64.b64encode(tls["ca"].read_bytes()).decode()


def test_a_private_ca_from_the_site_reaches_node_env_and_is_trusted(tmp_path, capsys):
    site, secrets = s.standalone_copy(tmp_path)
    tls = s.make_tls(tmp_path, host=HOST)
    server = s.start_server(
        site,
        secrets,
        tmp_path / "serve.log",
        host=HOST,
        scheme="https",
        extra=["--watch-interval", "0", "--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"])],
    )
    try:
        spec_server = SpecServer(url=server.url, ca_data=ca_data(tls))
        env = tmp_path / "node.env"
        env.write_text(render_env(server.url, "dns1", NODE_TOKENS["dns1"], site_lines(False, spec_server.ca_data)))
        env.chmod(0o600)
        code = cli.main(["spec", "get", "--env-file", str(env), "--out", str(tmp_path / "spec.json")])
        assert code == 0, capsys.readouterr().err
        # Another CA in node.env: the server's certificate is not trusted (the system store is not consulted).
        (tmp_path / "other").mkdir()
        other = s.make_tls(tmp_path / "other", host=HOST)
        env.write_text(render_env(server.url, "dns1", NODE_TOKENS["dns1"], site_lines(False, ca_data(other))))
        assert cli.main(["spec", "get", "--env-file", str(env), "--out", str(tmp_path / "spec.json")]) == 6
        assert "certificate is not trusted" in capsys.readouterr().err
    finally:
        server.stop()


def test_ca_data_is_checked_in_the_site(tmp_path):
    tls = s.make_tls(tmp_path, host=HOST)
    key = base64.b64encode(tls["key"].read_bytes()).decode()
    with pytest.raises(ValidationError) as caught:
        SpecServer(url="https://specs.lab.internal:8443", ca_data=key)
    assert "holds a PRIVATE KEY" in str(caught.value) and key[:40] not in str(caught.value)
    with pytest.raises(ValidationError, match="is not base64"):
        SpecServer(url="https://specs.lab.internal:8443", ca_data="-----BEGIN CERTIFICATE-----")
    with pytest.raises(ValidationError, match="not a PEM bundle of CERTIFICATE blocks"):
        SpecServer(url="https://specs.lab.internal:8443", ca_data=base64.b64encode(b"hello").decode())
    with pytest.raises(ValidationError, match="url is plain http"):
        SpecServer(url="http://127.0.0.9:8080", ca_data=ca_data(tls))


def test_the_standalone_stacks_write_the_ca_into_every_node_env(tmp_path):
    tls = s.make_tls(tmp_path, host=HOST)
    data = yaml.safe_load(s.SITE.read_text())
    data["standalone"]["spec_server"]["ca_data"] = ca_data(tls)
    stacks = support.synth(support.site_from(data), tmp_path / "out")
    snippets = [
        resource["source_raw"]["data"]
        for name, stack in stacks.items()
        if name.startswith("standalone")
        for resource in stack.get("resource", {}).get("proxmox_virtual_environment_file", {}).values()
    ]
    assert snippets and all(f"TERRAVIXENS_CA_DATA={ca_data(tls)}" in data for data in snippets)


# ------------------------------------------------------------------------------------------------ the server
def test_a_spec_without_a_posture_is_refused(tmp_path, capsys):
    spec = tmp_path / "bare.yaml"
    spec.write_text("schema_version: 1\naccess:\n  users: {}\n")
    assert cli.main(["spec", "validate", str(spec)]) == 2
    assert "line 2, access.posture: is required" in capsys.readouterr().err


class _Sources:
    """Sources whose fingerprint follows a script: the watcher's view of files being written."""

    def __init__(self, marks: list[str]):
        self.marks, self.polls = marks, 0

    def fingerprint(self, specs_dir: Path | None) -> str:
        mark = self.marks[min(self.polls, len(self.marks) - 1)]
        self.polls += 1
        return mark


def test_a_file_change_is_reloaded_only_once_it_holds_still():
    class Log:
        def event(self, *args, **fields) -> None:
            pass

    # The first poll is the Reloader's own; then: changing, changing again, still, still, changed, still.
    sources = _Sources(["a", "b", "c", "c", "c", "d", "d"])
    reloader = Reloader(sources, Log(), SpecSet({}, Tokens(None, {}), 1), Path("."))  # type: ignore[arg-type]
    reloads: list[int] = []

    async def reload(reason: str) -> None:
        reloads.append(sources.polls)
        reloader.seen = sources.marks[min(sources.polls - 1, len(sources.marks) - 1)]

    reloader.reload = reload  # type: ignore[method-assign]

    async def run() -> None:
        task = asyncio.ensure_future(reloader.watch(0.001))
        for _ in range(10_000):
            if sources.polls >= len(sources.marks) + 2:
                break
            await asyncio.sleep(0.001)
        task.cancel()

    asyncio.run(run())
    assert reloads == [4, 7]  # after "c" held for one poll, and after "d" did: never on "b" (half written)


def test_lowering_an_identity_s_protection_is_a_warning():
    old = SpecSet({"dns1": Entry("node_token", b"{}"), "tools": Entry("network", b"{}")}, Tokens(None, {}), 1)
    new = SpecSet({"dns1": Entry("network", b"{}"), "tools": Entry("site_token", b"{}")}, Tokens(None, {}), 2)
    assert old.lowered(new) == [{"identity": "dns1", "from": "node_token", "to": "network"}]


@pytest.fixture
def served(tmp_path):
    site, secrets = s.standalone_copy(tmp_path)
    server = s.start_server(site, secrets, tmp_path / "serve.log", host=HOST, extra=["--watch-interval", "0"])
    yield site, secrets, server
    server.stop()


def test_a_posture_lowered_by_a_reload_is_logged_as_a_warning(served):
    site, _, server = served
    spec = site.parent / "specs" / "dns.yaml"
    spec.write_text(spec.read_text().replace("posture: prod", "posture: dev"))
    server.hangup()
    record = server.wait_for(lambda r: r.get("event") == "posture_lowered")
    assert record["identity"] == "dns1" and record["to"] == "network" and record["level"] == "warning"
    assert "WARNING dns1 is now served under network" in server.log_text()
    assert s.get(server, "/spec/dns1").status == 200  # the operator's change took effect, loudly


def test_a_deleted_token_stops_opening_its_spec_though_the_reload_fails(served):
    _, secrets, server = served
    assert s.get(server, "/spec/dns1", NODE_TOKENS["dns1"]).status == 200
    tokens = dict(NODE_TOKENS)
    del tokens["dns1"]
    s.write_secrets(secrets, s.secrets_data(node_tokens=tokens))
    server.hangup()
    server.wait_for(lambda r: r.get("event") == "reload_failed" and r.get("revoked_tokens") == 1)
    assert s.get(server, "/spec/dns1", NODE_TOKENS["dns1"]).status == 401  # revoked, not served from the old set
    assert s.get(server, "/spec/jump1", SITE_TOKEN).status == 200  # an untouched token still works
    health = s.get(server, "/healthz")
    assert health.status == 503 and health.json()["status"] == "stale"


def test_a_deleted_secrets_file_revokes_every_token(served):
    _, secrets, server = served
    secrets.unlink()
    server.hangup()
    server.wait_for(lambda r: r.get("event") == "reload_failed")
    assert s.get(server, "/spec/jump1", SITE_TOKEN).status == 401
    assert s.get(server, "/spec/nest1", NODE_TOKENS["nest1"]).status == 401
    assert s.get(server, "/spec/tools").status == 200  # a network-posture spec needs no token
    assert s.get(server, "/healthz").status == 503
    s.write_secrets(secrets)
    server.hangup()
    server.wait_for(lambda r: r.get("event") == "reloaded")
    assert s.get(server, "/spec/jump1", SITE_TOKEN).status == 200 and s.healthy(server)


def test_a_tls_key_others_can_read_is_refused(tmp_path, capsys):
    site, secrets = s.standalone_copy(tmp_path)
    tls = s.make_tls(tmp_path, host=HOST)
    tls["key"].chmod(0o644)
    files = [
        "--site",
        str(site),
        "--secrets",
        str(secrets),
        "--tls-cert",
        str(tls["cert"]),
        "--tls-key",
        str(tls["key"]),
    ]
    code = cli.main(["spec", "serve", *files, "--host", HOST, "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "mode 0644" in err and f"chmod 600 {tls['key']}" in err and "private key" in err


def test_one_client_cannot_hold_every_connection(tmp_path):
    site, secrets = s.standalone_copy(tmp_path)
    server = s.start_server(
        site,
        secrets,
        tmp_path / "serve.log",
        host=HOST,
        extra=["--watch-interval", "0", "--max-connections-per-client", "3"],
    )
    held: list[socket.socket] = []
    try:
        for _ in range(3):  # half-open: connected, nothing sent
            sock = socket.socket()
            sock.bind(("127.0.0.21", 0))
            sock.connect((server.host, server.port))
            held.append(sock)
        extra = socket.socket()
        extra.bind(("127.0.0.21", 0))
        extra.connect((server.host, server.port))
        held.append(extra)
        assert s.read_reply(extra).status == 503
        server.wait_for(lambda r: r.get("event") == "too_many_connections" and r.get("client") == "127.0.0.21")
        # Another client is served while the first holds its share.
        other = socket.socket()
        other.bind(("127.0.0.22", 0))
        other.connect((server.host, server.port))
        other.sendall(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        assert s.read_reply(other).status == 200
        other.close()
        # Closing one frees its place.
        held.pop(0).close()
        time.sleep(0.2)
        again = socket.socket()
        again.bind(("127.0.0.21", 0))
        again.connect((server.host, server.port))
        again.sendall(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        assert s.read_reply(again).status == 200
        again.close()
    finally:
        for sock in held:
            sock.close()
        server.stop()
