"""uvicorn's h11 protocol with a deadline for the request line and headers.

uvicorn times out idle keep-alive connections, but not a client that opens a connection and trickles its headers a
byte at a time (slowloris): each byte re-arms nothing and the connection lives forever. Here every request must
have its headers in within `header_timeout` seconds of the connection opening (or of the previous response);
data arriving does not extend it. The size of the headers is bounded by h11 (`h11_max_incomplete_event_size`).
"""
from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderDeadlineProtocol(H11Protocol):
    header_timeout: float = 10.0
    on_timeout = staticmethod(lambda client: None)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._deadline is not None and self.conn.their_state is not h11.IDLE:
            self._disarm()  # the request line and headers are in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
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
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.on_timeout(self.client[0] if self.client else None)
            # h11 cannot answer a request it has not parsed: the 408 is written as bytes, then the connection closed.
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            self.transport.close()


def with_header_timeout(seconds: float, on_timeout) -> type[HeaderDeadlineProtocol]:
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,),
                {"header_timeout": seconds, "on_timeout": staticmethod(on_timeout)})
