"""The `terravixens spec serve` process: load, bind, serve, reload.

Starts only when every file is valid (exit 2 with every problem otherwise), and a TLS key only when others cannot
read it. Reloads on SIGHUP and when a watched file has changed and then stayed the same for one more poll (an editor
or a copy half done is never loaded). A reload that fails keeps the running specs but fails closed on tokens: a token
no longer in the secrets file (or every token, when the file is gone) stops opening anything, and /healthz answers
503 "stale" until a reload succeeds. A reload that lowers an identity's protection is logged as a warning, on the
log and on stderr (docs/adr/0046-spec-transport-hardening.md).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from terravixens.config.loader import SiteError
from terravixens.exitcodes import ExitCode
from terravixens.inputs import InputError, private_mode_problem
from terravixens.specserver.app import MAX_HEADER_BYTES, Bundle, create_app
from terravixens.specserver.logs import JsonLog, route_uvicorn_logs
from terravixens.specserver.protocol import bounded_protocol
from terravixens.specserver.specset import Sources, SpecSet, build, fail_closed
from terravixens.standalone.catalog import CatalogError


@dataclass(frozen=True)
class ServeOptions:
    site: Path
    secrets: Path
    host: str = "127.0.0.1"
    port: int = 8443
    tls_cert: Path | None = None
    tls_key: Path | None = None
    watch_interval: float = 2.0
    header_timeout: float = 10.0
    keep_alive: int = 5
    max_connections: int = 1000
    max_connections_per_client: int = 16


def _problems(error: Exception) -> list[str]:
    return str(error).splitlines()


class Reloader:
    """Holds the current snapshot; `reload` builds a new one off the event loop and swaps it in only if valid."""

    def __init__(self, sources: Sources, log: JsonLog, first: SpecSet, specs_dir: Path):
        self.sources, self.log = sources, log
        self.current, self.specs_dir = first, specs_dir
        self.seen = sources.fingerprint(specs_dir)
        self.lock = asyncio.Lock()

    async def reload(self, reason: str) -> None:
        async with self.lock:
            seen = self.sources.fingerprint(self.specs_dir)
            try:
                snapshot, specs_dir = await asyncio.to_thread(build, self.sources, self.current.generation + 1)
            except (SiteError, CatalogError, InputError) as error:
                problems = _problems(error)
                self.seen = seen
                before = len(self.current.tokens)
                self.current = fail_closed(self.current, self.sources, problems[0][:200] if problems else "invalid")
                self.log.event(
                    "reload_failed",
                    level="error",
                    reason=reason,
                    kept_generation=self.current.generation,
                    revoked_tokens=before - len(self.current.tokens),
                    problems=problems,
                )
                return
            for lowered in self.current.lowered(snapshot):
                self.log.event("posture_lowered", level="warning", generation=snapshot.generation, **lowered)
                print(
                    f"spec serve: WARNING {lowered['identity']} is now served under {lowered['to']} "
                    f"(was {lowered['from']})",
                    file=sys.stderr,
                )
            self.current, self.specs_dir, self.seen = snapshot, specs_dir, seen
            self.log.event("reloaded", reason=reason, generation=snapshot.generation, specs=len(snapshot.entries))

    async def watch(self, interval: float) -> None:
        """Reloads when the files changed and then held still for one poll: a file being written (an editor's
        save, a copy, a `git pull`) is read only once it is whole."""
        changed: tuple[tuple[object, ...], ...] | None = None
        while True:
            await asyncio.sleep(interval)
            now = self.sources.fingerprint(self.specs_dir)
            if now == self.seen:
                changed = None
            elif now != changed:
                changed = now  # changed since the last poll: wait for it to hold still
            else:
                changed = None
                await self.reload("file_change")


def _tls(options: ServeOptions) -> dict[str, Any]:
    if options.tls_cert is None:
        return {}
    return {
        "ssl_certfile": str(options.tls_cert),
        "ssl_keyfile": str(options.tls_key),
        "ssl_version": ssl.PROTOCOL_TLS_SERVER,
    }


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


async def _serve(
    options: ServeOptions, reloader: Reloader, log: JsonLog, sock: socket.socket, bundle: Bundle
) -> list[int]:
    """Serves until a stop; returns the signals that stopped it."""
    protocol = bounded_protocol(
        options.header_timeout,
        MAX_HEADER_BYTES,
        lambda reason, client: log.event(reason, client=client),
        options.max_connections_per_client,
    )
    config = uvicorn.Config(
        create_app(lambda: reloader.current, log, bundle),
        http=protocol,
        lifespan="off",
        log_config=None,
        access_log=False,
        # proxy_headers off: uvicorn would otherwise believe X-Forwarded-For from loopback, and log a forged client.
        timeout_keep_alive=options.keep_alive,
        proxy_headers=False,
        limit_concurrency=options.max_connections,
        server_header=False,
        date_header=True,
        **_tls(options),
    )
    host, port = sock.getsockname()[:2]

    def listening() -> None:
        log.event(
            "listening",
            address=host,
            port=port,
            tls=options.tls_cert is not None,
            generation=reloader.current.generation,
            specs=len(reloader.current.entries),
            agent_sha256=bundle.sha256,
        )

    server = _Server(config, listening)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(reloader.reload("sighup")))
    watcher = asyncio.ensure_future(reloader.watch(options.watch_interval)) if options.watch_interval > 0 else None
    try:
        await server.serve(sockets=[sock])
    finally:
        if watcher is not None:
            watcher.cancel()
        log.event("stopped")
    return server.stopped_by


class _Server(uvicorn.Server):
    """uvicorn's server, which says it listens once its startup is done (ready for requests, its SIGINT and SIGTERM
    handlers in place: uvicorn installs them as serve() begins), and remembers the signals that stopped it."""

    def __init__(self, config: uvicorn.Config, listening: Callable[[], None]):
        super().__init__(config)
        self._listening = listening
        self.stopped_by: list[int] = []

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._listening()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopped_by.append(sig)
        super().handle_exit(sig, frame)


def serve(options: ServeOptions, log: JsonLog | None = None) -> int:
    log = log or JsonLog(sys.stdout)
    if (options.tls_cert is None) != (options.tls_key is None):
        print("spec serve: give both --tls-cert and --tls-key, or neither", file=sys.stderr)
        return ExitCode.BAD_INPUT
    sources = Sources(options.site, options.secrets)
    try:
        first, specs_dir = build(sources, 1)
    except (SiteError, CatalogError, InputError) as error:
        print(error, file=sys.stderr)
        return ExitCode.BAD_INPUT
    if options.tls_key is not None:
        problem = private_mode_problem(options.tls_key, "TLS key")
        if problem is not None:
            print(
                f"spec serve: {options.tls_key}: {problem.message.replace('tokens', 'a private key')}", file=sys.stderr
            )
            return ExitCode.BAD_INPUT
    if options.tls_cert is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(options.tls_cert, options.tls_key)
        except (OSError, ssl.SSLError) as error:
            print(
                f"spec serve: cannot use the TLS certificate/key ({error}): give PEM files that match", file=sys.stderr
            )
            return ExitCode.BAD_INPUT
    try:
        sock = _bind(options.host, options.port)
    except OSError as error:
        print(f"spec serve: cannot listen on {options.host}:{options.port} ({error.strerror})", file=sys.stderr)
        return ExitCode.BAD_INPUT
    from terravixens.agent.bundle import BundleError, built

    try:
        data, sha256 = built()
    except BundleError as error:
        sock.close()
        print(f"spec serve: cannot build the agent bundle: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    route_uvicorn_logs(log)
    stopped_by = asyncio.run(_serve(options, Reloader(sources, log, first, specs_dir), log, sock, Bundle(data, sha256)))
    if signal.SIGINT in stopped_by:
        # uvicorn stops gracefully on SIGINT, then raises it again for the handler it found; a SIGINT the process
        # inherited as ignored (started with `&` by a script, or by a test runner) ends nothing then: Ctrl-C is
        # Ctrl-C whatever the parent did (130 and its line, cli.main).
        raise KeyboardInterrupt
    return ExitCode.OK
