"""uvicorn's httptools protocol with two bounds uvicorn lacks: a deadline for a request's headers, and their size.

- Deadline: uvicorn times out idle keep-alive connections, but not a client that opens a connection and trickles
  its headers a byte at a time (slowloris): nothing would ever close it. Here each request must have its headers
  in within `header_timeout` seconds of the connection opening (or of the previous response); data arriving does
  not extend it. Expiry answers 408 and closes.
- Size: httptools buffers a header until it is complete, with no limit. Here the bytes received while a request's
  headers are incomplete are counted, and past `max_header_bytes` the answer is 431 and the connection closes —
  before the parser sees them. (A body arriving in the same read counts too: bodies are refused anyway.)
- Connections per client: uvicorn's `limit_concurrency` counts everyone together, so one client holding many
  half-open connections denied every node. Here one client address may hold `max_per_client` connections; one more
  is answered 503 and closed at once, before it costs a parser or a header deadline.

httptools rather than h11: the C parser (llhttp) takes about a third off the server's CPU time per request
(benchmarks/spec_server_load.py, alternating runs: 0.51–0.60 ms with h11, 0.34–0.38 ms with this protocol).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
TOO_MANY_CONNECTIONS = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
HEADERS_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class BoundedProtocol(HttpToolsProtocol):
    header_timeout: float = 10.0
    max_header_bytes: int = 8 * 1024
    max_per_client: int = 16
    on_refused = staticmethod(lambda reason, client: None)
    # Open connections per client address, shared by every connection of one server (set by bounded_protocol).
    open_by_client: ClassVar[dict[str, int]] = {}

    # uvicorn narrows asyncio's BaseTransport to Transport here and ignores the override error itself: the same.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        self._awaiting_headers = True
        self._header_bytes = 0
        self._counted: str | None = None
        super().connection_made(transport)
        address = self.client[0] if self.client else "?"
        if self.open_by_client.get(address, 0) >= self.max_per_client:
            self._refuse("too_many_connections", TOO_MANY_CONNECTIONS)
            return
        self.open_by_client[address] = self.open_by_client.get(address, 0) + 1
        self._counted = address
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._awaiting_headers:
            self._header_bytes += len(data)
            if self._header_bytes > self.max_header_bytes:
                self._refuse("headers_too_large", HEADERS_TOO_LARGE)
                return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_bytes = 0
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # a queued request already has its headers
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._awaiting_headers = True
            self._header_bytes = 0
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._counted is not None:
            left = self.open_by_client.get(self._counted, 1) - 1
            if left > 0:
                self.open_by_client[self._counted] = left
            else:
                self.open_by_client.pop(self._counted, None)
            self._counted = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        # uvicorn declares `cycle` as always set, but it is None until a request's headers have been read.
        cycle: RequestResponseCycle | None = self.cycle
        if self._awaiting_headers and (cycle is None or cycle.response_complete):
            self._refuse("header_timeout", REQUEST_TIMEOUT)

    def _refuse(self, reason: str, response: bytes) -> None:
        if self.transport.is_closing():
            return
        self.on_refused(reason, self.client[0] if self.client else None)
        self._disarm()
        self.transport.write(response)
        self.transport.close()


def bounded_protocol(
    header_timeout: float,
    max_header_bytes: int,
    on_refused: Callable[[str, str | None], None],
    max_per_client: int = 16,
) -> type[BoundedProtocol]:
    return type(
        "BoundedProtocol",
        (BoundedProtocol,),
        {
            "header_timeout": header_timeout,
            "max_header_bytes": max_header_bytes,
            "on_refused": staticmethod(on_refused),
            "max_per_client": max_per_client,
            "open_by_client": {},
        },
    )
