"""The spec server, for real: `terravixens spec serve` in a subprocess on a loopback address, spoken to over raw
sockets (no client-side path normalization). The auth matrix, identity tricks, limits, slow clients, logs."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from tests import spec_support as s
from tests.spec_support import ALICE, ALL_TOKENS, BOB, NODE_TOKENS, SITE_TOKEN, WRONG_TOKEN

HEADER_TIMEOUT = 1.5


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("specserve")
    site, secrets = s.standalone_copy(folder)
    server = s.start_server(
        site,
        secrets,
        folder / "serve.log",
        host="127.0.0.7",
        extra=["--watch-interval", "0", "--header-timeout", str(HEADER_TIMEOUT)],
    )
    yield server
    server.stop()


# ---------------------------------------------------------------------------------------------------- auth matrix
# Written out, not computed: posture of each identity (sites/specs): tools dev (network), jump1 stage (site_token),
# dns1 and nest1 prod (node_token); ghost is unknown. jump1 has a node token too: its posture still asks for the site's.
CREDENTIALS = {
    "none": None,
    "site": SITE_TOKEN,
    "dns1": NODE_TOKENS["dns1"],
    "nest1": NODE_TOKENS["nest1"],
    "jump1": NODE_TOKENS["jump1"],
    "wrong": WRONG_TOKEN,
}
EXPECTED = {
    #           none  site  dns1  nest1 jump1 wrong
    "tools": (200, 200, 200, 200, 200, 401),
    "jump1": (401, 200, 403, 403, 403, 401),
    "dns1": (401, 403, 200, 403, 403, 401),
    "nest1": (401, 403, 403, 200, 403, 401),
    "ghost": (401, 404, 403, 403, 403, 401),
}
MATRIX = [
    (identity, credential, statuses[index])
    for identity, statuses in EXPECTED.items()
    for index, credential in enumerate(CREDENTIALS)
]


@pytest.mark.parametrize("identity,credential,status", MATRIX, ids=[f"{i}-{c}-{st}" for i, c, st in MATRIX])
def test_auth_matrix(server, identity, credential, status):
    reply = s.get(server, f"/spec/{identity}", CREDENTIALS[credential])
    assert reply.status == status, reply.body
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["cache-control"] == "no-store"
    if status == 200:
        document = reply.json()
        assert document["schema_version"] == 1 and document["identity"]["name"] == identity
    else:
        assert set(reply.json()) == {"error"}
    if status == 401:
        assert reply.headers["www-authenticate"].startswith('Bearer realm="terravixens"')
        assert ('error="invalid_token"' in reply.headers["www-authenticate"]) == (credential == "wrong")


@pytest.mark.parametrize(
    "authorization",
    [
        f"Basic {SITE_TOKEN}",
        "Bearer",
        "Bearer ",
        f"Bearer  {SITE_TOKEN}",
        f"Bearer {SITE_TOKEN} extra",
        SITE_TOKEN,
        f"Bearer {SITE_TOKEN[:-1]}",
        f"Bearer {SITE_TOKEN}x",
    ],
    ids=["basic", "no-token", "empty", "two-spaces", "extra", "no-scheme", "truncated", "longer"],
)
def test_malformed_or_near_miss_credentials_are_401(server, authorization):
    assert s.get(server, "/spec/jump1", headers={"Authorization": authorization}).status == 401
    assert s.get(server, "/spec/tools", headers={"Authorization": authorization}).status == 401


def test_two_authorization_headers_are_401(server):
    request = (
        f"GET /spec/jump1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SITE_TOKEN}\r\n"
        f"Authorization: Bearer {SITE_TOKEN}\r\nConnection: close\r\n\r\n"
    ).encode()
    assert s.raw(server, request).status == 401


def test_bearer_scheme_is_case_insensitive(server):
    assert s.get(server, "/spec/jump1", headers={"Authorization": f"bearer {SITE_TOKEN}"}).status == 200


def test_the_spec_is_resolved_and_holds_only_its_own_keys(server):
    document = s.get(server, "/spec/dns1", NODE_TOKENS["dns1"]).json()
    assert document["identity"] == {
        "name": "dns1",
        "hostname": "dns1",
        "domain": "lab.internal",
        "fqdn": "dns1.lab.internal",
    }
    assert document["node"] == {"type": "ct", "parent": "nest1", "tier": 2}
    assert document["network"] == {
        "ip": "10.11.1.53/24",
        "gateway": "10.11.1.1",
        "dns": ["127.0.0.1"],
        "search": ["lab.internal"],
        # What the agent applies (docs/standalone.md): one interface from ip and gateway, no extra route.
        "interfaces": [{"address": "10.11.1.53/24", "gateway": "10.11.1.1"}],
        "routes": [],
    }
    assert document["access"]["posture"] == "prod" and document["access"]["auth"] == "node_token"
    assert document["access"]["users"] == {
        "ops": {"sudo": True, "shell": "/bin/bash", "groups": [], "ssh_authorized_keys": [ALICE]}
    }
    assert document["config"] == {"ct": {"regenerate_host_keys": True}}
    text = json.dumps(document)
    assert BOB not in text
    assert not any(token in text for token in ALL_TOKENS)


def test_every_served_spec_is_free_of_tokens(server):
    for identity in ("tools", "jump1", "dns1", "nest1"):
        reply = s.get(
            server, f"/spec/{identity}", SITE_TOKEN if identity in ("tools", "jump1") else NODE_TOKENS[identity]
        )
        assert reply.status == 200
        assert not any(token.encode() in reply.body for token in ALL_TOKENS)


def test_healthz_lists_no_identity(server):
    reply = s.get(server, "/healthz")
    assert reply.status == 200 and reply.json() == {"status": "ok", "generation": 1, "specs": 4}


def test_head_is_answered_without_a_body(server):
    reply = s.raw(server, b"HEAD /spec/tools HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert reply.status == 200 and reply.body == b""


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_other_methods_are_405(server, method):
    reply = s.raw(server, f"{method} /spec/tools HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    assert reply.status == 405 and reply.headers["allow"] == "GET, HEAD"


# ---------------------------------------------------------------------------------------------------- identities
@pytest.mark.parametrize(
    "path,status",
    [
        ("/spec/..", 400),
        ("/spec/.", 400),
        ("/spec/%2e%2e", 400),
        ("/spec/%2E%2E/%2E%2E/etc/passwd", 400),
        ("/spec/%2fetc%2fpasswd", 400),
        ("/spec/..%2f..%2fetc%2fpasswd", 400),
        ("/spec/%64ns1", 400),  # decodes to a known identity: still refused (no encoding needed)
        ("/spec/dns1%00", 400),
        ("/spec/dns1%0d%0aX-Injected:%20yes", 400),
        ("/spec/dns%C4%B11", 400),  # 'dnsı1': a dotless i, percent-encoded UTF-8  # noqa: RUF003
        ("/spec/DNS1", 400),
        ("/spec/-dns1", 400),
        ("/spec/dns1-", 400),
        ("/spec/dns_1", 400),
        ("/spec/" + "a" * 64, 400),
        ("/spec/" + "a" * 5000, 400),
        ("/spec/../healthz", 404),  # no normalization: not a route
        ("/spec/dns1/../tools", 404),
        ("/spec/dns1/", 404),
        ("/spec/", 404),
        ("/spec", 404),
        ("/specs/dns1", 404),
        ("//spec/dns1", 404),
    ],
)
def test_identity_tricks_never_reach_a_lookup(server, path, status):
    reply = s.get(server, path, SITE_TOKEN)
    assert reply.status == status
    assert b"ssh-ed25519" not in reply.body
    assert s.healthy(server)


def test_raw_non_ascii_request_line_is_refused(server):
    # A dotless i on purpose: a non-ASCII identity that looks like one the server knows.
    reply = s.raw(server, "GET /spec/dnsı1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())  # noqa: RUF001
    assert reply.status == 400
    assert s.healthy(server)


def test_a_63_character_identity_is_a_lookup(server):
    assert s.get(server, "/spec/" + "a" * 63, SITE_TOKEN).status == 404


def test_a_token_in_place_of_the_identity_is_not_logged(server):
    assert s.get(server, f"/spec/{NODE_TOKENS['dns1']}?token={SITE_TOKEN}", SITE_TOKEN).status == 404
    assert s.get(server, f"/spec/{NODE_TOKENS['nest1']}").status == 401
    assert NODE_TOKENS["dns1"] not in server.log_text() and NODE_TOKENS["nest1"] not in server.log_text()


# ---------------------------------------------------------------------------------------------------- limits
def test_one_oversized_header_is_431_and_the_server_goes_on(server):
    reply = s.get(server, "/spec/tools", headers={"X-Big": "a" * 20_000})
    assert reply.status == 431 and reply.headers.get("connection") == "close"
    assert s.healthy(server)


def test_too_many_header_fields_is_431(server):
    reply = s.get(server, "/spec/tools", headers={f"X-H{index}": "v" for index in range(100)})
    assert reply.status == 431
    assert s.healthy(server)


def test_headers_trickled_past_the_size_limit_are_refused(server):
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(b"GET /spec/tools HTTP/1.1\r\nHost: x\r\n")
        for _ in range(20):  # 20 KiB in 1 KiB pieces: the protocol's 8 KiB cap stops it before the parser buffers it
            try:
                sock.sendall(b"X-Pad: " + b"a" * 1017 + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.01)
        reply = s.read_reply(sock)
    assert reply.status == 431 and reply.headers["connection"] == "close"
    assert s.healthy(server)


def test_one_huge_header_in_one_write_is_cut_off_by_the_protocol(server):
    reply = s.raw(server, b"GET /spec/tools HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
    assert reply.status == 431
    assert s.healthy(server)


def test_a_huge_declared_body_is_refused_without_being_read(server):
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /spec/tools HTTP/1.1\r\nHost: x\r\nContent-Length: 10737418240\r\n\r\n" + b"a" * 1024)
        reply = s.read_reply(sock)
        assert reply.status == 413 and reply.headers.get("connection") == "close"
        assert time.monotonic() - started < 2
        sock.settimeout(5)
        assert sock.recv(1) == b""  # closed: the 10 GiB are never read
    assert s.healthy(server)


@pytest.mark.parametrize(
    "body_headers",
    [b"Content-Length: 5\r\n\r\nhello", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"],
    ids=["length", "chunked"],
)
def test_a_get_with_a_body_is_413(server, body_headers):
    reply = s.raw(server, b"GET /spec/tools HTTP/1.1\r\nHost: x\r\n" + body_headers)
    assert reply.status == 413
    assert s.healthy(server)


@pytest.mark.parametrize(
    "junk",
    [
        b"\x00\x01\x02garbage\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET /spec/tools HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"GET /spec/tools HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    ],
    ids=["binary", "no-target", "bad-length", "bad-header"],
)
def test_malformed_requests_are_400_and_the_server_goes_on(server, junk):
    assert s.raw(server, junk).status == 400
    assert s.healthy(server)


def test_keep_alive_serves_several_requests_on_one_connection(server):
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        for identity in ("tools", "tools", "jump1"):
            sock.sendall(
                f"GET /spec/{identity} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SITE_TOKEN}\r\n\r\n".encode()
            )
            assert s.read_reply(sock).json()["identity"]["name"] == identity


# ---------------------------------------------------------------------------------------------------- slow clients
def _trickle(server, stop: threading.Event, outcome: list, source: str = "127.0.0.1"):
    """Slowloris: a request line, then one header byte every 0.2 s, never finishing (from `source`: 30 slow clients
    are 30 addresses here; one address holding 30 connections is test_spec_hardening's connections-per-client case)."""
    with socket.create_connection((server.host, server.port), timeout=10, source_address=(source, 0)) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /spec/tools HTTP/1.1\r\nHost: x\r\n")
        try:
            while not stop.is_set():
                sock.sendall(b"X")
                sock.settimeout(0.2)
                try:
                    data = sock.recv(1024)
                except TimeoutError:
                    continue
                outcome.append((time.monotonic() - started, data))
                return
        except (BrokenPipeError, ConnectionResetError):
            outcome.append((time.monotonic() - started, b""))


def test_slow_clients_are_cut_off_and_others_are_served_meanwhile(server):
    stop, outcomes = threading.Event(), []
    trickles = [
        threading.Thread(target=_trickle, args=(server, stop, outcomes, f"127.0.3.{number}")) for number in range(1, 31)
    ]
    for thread in trickles:
        thread.start()
    time.sleep(0.3)
    try:
        for _ in range(5):  # while 30 slow clients hold connections, a normal request is answered at once
            started = time.monotonic()
            assert s.get(server, "/spec/tools").status == 200
            assert time.monotonic() - started < 1.0  # not queued behind the slow ones (they hold on for 1.5 s)
        deadline = time.monotonic() + HEADER_TIMEOUT + 5
        for thread in trickles:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        stop.set()
        for thread in trickles:
            thread.join(timeout=5)
    assert len(outcomes) == 30
    for elapsed, data in outcomes:
        # trickling bytes never extends the deadline; the server answers 408 and closes
        assert HEADER_TIMEOUT - 0.2 < elapsed < HEADER_TIMEOUT + 2
        assert data.startswith(b"HTTP/1.1 408 ")
    assert s.healthy(server)
    assert sum(r["event"] == "header_timeout" for r in server.log()) >= 30


def test_a_silent_connection_is_closed_after_the_header_timeout(server):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        started = time.monotonic()
        data = sock.recv(1024)
        elapsed = time.monotonic() - started
    assert data.startswith(b"HTTP/1.1 408 ") and HEADER_TIMEOUT - 0.2 < elapsed < HEADER_TIMEOUT + 2


def test_an_idle_keep_alive_connection_gets_a_new_deadline(server):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.read_reply(sock).status == 200
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # the next request starts, then stalls
        data = sock.recv(1024)
        assert data.startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started < HEADER_TIMEOUT + 2


# ---------------------------------------------------------------------------------------------------- logs
def test_access_log_is_json_lines_without_tokens_or_raw_paths(server):
    s.get(server, f"/spec/dns1?token={SITE_TOKEN}", NODE_TOKENS["dns1"])
    s.get(server, f"/nowhere/{WRONG_TOKEN}", WRONG_TOKEN)
    s.get(server, "/spec/jump1", headers={"Authorization": f"Basic {SITE_TOKEN}"})
    text = server.log_text()
    for token in ALL_TOKENS:
        assert token not in text
    records = server.log()  # every line parses as JSON
    access = [r for r in records if r["event"] == "access"]
    assert len(access) >= 3
    fetched = [r for r in access if r.get("identity") == "dns1" and r["principal"] == "node:dns1"]
    assert fetched and set(fetched[-1]) == {
        "ts",
        "event",
        "client",
        "method",
        "route",
        "identity",
        "principal",
        "generation",
        "status",
        "bytes",
        "ms",
    }
    assert all(r["client"].startswith("127.") for r in access)
    s.get(server, "/healthz", headers={"X-Forwarded-For": "203.0.113.9"})  # a forged client address is not believed
    assert server.log()[-1]["client"] == server.host or server.log()[-1]["client"].startswith("127.")
    assert "203.0.113.9" not in server.log_text()
    assert "/nowhere" not in text and "Basic" not in text
