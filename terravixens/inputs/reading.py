"""Reading a user's file: regular files only, a size cap, UTF-8 — never a hang on a FIFO or a read of /dev/zero."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from terravixens.inputs.problems import InputError, Problem


def _file_problem(message: str) -> list[Problem]:
    return [Problem("(file)", message)]


def _read_bytes(path: Path | str, limit: int, what: str) -> bytes:
    if str(path) == "-":
        return sys.stdin.buffer.read(limit + 1)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise InputError(path, _file_problem(f"cannot be read ({error.strerror}): check the path"), what) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(info.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(info.st_mode)
                else "a device"
                if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "not a file"
            )
            raise InputError(path, _file_problem(f"is {kind}, not a regular file: give the path of the {what}"), what)
        if info.st_size > limit:
            raise InputError(path, _too_big(info.st_size, limit, what), what)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise InputError(path, _file_problem(f"cannot be read ({error.strerror})"), what) from None
    finally:
        os.close(fd)


def _too_big(size: int | None, limit: int, what: str) -> list[Problem]:
    measured = f"is {size:,} bytes" if size is not None else "is larger than that"
    return _file_problem(f"{measured}, over the {limit:,}-byte limit for a {what}: check that this is the right file")


def read_text(path: Path | str, *, limit: int, what: str) -> str:
    """The file's text; every failure is an InputError with one located problem."""
    data = _read_bytes(path, limit, what)
    if len(data) > limit:
        raise InputError(path, _too_big(None, limit, what), what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(
            path,
            [
                Problem(
                    f"line {line}, column {column}",
                    (f"is not UTF-8 text (byte 0x{data[error.start]:02x}): save the file as UTF-8"),
                )
            ],
            what,
        ) from None


def private_mode_problem(path: Path | str, what: str) -> Problem | None:
    """A problem when the file is readable (or writable) by its group or others: it holds tokens (the secrets file,
    a node's environment file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # the strict reader reports it, with the reason
    if stat.S_ISREG(mode) and mode & 0o077:
        return Problem(
            "(file)",
            f"is accessible by group or others (mode {stat.S_IMODE(mode):04o}): it holds tokens; run: chmod 600 {path}",
        )
    return None
