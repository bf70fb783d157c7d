"""`terravixens spec get` against the real server on loopback (and, for answers a correct server never gives, a tiny
fake one): each node gets its own spec under its posture, retries with backoff until the server is up, writes
atomically with mode 0600, and exits with the documented code for each failure."""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from terravixens import cli
from terravixens.inputs import InputError
from terravixens.specclient import envfile
from terravixens.specclient.fetch import Answer, Backoff, Transient, with_retries
from terravixens.specclient.get import write_atomically
from tests import spec_support as s
from tests.loopback import free_port
from tests.spec_support import NODE_TOKENS, SITE_TOKEN, WRONG_TOKEN, write_env

HOST = "127.0.0.9"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("specget")
    site, secrets = s.standalone_copy(folder)
    server = s.start_server(site, secrets, folder / "serve.log", host=HOST, extra=["--watch-interval", "0"])
    yield folder, server
    server.stop()


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def spec_get(capsys):
    """`terravixens spec get` through the CLI's main(), in this process (the CLI end to end, without paying an
    interpreter start per case); test_exit_codes_reach_the_shell runs the real command once."""

    def run(env: Path, out: Path, *extra: str, umask: int = 0o022) -> Result:
        capsys.readouterr()
        previous = os.umask(umask)
        try:
            code = cli.main(["spec", "get", "--env-file", str(env), "--out", str(out), *extra])
        finally:
            os.umask(previous)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


# ---------------------------------------------------------------------------------------------------- each node
@pytest.mark.parametrize(
    "identity,token",
    [("tools", None), ("jump1", SITE_TOKEN), ("dns1", NODE_TOKENS["dns1"]), ("nest1", NODE_TOKENS["nest1"])],
)
def test_each_node_gets_its_spec_under_its_posture(lab, tmp_path, identity, token, spec_get):
    _, server = lab
    out = tmp_path / "state" / "spec.json"
    result = spec_get(write_env(tmp_path / "node.env", server.url, identity, token), out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{out}: spec of {identity!r} written (")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.read_bytes() == s.get(server, f"/spec/{identity}", token).body
    assert json.loads(out.read_bytes())["identity"]["name"] == identity


@pytest.mark.parametrize(
    "identity,token,code,message",
    [
        ("dns1", None, 4, "refused (401)"),
        ("dns1", WRONG_TOKEN, 4, "refused (401)"),
        ("dns1", NODE_TOKENS["nest1"], 4, "refused (403)"),  # another node's token
        ("dns1", SITE_TOKEN, 4, "refused (403)"),  # the site token does not open a node_token posture
        ("ghost", SITE_TOKEN, 5, "does not know identity 'ghost'"),
        ("ghost", None, 4, "refused (401)"),  # an anonymous caller cannot tell unknown from protected
    ],
    ids=["dns1-none", "dns1-wrong", "dns1-other-node", "dns1-site", "ghost-site", "ghost-none"],
)
def test_refusals_have_their_exit_codes_and_write_nothing(lab, tmp_path, identity, token, code, message, spec_get):
    _, server = lab
    out = tmp_path / "spec.json"
    result = spec_get(write_env(tmp_path / "node.env", server.url, identity, token), out, "--max-time", "10")
    assert result.returncode == code and message in result.stderr
    assert not out.exists()
    assert not any(t in result.stderr + result.stdout for t in (SITE_TOKEN, WRONG_TOKEN, *NODE_TOKENS.values()))


# ---------------------------------------------------------------------------------------------------- retries
def test_nothing_listening_exits_3_within_the_time_budget(tmp_path, spec_get):
    port = free_port(HOST)
    started = time.monotonic()
    result = spec_get(
        write_env(tmp_path / "node.env", f"http://{HOST}:{port}", "tools"), tmp_path / "spec.json", "--max-time", "1.5"
    )
    assert result.returncode == 3
    assert time.monotonic() - started < 1.5 + 1.0
    assert "attempt 1 failed (ConnectionRefusedError" in result.stderr
    assert result.stderr.rstrip().endswith("did not answer within 1.5 s")


def test_exit_codes_reach_the_shell(tmp_path):
    env = write_env(tmp_path / "node.env", f"http://{HOST}:{free_port(HOST)}", "tools")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "terravixens.cli",
            "spec",
            "get",
            "--env-file",
            str(env),
            "--out",
            str(tmp_path / "spec.json"),
            "--max-time",
            "0.5",
        ],
        cwd=s.ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 3 and "gave up" in result.stderr and "Traceback" not in result.stderr


def test_server_down_then_up_is_retried_with_backoff(tmp_path):
    site, secrets = s.standalone_copy(tmp_path)
    port = free_port(HOST)
    out = tmp_path / "spec.json"
    env = write_env(tmp_path / "node.env", f"http://{HOST}:{port}", "dns1", NODE_TOKENS["dns1"])
    client = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "terravixens.cli",
            "spec",
            "get",
            "--env-file",
            str(env),
            "--out",
            str(out),
            "--max-time",
            "30",
        ],
        cwd=s.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.2)
    assert client.poll() is None, "the client gave up while the server was down"
    server = s.start_server(
        site, secrets, tmp_path / "serve.log", host=HOST, port=port, extra=["--watch-interval", "0"]
    )
    try:
        _stdout, stderr = client.communicate(timeout=30)
    finally:
        server.stop()
    assert client.returncode == 0, stderr
    failures = [line for line in stderr.splitlines() if "failed (ConnectionRefusedError" in line]
    assert len(failures) >= 2
    delays = [float(line.rsplit("retrying in ", 1)[1].split()[0]) for line in failures]
    assert all(0 <= delay <= 10 for delay in delays)
    assert json.loads(out.read_text())["identity"]["name"] == "dns1"


class _Clock:
    def __init__(self):
        self.now = 0.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_backoff_is_exponential_with_full_jitter_and_capped():
    backoff, rng = Backoff(base=0.5, factor=2, cap=10), random.Random(7)
    for attempt in range(12):
        samples = [backoff.delay(attempt, rng) for _ in range(200)]
        ceiling = min(10, 0.5 * 2**attempt)
        assert all(0 <= sample <= ceiling for sample in samples)
        assert max(samples) > 0.8 * ceiling and min(samples) < 0.2 * ceiling  # spread over the whole range


def test_retries_stop_at_the_budget_and_never_sleep_past_it():
    clock, calls = _Clock(), []

    def attempt(timeout):
        calls.append(timeout)
        clock.now += 0.1
        raise Transient("ConnectionRefusedError")

    assert (
        with_retries(attempt, budget=20, attempt_timeout=5, rng=random.Random(1), clock=clock.time, sleep=clock.sleep)
        is None
    )
    assert clock.now <= 20 + 1e-9 and len(calls) > 3
    assert all(timeout <= 5 for timeout in calls)


@pytest.mark.parametrize("statuses,calls", [([503, 429, 502, 200], 4), ([404], 1), ([401], 1), ([500, 403], 2)])
def test_only_transient_statuses_are_retried(statuses, calls):
    clock, seen = _Clock(), []

    def attempt(timeout):
        seen.append(timeout)
        return Answer(statuses[len(seen) - 1], b"")

    answer = with_retries(
        attempt, budget=60, attempt_timeout=5, rng=random.Random(2), clock=clock.time, sleep=clock.sleep
    )
    assert answer.status == statuses[-1] and len(seen) == calls


# ---------------------------------------------------------------------------------------------------- writing
def test_the_spec_replaces_the_old_one_atomically_with_mode_0600(lab, tmp_path, spec_get):
    _, server = lab
    out = tmp_path / "spec.json"
    out.write_text("old spec")
    out.chmod(0o644)
    before = out.stat().st_ino
    result = spec_get(write_env(tmp_path / "node.env", server.url, "tools"), out, umask=0)  # umask 0: still 0600
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.stat().st_ino != before  # renamed over, not rewritten
    assert json.loads(out.read_text())["identity"]["name"] == "tools"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node.env", "spec.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_spec_and_no_temporary_file(tmp_path, monkeypatch):
    out = tmp_path / "spec.json"
    out.write_text("old spec")

    def fail(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_atomically(out, b"new spec")
    assert out.read_text() == "old spec" and [p.name for p in tmp_path.iterdir()] == ["spec.json"]


def test_an_unwritable_output_exits_7(lab, tmp_path, spec_get):
    _, server = lab
    (tmp_path / "spec.json").mkdir()
    result = spec_get(write_env(tmp_path / "node.env", server.url, "tools"), tmp_path / "spec.json")
    assert result.returncode == 7 and "cannot write" in result.stderr


# ---------------------------------------------------------------------------------------------------- verification
class _Fake(BaseHTTPRequestHandler):
    answers: ClassVar[list] = []

    def do_GET(self):
        status, body, headers = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake(tmp_path):
    server = ThreadingHTTPServer((HOST, 0), _Fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://{HOST}:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _spec(name="tools", version=1) -> bytes:
    return json.dumps({"schema_version": version, "identity": {"name": name}}).encode()


@pytest.mark.parametrize(
    "answers,code,message",
    [
        ([(200, _spec("dns1"), {})], 6, "is the spec of 'dns1', not of 'tools'"),
        ([(200, _spec(version=2), {})], 6, "has schema_version 2, this client reads 1"),
        ([(200, b"<html>proxy login</html>", {})], 6, "is not a JSON spec"),
        ([(200, b'{"schema_version": 1, "schema_version": 1}', {})], 6, "is not a JSON spec"),
        ([(302, b"", {"Location": "http://127.0.0.10/"})], 6, "unexpected answer HTTP 302"),
        ([(200, b" " * (1024 * 1024 + 10), {})], 6, "larger than 1,048,576 bytes"),
        ([(503, b"", {}), (500, b"", {}), (200, _spec(), {})], 0, "attempt 2 failed (HTTP 500)"),
    ],
    ids=["other-identity", "schema-2", "not-json", "duplicate-keys", "redirect", "oversized", "5xx-then-ok"],
)
def test_answers_are_verified(fake, tmp_path, answers, code, message, spec_get):
    _Fake.answers = list(answers)
    out = tmp_path / "spec.json"
    result = spec_get(write_env(tmp_path / "node.env", fake, "tools"), out, "--max-time", "20")
    assert result.returncode == code and message in result.stdout + result.stderr
    assert out.exists() == (code == 0)


def test_tls_without_the_ca_exits_6_and_with_it_succeeds(tmp_path, spec_get):
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
        out = tmp_path / "spec.json"
        untrusted = spec_get(write_env(tmp_path / "a.env", server.url, "dns1", NODE_TOKENS["dns1"]), out)
        assert untrusted.returncode == 6 and "certificate is not trusted" in untrusted.stderr
        assert "TERRAVIXENS_CA_FILE" in untrusted.stderr and not out.exists()
        trusted = spec_get(write_env(tmp_path / "b.env", server.url, "dns1", NODE_TOKENS["dns1"], ca=tls["ca"]), out)
        assert trusted.returncode == 0, trusted.stderr
        assert json.loads(out.read_text())["identity"]["name"] == "dns1"
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------------- environment
def test_a_missing_environment_file_exits_2(tmp_path, spec_get):
    result = spec_get(tmp_path / "node.env", tmp_path / "spec.json")
    assert result.returncode == 2 and "cannot be read (No such file or directory)" in result.stderr


def test_an_environment_file_with_a_token_others_can_read_exits_2(tmp_path, spec_get):
    env = write_env(tmp_path / "node.env", "http://127.0.0.9:1", "dns1", NODE_TOKENS["dns1"], mode=0o644)
    result = spec_get(env, tmp_path / "spec.json")
    assert result.returncode == 2 and f"mode 0644): it holds tokens; run: chmod 600 {env}" in result.stderr
    assert NODE_TOKENS["dns1"] not in result.stderr


@pytest.mark.parametrize(
    "text,problem",
    [
        ("TERRAVIXENS_IDENTITY=dns1\n", "TERRAVIXENS_SPEC_SERVER: is required"),
        ("TERRAVIXENS_SPEC_SERVER=http://127.0.0.9:1\n", "TERRAVIXENS_IDENTITY: is required"),
        (
            "TERRAVIXENS_SPEC_SERVER=http://127.0.0.9:1\nTERRAVIXENS_IDENTITY=dns1\nTERRAVIXENS_TOKN=x\n",
            "line 3, TERRAVIXENS_TOKN: unknown key",
        ),
        (
            "TERRAVIXENS_SPEC_SERVER=http://127.0.0.9:1\nTERRAVIXENS_IDENTITY=dns1\nTERRAVIXENS_IDENTITY=dns2\n",
            "line 3, TERRAVIXENS_IDENTITY: appears twice (lines 2 and 3)",
        ),
        ("TERRAVIXENS_SPEC_SERVER=ftp://x\nTERRAVIXENS_IDENTITY=dns1\n", "is not a server URL"),
        ("TERRAVIXENS_SPEC_SERVER=http://127.0.0.9:1/spec\nTERRAVIXENS_IDENTITY=dns1\n", "is not a server URL"),
        ("TERRAVIXENS_SPEC_SERVER=http://127.0.0.9:1\nTERRAVIXENS_IDENTITY=../etc\n", "is not a node name"),
        (
            "TERRAVIXENS_SPEC_SERVER=http://127.0.0.9:1\nTERRAVIXENS_IDENTITY=dns1\nTERRAVIXENS_TOKEN=short\n",
            "TERRAVIXENS_TOKEN: is not a usable token",
        ),
        (
            (
                f"TERRAVIXENS_SPEC_SERVER=http://specs.lab.internal:8080\nTERRAVIXENS_IDENTITY=dns1\n"
                f"TERRAVIXENS_TOKEN={SITE_TOKEN}\n"
            ),
            "is plain http: tokens would cross the network in clear text",
        ),
        ("just some text\n", "line 1: is not KEY=VALUE"),
    ],
)
def test_environment_file_errors(tmp_path, text, problem):
    with pytest.raises(InputError) as caught:
        envfile.parse(text, tmp_path / "node.env")
    assert problem in str(caught.value) and SITE_TOKEN not in str(caught.value)


def test_environment_file_accepts_quotes_comments_and_export(tmp_path):
    env = envfile.parse(
        f"# cloud-init\nexport TERRAVIXENS_SPEC_SERVER='https://specs.lab.internal:8443/'\n\n"
        f'TERRAVIXENS_IDENTITY=dns1\nTERRAVIXENS_TOKEN="{SITE_TOKEN}"\n'
        f"TERRAVIXENS_CA_FILE=/etc/terravixens/ca.pem\n",
        tmp_path / "node.env",
    )
    assert env == envfile.NodeEnv(
        "https://specs.lab.internal:8443", "dns1", SITE_TOKEN, Path("/etc/terravixens/ca.pem")
    )


def test_the_environment_file_path_comes_from_the_environment(tmp_path, monkeypatch):
    path = write_env(tmp_path / "custom.env", "http://127.0.0.9:1", "tools")
    monkeypatch.setenv(envfile.PATH_ENV, str(path))
    assert envfile.load().identity == "tools"


# Not the standard library: what a guest must not need to fetch its spec.
NOT_ON_A_GUEST = ("pydantic", "pydantic_core", "cdktf", "jsii", "constructs", "yaml", "starlette", "uvicorn")


def test_the_node_client_is_standard_library_only():
    """`terravixens.specclient.get` in a fresh interpreter imports nothing but Python's standard library and the
    terravixens modules it reads its files with (a guest has no pip packages)."""
    program = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import terravixens.specclient.get\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout)
    assert "terravixens.specclient.get" in imported
    tops = {name.split(".")[0] for name in imported}
    assert sorted(tops & set(NOT_ON_A_GUEST)) == []
    assert sorted(tops - set(sys.stdlib_module_names) - {"terravixens"}) == []
    # Of terravixens, only the strict readers of text and JSON, the node.env format and the one exit-code table (its
    # SpecGetExit; standard library only, the checks above cover what it imports): never the site model.
    assert sorted(
        name
        for name in imported
        if name.startswith("terravixens.") and not name.startswith(("terravixens.specclient", "terravixens.inputs"))
    ) == [
        "terravixens.exitcodes",
        "terravixens.spec_transport",
        "terravixens.standalone",
        "terravixens.standalone.node_env",
    ]
