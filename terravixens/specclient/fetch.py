"""Fetching the spec: one bounded request, and retries with exponential backoff and full jitter within a time budget.

Transient failures (connection refused or reset, timeouts, 5xx, 429) are retried; a 401/403/404, a TLS
verification failure or a malformed answer is not: retrying would not change it.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

MAX_BODY = 1024 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


class Transient(Exception):
    """Worth another try."""


class Permanent(Exception):
    """Not worth another try: `kind` is 'tls' or 'protocol'."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Backoff:
    base: float = 0.5
    factor: float = 2.0
    cap: float = 10.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform between 0 and the exponential step (AWS Architecture Blog, 'Exponential Backoff And
        Jitter'): many nodes restarted together do not retry in lockstep."""
        return rng.uniform(0, min(self.cap, self.base * self.factor**attempt))


class _Deadline:
    """Ends an attempt at a wall-clock deadline. A socket timeout bounds each read, not the answer: a server sending
    one byte every half second would keep an attempt alive for hours. At the deadline the connection's socket is shut
    down (the plain socket's shutdown, also under TLS: the reading thread then sees end of file), so the attempt ends
    within its time whatever the server does."""

    def __init__(self, connection: http.client.HTTPConnection, seconds: float):
        self.connection, self.fired = connection, False
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        sock = self.connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def __enter__(self) -> _Deadline:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()


def request_once(
    server: str, identity: str, token: str | None, ca_file: Path | None, timeout: float, ca_pem: str | None = None
) -> Answer:
    """One GET of /spec/<identity>, over within `timeout` seconds of wall-clock time (connect, TLS, answer)."""
    headers = {"Accept": "application/json", "User-Agent": "terravixens-spec-get"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return get_once(server, f"/spec/{identity}", headers, ca_file, timeout, ca_pem)


def answers(server: str, ca_file: Path | None, ca_pem: str | None, timeout: float) -> str | None:
    """None when the server answers GET /healthz with any HTTP status within `timeout` (it is reachable: 503
    `stale` included), else why not in one line. No token is sent. The node agent's check that a network change
    kept the node's spec server reachable (ADR 0059)."""
    try:
        get_once(server, "/healthz", {"User-Agent": "terravixens-agent"}, ca_file, timeout, ca_pem)
    except (Transient, Permanent) as error:
        return str(error)
    return None


def get_once(
    server: str, path: str, headers: dict[str, str], ca_file: Path | None, timeout: float, ca_pem: str | None
) -> Answer:
    """One GET of `path`, over within `timeout` seconds of wall-clock time (connect, TLS, answer)."""
    try:
        parts = urlsplit(server)
        host, port = parts.hostname, parts.port
    except ValueError:  # the environment file's check refuses such a URL before any request
        raise Permanent("protocol", f"{server[:64]!r} has no usable port") from None
    if not host:
        raise Permanent("protocol", f"{server[:64]!r} names no host")
    if parts.scheme == "https":
        try:
            context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None, cadata=ca_pem)
        except (OSError, ssl.SSLError) as error:
            raise Permanent("tls", f"cannot use CA file {ca_file} ({error})") from None
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port or 443, timeout=timeout, context=context
        )
    else:
        connection = http.client.HTTPConnection(host, port or 80, timeout=timeout)
    deadline = _Deadline(connection, timeout)
    try:
        with deadline:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            body = response.read(MAX_BODY + 1)
        if deadline.fired:
            raise Transient(f"no whole answer within {timeout:g} s")
        if len(body) > MAX_BODY:
            raise Permanent("protocol", f"the answer is larger than {MAX_BODY:,} bytes")
        return Answer(response.status, body)
    except ssl.SSLCertVerificationError as error:
        raise Permanent(
            "tls",
            f"the server's certificate is not trusted ({error.verify_message}): give the CA "
            f"that signed it in the site's spec_server.ca_data (node.env TERRAVIXENS_CA_DATA) or TERRAVIXENS_CA_FILE",
        ) from None
    except (ssl.SSLError, ConnectionError, TimeoutError, OSError, http.client.HTTPException) as error:
        if deadline.fired:
            raise Transient(f"no whole answer within {timeout:g} s") from None
        raise Transient(f"{type(error).__name__}: {error}"[:200]) from None
    finally:
        connection.close()


def with_retries(
    attempt: Callable[[float], Answer],
    *,
    budget: float,
    attempt_timeout: float,
    backoff: Backoff = Backoff(),
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    report: Callable[[str], None] = lambda line: None,
) -> Answer | None:
    """The first answer that is not transient, or None when the budget ran out. Never sleeps past the budget."""
    rng = rng or random.Random()
    deadline = clock() + budget
    number = 0
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            return None
        try:
            answer = attempt(min(attempt_timeout, remaining))
            if answer.status < 500 and answer.status != 429:
                return answer
            failure = f"HTTP {answer.status}"
        except Transient as error:
            failure = str(error)
        pause = min(backoff.delay(number, rng), max(0.0, deadline - clock()))
        number += 1
        if deadline - clock() - pause <= 0:
            report(f"attempt {number} failed ({failure}); time budget spent")
            return None
        report(f"attempt {number} failed ({failure}); retrying in {pause:.1f} s")
        sleep(pause)
