"""The spec server's Starlette application.

    GET /spec/{identity}   the identity's resolved spec (JSON), by the table in auth.py
    GET /agent.pyz         the agent bundle a VM's first boot runs (ADR 0059): the credentials that open a spec open
                           it (auth.decide_bundle); its SHA-256 in `x-terravixens-agent-sha256`
    GET /healthz           {"status": "ok", "generation": n, "specs": count} — no identity is listed; 503 with
                           {"status": "stale", "reload": "failed", …} while the last reload failed (the server then
                           serves the last good specs with every revoked token refused)

Every request passes `Limits` first: headers over 8 KiB or 64 fields get 431 (protocol.py already cut off a
connection sending more than 8 KiB before its headers end); a request carrying a body (none is accepted) gets 413
and the connection is closed without reading it; a path with percent-encoding or an identity that is not a DNS label
gets 400 before any lookup. Every response is logged as one JSON line (logs.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from terravixens.specserver.auth import decide, decide_bundle
from terravixens.specserver.logs import JsonLog, safe_method
from terravixens.specserver.specset import SpecSet

IDENTITY = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
SPEC_PREFIX = "/spec/"
MAX_HEADER_BYTES = 8 * 1024
MAX_HEADER_FIELDS = 64
ERRORS = {
    431: "request headers too large",
    400: "bad request: the identity is a DNS label (a-z, 0-9, '-')",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    413: "request bodies are not accepted",
}
HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff"}


def _json(status: int, body: bytes, extra: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type="application/json", headers={**HEADERS, **(extra or {})})


def _error(status: int, extra: dict[str, str] | None = None) -> Response:
    return _json(status, json.dumps({"error": ERRORS[status]}).encode(), extra)


def _note(request: Request, **fields: object) -> None:
    """What the access log adds about this request (set by the endpoint, read by Limits when the response goes)."""
    request.scope.setdefault("terravixens.log", {}).update(fields)


@dataclass(frozen=True)
class Bundle:
    """The agent bundle served at GET /agent.pyz and its SHA-256 (hex)."""

    data: bytes
    sha256: str


def create_app(current: Callable[[], SpecSet], log: JsonLog, bundle: Bundle | None = None) -> ASGIApp:
    async def spec(request: Request) -> Response:
        identity = request.path_params["identity"]
        if not IDENTITY.match(identity):
            _note(request, route="/spec/{identity}")
            return _error(400)
        specs = current()
        entry = specs.entries.get(identity)
        principal = specs.tokens.identify(request.headers.getlist("authorization"), identity)
        status = decide(entry.auth if entry else None, identity, principal)
        # An unknown identity is not logged: a client that put its token where the identity goes must not leak it.
        _note(
            request,
            route="/spec/{identity}",
            identity=identity if entry else None,
            principal=str(principal),
            generation=specs.generation,
        )
        if status == 200 and entry is not None:  # decide() answers 200 only for a known identity
            return _json(200, entry.body)
        if status == 401:
            error = ', error="invalid_token"' if principal.kind == "invalid" else ""
            return _error(401, {"www-authenticate": f'Bearer realm="terravixens"{error}'})
        return _error(status)

    async def agent(request: Request) -> Response:
        specs = current()
        principal = specs.tokens.holder(request.headers.getlist("authorization"))
        any_open = any(entry.auth == "network" for entry in specs.entries.values())
        status = decide_bundle(principal, any_open) if bundle is not None else 404
        _note(request, route="/agent.pyz", principal=str(principal), generation=specs.generation)
        if status == 200 and bundle is not None:
            return Response(
                bundle.data,
                status_code=200,
                media_type="application/zip",
                headers={**HEADERS, "x-terravixens-agent-sha256": bundle.sha256},
            )
        if status == 401:
            error = ', error="invalid_token"' if principal.kind == "invalid" else ""
            return _error(401, {"www-authenticate": f'Bearer realm="terravixens"{error}'})
        return _error(status)

    async def healthz(request: Request) -> Response:
        specs = current()
        _note(request, route="/healthz")
        if specs.stale is not None:
            body = {"status": "stale", "reload": "failed", "generation": specs.generation, "specs": len(specs.entries)}
            return _json(503, json.dumps(body).encode())
        return _json(
            200, json.dumps({"status": "ok", "generation": specs.generation, "specs": len(specs.entries)}).encode()
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return _error(405, {"allow": "GET, HEAD"})

    app = Starlette(
        routes=[
            Route("/spec/{identity}", spec, methods=["GET"]),
            Route("/agent.pyz", agent, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        exception_handlers={404: not_found, 405: not_allowed},
    )
    app.router.redirect_slashes = False  # a redirect would send the client (and its token) to a URL it did not ask for
    return Limits(app, log)


class Limits:
    """Pure ASGI middleware: refuse bodies and encoded paths before routing; log every response as one JSON line."""

    def __init__(self, app: ASGIApp, log: JsonLog):
        self.app, self.log = app, log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        outcome = {"status": 500, "bytes": 0}

        async def logged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                outcome["status"] = message["status"]
            elif message["type"] == "http.response.body":
                outcome["bytes"] += len(message.get("body", b""))
            await send(message)

        size, fields, has_body = len(scope.get("raw_path", b"")) + len(scope.get("query_string", b"")), 0, False
        for name, value in scope["headers"]:
            size += len(name) + len(value)
            fields += 1
            if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
                has_body = True
        try:
            if size > MAX_HEADER_BYTES or fields > MAX_HEADER_FIELDS:
                await _error(431, {"connection": "close"})(scope, receive, logged_send)
            elif has_body:
                await _error(413, {"connection": "close"})(scope, receive, logged_send)
            elif b"%" in scope.get("raw_path", b"") or (
                scope["path"].startswith(SPEC_PREFIX) and not scope["path"].isascii()
            ):
                await _error(400)(scope, receive, logged_send)
            else:
                await self.app(scope, receive, logged_send)
        finally:
            noted = scope.get("terravixens.log", {})
            self.log.event(
                "access",
                client=(scope.get("client") or ("?",))[0],
                method=safe_method(scope["method"]),
                route=noted.pop("route", None),
                **noted,
                status=outcome["status"],
                bytes=outcome["bytes"],
                ms=round(1000 * (time.perf_counter() - started), 2),
            )
