"""JSON-lines logs: one object per line, to a stream. Nothing a client sent is logged verbatim except a validated
identity and a bounded method name, so neither a token (in a header, a path or a query) nor junk reaches the log."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from typing import IO

METHOD = re.compile(r"^[A-Z]{1,10}$")


class JsonLog:
    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream or sys.stdout
        self.lock = threading.Lock()
        self._second, self._stamp = -1, ""

    def _timestamp(self) -> str:
        now = time.time()
        second = int(now)
        if second != self._second:  # strftime once per second, not once per request
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int(now * 1000) % 1000:03d}Z"

    def event(self, event: str, **fields: object) -> None:
        record = {"ts": self._timestamp(), "event": event, **fields}
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        with self.lock:
            self.stream.write(line)
            self.stream.flush()


def safe_method(method: str) -> str:
    return method if METHOD.match(method) else "(other)"


class _UvicornToJson(logging.Handler):
    """uvicorn's own messages (invalid requests, concurrency limit, startup) as JSON lines, message text only."""

    def __init__(self, log: JsonLog):
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        fields = {"level": record.levelname.lower(), "message": record.getMessage()[:300]}
        if record.exc_info and record.exc_info[0] is not None:
            fields["exception"] = record.exc_info[0].__name__  # the type only: a traceback may hold request data
        self.log.event("server", **fields)


def route_uvicorn_logs(log: JsonLog) -> None:
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers = [_UvicornToJson(log)]
        logger.setLevel(logging.INFO)
        logger.propagate = False
    access = logging.getLogger("uvicorn.access")
    access.handlers = []
    access.propagate = False
    access.disabled = True
