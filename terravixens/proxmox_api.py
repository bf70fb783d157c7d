"""The Proxmox VE API as `terravixens maintain` calls it: where each guest runs, its power state, start and shutdown,
and the tasks they start — every call bounded in time, every failure an answer, never an exception (like
terravixens.talosctl).

Standard library only (http.client, ssl). The endpoint and TLS settings are the site's (`proxmox.endpoint`,
`proxmox.insecure`; a CA file in $SSL_CERT_FILE is honoured, as OpenSSL reads it); the credentials are the ones
bpg/proxmox reads at apply time, from the environment, never from a file terravixens writes:
`PROXMOX_VE_API_TOKEN` (`USER@REALM!TOKENID=SECRET`, sent as `Authorization: PVEAPIToken=…`), else
`PROXMOX_VE_USERNAME` and `PROXMOX_VE_PASSWORD` (a ticket from `POST /access/ticket`, its CSRF token on every write).
No credential appears in a reason.

What is read and written (pve-manager's API, PVE 8/9):
- `GET /cluster/resources?type=vm`: every guest (`type` qemu or lxc) with its `node`, `vmid`, `name`, `status`;
- `GET /nodes/{node}/{qemu|lxc}/{vmid}/status/current`: `status` running or stopped;
- `POST …/status/start`, `POST …/status/shutdown` (`timeout`, and `forceStop` when asked): each answers a task's
  UPID, whose end `GET /nodes/{node}/tasks/{upid}/status` tells (`status` stopped, `exitstatus` OK or the error).
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TOKEN_ENV = "PROXMOX_VE_API_TOKEN"
USERNAME_ENV, PASSWORD_ENV = "PROXMOX_VE_USERNAME", "PROXMOX_VE_PASSWORD"
CALL_TIMEOUT = 30.0
POLL = 1.0
ANSWER_LIMIT = 8 * 1024 * 1024
KINDS = ("qemu", "lxc")


@dataclass(frozen=True)
class Answer:
    """One call's answer: `ok` and the API's `data`, or why not (`reason`: the HTTP status and PVE's message, or the
    connection's error; never a credential)."""

    ok: bool
    data: Any = None
    reason: str = ""


@dataclass(frozen=True)
class Guest:
    """A guest as `/cluster/resources` lists it: `kind` qemu (a VM) or lxc (a container)."""

    vmid: int
    node: str
    kind: str
    name: str
    status: str


class Credentials:
    """How the API is authenticated: a token, or a user and password (a ticket is asked for on first use)."""

    def __init__(self, environ: Mapping[str, str]):
        self.token = environ.get(TOKEN_ENV) or None
        self.username = environ.get(USERNAME_ENV) or None
        self.password = environ.get(PASSWORD_ENV) or None

    @property
    def missing(self) -> str | None:
        if self.token or (self.username and self.password):
            return None
        return (
            f"no Proxmox VE credentials: set {TOKEN_ENV} (USER@REALM!TOKENID=SECRET), or {USERNAME_ENV} and "
            f"{PASSWORD_ENV} (what bpg/proxmox reads at apply time)"
        )


@dataclass
class ProxmoxApi:
    """`endpoint`: the site's `proxmox.endpoint` (`https://pve1.lab.internal:8006/`); `insecure`: its
    `proxmox.insecure` (no certificate check); `timeout`: each call's deadline, connection included."""

    endpoint: str
    insecure: bool = False
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout: float = CALL_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _ticket: tuple[str, str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.endpoint)
        self.scheme, self.host, self.port = parts.scheme, parts.hostname or "", parts.port
        self.base = parts.path.rstrip("/") + "/api2/json"
        self.credentials = Credentials(self.environ)

    # ------------------------------------------------------------------------------------------------ transport
    def _connection(self) -> http.client.HTTPConnection:
        if self.scheme == "http":
            return http.client.HTTPConnection(self.host, self.port or 8006, timeout=self.timeout)
        # $SSL_CERT_FILE, when set, is the CA bundle (as OpenSSL reads it; passed here so that the environment given
        # is the one used)
        context = ssl.create_default_context(cafile=self.environ.get("SSL_CERT_FILE") or None)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(self.host, self.port or 8006, timeout=self.timeout, context=context)

    def _send(self, method: str, path: str, params: Mapping[str, object], headers: dict[str, str]) -> Answer:
        body = urllib.parse.urlencode({k: str(v) for k, v in params.items()}) if params else ""
        target = self.base + path
        if method == "GET" and body:
            target, body = f"{target}?{body}", ""
        if body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection = self._connection()
        what = f"{method} {path}"
        try:
            connection.request(method, target, body=body or None, headers=headers)
            response = connection.getresponse()
            raw = response.read(ANSWER_LIMIT + 1)
        except TimeoutError:
            return Answer(False, reason=f"{what}: no answer within {self.timeout:g}s")
        except ssl.SSLError as error:
            return Answer(
                False,
                reason=f"{what}: TLS: {error.reason or error} (the site's proxmox.insecure, or "
                f"the CA in $SSL_CERT_FILE)",
            )
        except (OSError, http.client.HTTPException) as error:
            return Answer(False, reason=f"{what}: {type(error).__name__}: {error}")
        finally:
            connection.close()
        try:
            document = json.loads(raw[:ANSWER_LIMIT] or b"{}")
        except ValueError:
            document = {}
        if response.status != 200:
            message = (document.get("message") if isinstance(document, dict) else None) or response.reason
            errors = document.get("errors") if isinstance(document, dict) else None
            detail = f" ({', '.join(f'{k}: {v}' for k, v in errors.items())})" if isinstance(errors, dict) else ""
            return Answer(False, reason=f"{what}: HTTP {response.status}: {str(message).strip()}{detail}"[:400])
        return Answer(True, document.get("data") if isinstance(document, dict) else None)

    def _auth(self, write: bool) -> dict[str, str] | Answer:
        if self.credentials.token:
            return {"Authorization": f"PVEAPIToken={self.credentials.token}"}
        missing = self.credentials.missing
        if missing:
            return Answer(False, reason=missing)
        if self._ticket is None:
            answer = self._send(
                "POST",
                "/access/ticket",
                {"username": self.credentials.username or "", "password": self.credentials.password or ""},
                {},
            )
            if not answer.ok or not isinstance(answer.data, dict) or "ticket" not in answer.data:
                return Answer(
                    False, reason=f"logging in as {self.credentials.username}: {answer.reason or 'no ticket'}"
                )
            self._ticket = (answer.data["ticket"], answer.data.get("CSRFPreventionToken", ""))
        ticket, csrf = self._ticket
        headers = {"Cookie": f"PVEAuthCookie={ticket}"}  # as PVE issues it (no ; or blank in a ticket)
        if write:
            headers["CSRFPreventionToken"] = csrf
        return headers

    def call(self, method: str, path: str, **params: object) -> Answer:
        headers = self._auth(method != "GET")
        if isinstance(headers, Answer):
            return headers
        return self._send(method, path, params, headers)

    # ------------------------------------------------------------------------------------------------ guests
    def guests(self) -> list[Guest] | Answer:
        """Every guest of the Proxmox cluster, by vmid."""
        answer = self.call("GET", "/cluster/resources", type="vm")
        if not answer.ok:
            return answer
        found = []
        for item in answer.data or []:
            if isinstance(item, dict) and item.get("type") in KINDS and "vmid" in item:
                found.append(
                    Guest(
                        int(item["vmid"]),
                        str(item.get("node", "")),
                        item["type"],
                        str(item.get("name", "")),
                        str(item.get("status", "")),
                    )
                )
        return sorted(found, key=lambda guest: guest.vmid)

    def status(self, node: str, kind: str, vmid: int) -> Answer:
        """`data` is the guest's status (running, stopped)."""
        answer = self.call("GET", f"/nodes/{node}/{kind}/{vmid}/status/current")
        if not answer.ok:
            return answer
        return Answer(True, str((answer.data or {}).get("status", "")))

    def start(self, node: str, kind: str, vmid: int, deadline: float) -> Answer:
        """Starts the guest and waits for its task (until `deadline`, a time of `clock`)."""
        return self._task(node, self.call("POST", f"/nodes/{node}/{kind}/{vmid}/status/start"), deadline)

    def shutdown(self, node: str, kind: str, vmid: int, seconds: int, deadline: float, force_stop: bool) -> Answer:
        """A clean shutdown (ACPI for a VM, the container's init), given `seconds` by Proxmox; with `force_stop`,
        Proxmox stops the guest hard once they are over."""
        params: dict[str, object] = {"timeout": seconds}
        if force_stop:
            params["forceStop"] = 1
        return self._task(node, self.call("POST", f"/nodes/{node}/{kind}/{vmid}/status/shutdown", **params), deadline)

    def _task(self, node: str, started: Answer, deadline: float) -> Answer:
        """Waits for the task `started` answered (its UPID) to end; ok when it ended OK."""
        if not started.ok:
            return started
        upid = str(started.data or "")
        path = f"/nodes/{node}/tasks/{urllib.parse.quote(upid, safe='')}/status"
        while True:
            answer = self.call("GET", path)
            if answer.ok and isinstance(answer.data, dict) and answer.data.get("status") == "stopped":
                exit_status = str(answer.data.get("exitstatus", ""))
                return Answer(exit_status == "OK", upid, "" if exit_status == "OK" else f"task {upid}: {exit_status}")
            if self.clock() >= deadline:
                why = answer.reason if not answer.ok else "still running"
                return Answer(False, upid, f"task {upid}: not over in time ({why})")
            self.sleep(POLL)

    def wait_status(self, node: str, kind: str, vmid: int, wanted: str, deadline: float) -> Answer:
        """Polls the guest's status until it is `wanted`; `data` the last status read."""
        while True:
            answer = self.status(node, kind, vmid)
            if answer.ok and answer.data == wanted:
                return answer
            if self.clock() >= deadline:
                last = answer.data if answer.ok else answer.reason
                return Answer(False, answer.data, f"{kind} {vmid} on {node} is not {wanted} in time (last: {last})")
            self.sleep(POLL)


__all__ = ["Answer", "Credentials", "Guest", "ProxmoxApi"]
