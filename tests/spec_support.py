"""Helpers for the spec server and client tests: a standalone site in a temporary folder, a secrets file, a real
`terravixens spec serve` process on a loopback address, and raw HTTP requests (no client-side normalization)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "sites" / "standalone.yaml"

# Test tokens: made up here, never used anywhere else. Each is a valid DNS label on purpose (a client that puts its
# token where the identity goes must not get it logged).
SITE_TOKEN = "site-token-4f1c9a0d2b7e4c86a1f05d3e9b2c7a41"
NODE_TOKENS = {
    "nest1": "nest1-token-8b2e61f0c4d94a7fb3e2c5d6a7089b1c",
    "dns1": "dns1-token-2c7d4e9f1a0b4c3d8e6f5a4b3c2d1e0f",
    "jump1": "jump1-token-9a8b7c6d5e4f4a3b2c1d0e9f8a7b6c5d",
}
WRONG_TOKEN = "wrong-token-0000111122223333444455556666777788"
ALICE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3RrZXlhbGljZXRlc3RrZXlhbGljZXRlc3RrZXlh alice@laptop"
BOB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3RrZXlib2J0ZXN0a2V5Ym9idGVzdGtleWJvYnRlc3Rr bob@desk"
ALL_TOKENS = [SITE_TOKEN, *NODE_TOKENS.values(), WRONG_TOKEN]


def standalone_data() -> dict:
    """The shipped standalone site's data (sites/standalone.yaml)."""
    return yaml.safe_load(SITE.read_text())


def secrets_data(**changes) -> dict:
    data = {
        "schema_version": 1,
        "ssh_keys": {"alice": ALICE, "bob": BOB},
        "site_token": SITE_TOKEN,
        "node_tokens": dict(NODE_TOKENS),
    }
    data.update(changes)
    return data


def write_secrets(path: Path, data: dict | None = None, mode: int = 0o600) -> Path:
    path.write_text(yaml.safe_dump(data or secrets_data(), sort_keys=False))
    os.chmod(path, mode)
    return path


def standalone_copy(folder: Path) -> tuple[Path, Path]:
    """The example standalone site and its specs copied to `folder`, and a secrets file beside them."""
    shutil.copy(SITE, folder / "site.yaml")
    shutil.copytree(SITE.parent / "specs", folder / "specs")
    return folder / "site.yaml", write_secrets(folder / "secrets.yaml")


def write_env(
    path: Path,
    server: str,
    identity: str,
    token: str | None = None,
    ca: Path | None = None,
    mode: int = 0o600,
    extra: str = "",
) -> Path:
    """A node.env as cloud-init writes it on a standalone node, for `terravixens spec get`."""
    lines = ["# written by cloud-init", f"TERRAVIXENS_SPEC_SERVER={server}", f"TERRAVIXENS_IDENTITY={identity}"]
    if token:
        lines.append(f'TERRAVIXENS_TOKEN="{token}"')
    if ca:
        lines.append(f"TERRAVIXENS_CA_FILE={ca}")
    path.write_text("\n".join(lines) + "\n" + extra)
    path.chmod(mode)
    return path


@dataclass
class Server:
    process: subprocess.Popen
    host: str
    port: int
    log_path: Path
    scheme: str = "http"
    log_offset: int = field(default=0)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def log(self) -> list[dict]:
        # The JSON lines; stderr (one plain line per warning) shares the file.
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]

    def log_text(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, predicate, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for record in self.log():
                if predicate(record):
                    return record
            time.sleep(0.05)
        raise AssertionError(f"no such log record within {timeout} s; log:\n{self.log_text()[-3000:]}")

    def hangup(self) -> None:
        self.process.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(
    site: Path,
    secrets: Path,
    log_path: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    extra: list[str] | None = None,
    scheme: str = "http",
    sigint_ignored: bool = False,
) -> Server:
    """`terravixens spec serve` in a subprocess; returns once it logs that it listens (port 0: a free port).
    `sigint_ignored`: the process inherits SIGINT ignored, as a job a script starts with `&` does."""
    with open(log_path, "w") as log:  # the server keeps its own descriptor of the file
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "terravixens.cli",
                "spec",
                "serve",
                "--site",
                str(site),
                "--secrets",
                str(secrets),
                "--host",
                host,
                "--port",
                str(port),
                *(extra or []),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
        )
    server = Server(process, host, port, log_path, scheme)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"spec serve exited {process.returncode}:\n{log_path.read_text()}")
        for line in log_path.read_text().splitlines():
            if line.startswith("{") and json.loads(line).get("event") == "listening":
                server.port = json.loads(line)["port"]
                return server
        time.sleep(0.05)
    server.stop()
    raise AssertionError(f"spec serve did not start:\n{log_path.read_text()}")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def read_reply(sock: socket.socket, timeout: float = 5.0) -> Reply:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed before a full reply: {data[:200]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return Reply(status, headers, body[:length])


def raw(server: Server, request: bytes, timeout: float = 5.0) -> Reply:
    """Sends `request` bytes as they are (no path normalization, no header checks) and reads one reply."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as sock:
        sock.sendall(request)
        return read_reply(sock, timeout)


def get(server: Server, path: str, token: str | None = None, headers: dict[str, str] | None = None) -> Reply:
    lines = [f"GET {path} HTTP/1.1", f"Host: {server.host}", "Connection: close"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return raw(server, ("\r\n".join(lines) + "\r\n\r\n").encode())


def healthy(server: Server) -> bool:
    return get(server, "/healthz").status == 200


def make_tls(folder, host="127.0.0.8"):
    """A throwaway CA and a server certificate for `host` (IP SAN), written as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("terravixens test CA"))
        .issuer_name(name("terravixens test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(host))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    paths["key"].chmod(0o600)
    return paths
