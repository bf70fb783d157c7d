"""First boot of a stock cloud image (ADR 0059): fetch the agent bundle, check it, run it.

Cloud-init's vendor data writes this file to /usr/local/lib/terravixens/first-boot.py and runs it once per instance
with python3 — what Debian and Ubuntu cloud images carry for cloud-init itself; nothing else of terravixens is on the
node yet. It reads /etc/terravixens/node.env (written by the same vendor data), asks the spec server for
`GET /agent.pyz` with the node's own credentials (its token, the site's CA), refuses a bundle whose SHA-256 is not
the one node.env pins (TERRAVIXENS_AGENT_SHA256, written by the L2 stacks at apply time), installs it at
/usr/local/lib/terravixens/agent.pyz and runs `agent run --first-boot` — fetch the spec, converge, once.

Python rather than curl or wget: the token stays out of every process's command line (a header argument is visible
to any user in /proc), the CA travels as data (no file to write first), and each attempt is bounded in wall-clock
time and bytes, as `terravixens spec get` does. Standard library only; it cannot import terravixens (it is what
brings it). Exit codes are spec get's (terravixens.exitcodes.SpecGetExit, pinned by a test): 2 node.env unusable,
3 the server did not answer in time, 4 credentials refused, 5 no bundle served, 6 a bundle with another hash or an
answer that is not one, 7 the bundle cannot be written; otherwise the agent's own code. Every refusal is one line on
stderr and nothing is written or run.

The file is rendered into the vendor data by Terraform's format(), as a YAML block: it holds no percent sign, no
dollar sign and no backslash (checked by terravixens.standalone.node_env.first_boot_source).
"""

import base64
import contextlib
import hashlib
import http.client
import ipaddress
import os
import random
import socket
import ssl
import stat
import sys
import threading
import time
from typing import NamedTuple
from urllib.parse import urlsplit

ROOT = os.environ.get("TERRAVIXENS_AGENT_ROOT") or "/"
NODE_ENV = "etc/terravixens/node.env"
BUNDLE = "usr/local/lib/terravixens/agent.pyz"
ENV_LIMIT = 16 * 1024
BUNDLE_LIMIT = 8 * 1024 * 1024
BUDGET, ATTEMPT = 300.0, 20.0
USAGE, UNREACHABLE, REFUSED, UNKNOWN, UNVERIFIED, UNWRITABLE = 2, 3, 4, 5, 6, 7
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Env(NamedTuple):
    server: str
    token: str | None
    pinned: str
    ca_pem: str | None
    ca_file: str | None


class Stop(Exception):
    def __init__(self, code: int, line: str):
        super().__init__(line)
        self.code = code


def say(line: str) -> None:
    print(f"terravixens first boot: {line}", file=sys.stderr, flush=True)


def folder(parts: list[str], create: bool) -> int:
    """The folder ROOT/parts, walked one name at a time without following a link (made 0755 when missing)."""
    fd = os.open(ROOT, FOLDER)
    for part in parts:
        try:
            child = os.open(part, FOLDER, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                os.close(fd)
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            child = os.open(part, FOLDER, dir_fd=fd)
        except OSError:
            os.close(fd)
            where = "/" + "/".join(parts)
            raise Stop(
                UNWRITABLE if create else USAGE, f"{where} is a link or not a folder: first boot follows no link"
            ) from None
        os.close(fd)
        fd = child
    return fd


def read(path: str, limit: int) -> bytes:
    """A regular file under ROOT, at most `limit` bytes, reached without following a link."""
    *parts, name = path.split("/")
    parent = folder(parts, create=False)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Stop(USAGE, f"/{path} is not a regular file")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Stop(USAGE, f"/{path} is larger than {limit} bytes")
    return data


def node_env() -> Env:
    try:
        text = read(NODE_ENV, ENV_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise Stop(USAGE, f"cannot read /{NODE_ENV} ({error}): the vendor data writes it before this runs") from None
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in ("'", '"'):
            value = value[1:-1]
        values[key.strip()] = value
    pinned = values.get("TERRAVIXENS_AGENT_SHA256", "")
    if len(pinned) != 64 or any(c not in "0123456789abcdef" for c in pinned):
        raise Stop(USAGE, f"/{NODE_ENV} pins no agent bundle (TERRAVIXENS_AGENT_SHA256): redeploy the node's layer")
    server = values.get("TERRAVIXENS_SPEC_SERVER", "").rstrip("/")
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Stop(USAGE, f"/{NODE_ENV} names no spec server URL (TERRAVIXENS_SPEC_SERVER)")
    token = values.get("TERRAVIXENS_TOKEN") or None
    allowed = values.get("TERRAVIXENS_ALLOW_INSECURE_HTTP") == "yes"
    if token and parts.scheme == "http" and not allowed and not loopback(parts.hostname):
        raise Stop(USAGE, f"{server} is plain http: the node's token is not sent in clear text (ADR 0046)")
    ca = values.get("TERRAVIXENS_CA_DATA")
    try:
        ca_pem = base64.b64decode(ca, validate=True).decode("ascii") if ca else None
    except ValueError:
        raise Stop(USAGE, f"/{NODE_ENV}: TERRAVIXENS_CA_DATA is not base64 of a PEM file") from None
    return Env(server, token, pinned, ca_pem, values.get("TERRAVIXENS_CA_FILE") or None)


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def attempt(env: Env, timeout: float) -> tuple[int, bytes]:
    """One GET of /agent.pyz, ended at a wall-clock deadline whatever the server does: (status, body)."""
    parts = urlsplit(env.server)
    host = parts.hostname or ""
    headers = {"User-Agent": "terravixens-first-boot", "Accept": "application/zip"}
    if env.token:
        headers["Authorization"] = "Bearer " + env.token
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=env.ca_file, cadata=env.ca_pem)
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, parts.port or 443, timeout=timeout, context=context
        )
    else:
        connection = http.client.HTTPConnection(host, parts.port or 80, timeout=timeout)
    fired: list[bool] = []

    def cut() -> None:
        fired.append(True)
        if connection.sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    try:
        connection.request("GET", "/agent.pyz", headers=headers)
        response = connection.getresponse()
        body = response.read(BUNDLE_LIMIT + 1)
    except ssl.SSLCertVerificationError as error:
        raise Stop(UNVERIFIED, f"the spec server's certificate is not trusted ({error.verify_message})") from None
    except (OSError, http.client.HTTPException) as error:
        raise TimeoutError("no whole answer in time" if fired else f"{type(error).__name__}: {error}") from None
    finally:
        timer.cancel()
        connection.close()
    if fired:
        raise TimeoutError("no whole answer in time")
    if len(body) > BUNDLE_LIMIT:
        raise Stop(UNVERIFIED, f"the answer is larger than {BUNDLE_LIMIT} bytes: not a bundle")
    return response.status, body


def fetch(env: Env) -> bytes:
    deadline, number = time.monotonic() + BUDGET, 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Stop(UNREACHABLE, f"{env.server} did not answer within {BUDGET:.0f} s: nothing run")
        try:
            status, body = attempt(env, min(ATTEMPT, left))
            if status == 200:
                return body
            if status in (401, 403):
                raise Stop(REFUSED, f"{env.server} refused this node's credentials ({status}): nothing run")
            if status in (404, 405):
                raise Stop(UNKNOWN, f"{env.server} serves no agent bundle ({status}): run `terravixens spec serve`")
            if status < 500 and status != 429:
                raise Stop(UNVERIFIED, f"{env.server} answered HTTP {status} for the agent bundle: nothing run")
            failure = f"HTTP {status}"
        except TimeoutError as error:
            failure = str(error)
        pause = random.uniform(0, min(10.0, 0.5 * 2**number))
        number += 1
        say(f"attempt {number} failed ({failure}); retrying in {pause:.1f} s")
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))


def install(data: bytes) -> None:
    """Beside the target (O_EXCL, no link followed), synced, then renamed over it within the folder."""
    *parts, name = BUNDLE.split("/")
    try:
        parent = folder(parts, create=True)
    except OSError as error:
        raise Stop(UNWRITABLE, f"cannot make /{'/'.join(parts)} ({error.strerror})") from None
    temporary = f".{name}.{os.getpid()}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
        try:
            os.fchmod(fd, 0o644)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        os.fsync(parent)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise Stop(UNWRITABLE, f"cannot write /{BUNDLE} ({error.strerror})") from None
    finally:
        os.close(parent)


def main() -> int:
    try:
        env = node_env()
        try:
            present = read(BUNDLE, BUNDLE_LIMIT)
        except (OSError, Stop):
            present = b""
        if hashlib.sha256(present).hexdigest() == env.pinned:
            say(f"/{BUNDLE} is the pinned bundle ({env.pinned[:12]}…): not fetched again")
        else:
            data = fetch(env)
            digest = hashlib.sha256(data).hexdigest()
            if digest != env.pinned:
                raise Stop(
                    UNVERIFIED,
                    f"refused the agent bundle from {env.server}: sha256 {digest[:12]}… is not the "
                    f"{env.pinned[:12]}… node.env pins (a spec server of another terravixens version, or a "
                    f"bundle changed on the way): nothing written, nothing run",
                )
            install(data)
            say(f"agent bundle {digest[:12]}… ({len(data)} bytes) from {env.server} installed at /{BUNDLE}")
    except Stop as stop:
        say(str(stop))
        return stop.code
    bundle = os.path.join(ROOT, BUNDLE)
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, bundle, "run", "--first-boot"])
    return 0  # not reached: the agent's exit code is this process's


if __name__ == "__main__":
    sys.exit(main())
