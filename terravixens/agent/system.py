"""The node the agent converges: a root folder and the managers it calls, every call through the bounded runner.

On a guest the root is `/` and the managers are the system's own (`apt-get`, `dpkg-query`, `systemctl`, `useradd`,
`usermod`, `hostname`, `ssh-keygen`), found in the system's PATH. Anything else — a test's throwaway root — must name
a folder of stand-ins (`--tools`): the system's managers act on `/` whatever root the agent was given, so a root
without its own tools is refused rather than half-applied to the machine it runs on.

The agent follows no link it did not make (ADR 0052). Every node path is walked from the root one folder at a time,
each opened with O_NOFOLLOW from the folder before it (openat), so a link anywhere on the way — a user's `~/.ssh ->
/etc`, a home that is itself a link, `/etc/sudoers.d -> …` — is refused in one line naming it (`Refused`), never
followed, and nothing escapes the root. Files are read only when they are regular files (a FIFO or /dev/zero behind
a name cannot hang or exhaust the agent), of bounded size, and, in a folder another user can write, with one name
only (no hard link to someone else's file). Writes go to a new temporary file in the folder already opened (created
with O_EXCL|O_NOFOLLOW, its mode and owner set on the open file: fchmod, fchown), then renamed over the target
within that folder; a folder's mode and owner are set on the opened folder. `.` and `..` are never walked.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from terravixens.runner import Ran, run

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ROOT_ENV, TOOLS_ENV = "TERRAVIXENS_AGENT_ROOT", "TERRAVIXENS_AGENT_TOOLS"
# apt-get install on a slow mirror takes minutes; a status query seconds.
INSTALL_TIMEOUT, CALL_TIMEOUT = 1800.0, 120.0
# The largest file the agent reads (passwd, group, authorized_keys, units…): a bigger one is refused, not read.
READ_LIMIT = 4 * 1024 * 1024
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused right after, as not a regular file).
FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Unusable(Exception):
    """The root or tools cannot be used: nothing is done."""


class Refused(Exception):
    """A node path the agent will not use — a link it did not make, something else where a folder or a regular file
    should be, a `..`: one line naming it (its section fails, the others run)."""


def node_parts(absolute: str) -> list[str]:
    """`/home/ops/.ssh` -> ['home', 'ops', '.ssh']; a relative path, `.` or `..` is refused."""
    parts = [part for part in absolute.split("/") if part]
    if not absolute.startswith("/") or not parts or any(part in (".", "..") for part in parts):
        raise Refused(f"{absolute!r} is not an absolute node path without '.' or '..': the agent walks no other")
    return parts


def _shown(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a regular file" if stat.S_ISREG(mode) else "not a file"


def _not(parts: list[str], found: str, wanted: str) -> Refused:
    if found == "a symbolic link":
        fix = f"the agent follows no link it did not make; replace it with a real {wanted} (or remove it)"
    else:
        fix = f"move it away; the agent makes the {wanted} itself"
    return Refused(f"{_shown(parts)} is {found}, not a {wanted}: {fix}")


def _lstat_kind(name: str, folder: int) -> str:
    try:
        return _kind(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return "not a folder"


def _bounded(fd: int) -> bytes | None:
    """The rest of the file, or None when it holds more than READ_LIMIT bytes (a file can grow after fstat)."""
    chunks: list[bytes] = []
    size = 0
    while size <= READ_LIMIT:
        chunk = os.read(fd, min(1 << 16, READ_LIMIT + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return None


def _trusted(folder: int) -> bool:
    """A folder only the agent's own user (root on a node) can write: no one else can have put a name in it."""
    info = os.fstat(folder)
    return info.st_uid == os.geteuid() and not info.st_mode & 0o022


@dataclass
class Node:
    root: Path
    tools: Path | None = None
    calls: list[tuple[str, ...]] = field(default_factory=list)

    @classmethod
    def at(cls, root: str | None, tools: str | None) -> Node:
        root_path = Path(root or os.environ.get(ROOT_ENV) or "/").resolve()
        tools_text = tools or os.environ.get(TOOLS_ENV)
        tools_path = Path(tools_text).resolve() if tools_text else None
        if not root_path.is_dir():
            raise Unusable(f"root {root_path} is not a folder")
        if root_path != Path("/") and tools_path is None:
            raise Unusable(
                f"root {root_path} is not / and no --tools folder is given: the system's managers act on /, not on "
                f"{root_path}; give a folder of stand-ins (--tools DIR)"
            )
        if tools_path is not None and not tools_path.is_dir():
            raise Unusable(f"tools folder {tools_path} is not a folder")
        return cls(root_path, tools_path)

    def path(self, absolute: str) -> Path:
        """A node path (`/etc/hostname`) inside the root: for the managers and spec get's reader only; the agent's
        own reads and writes go through the no-follow walk below."""
        return self.root.joinpath(*node_parts(absolute))

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": f"{self.tools}:{SYSTEM_PATH}" if self.tools else SYSTEM_PATH,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "DEBIAN_FRONTEND": "noninteractive",
        }
        if self.tools is not None:
            env[ROOT_ENV] = str(self.root)  # the stand-ins keep their state under the root
        return env

    def call(self, *argv: str, timeout: float = CALL_TIMEOUT) -> Ran:
        self.calls.append(tuple(argv))
        program = argv[0]
        if self.tools is not None:
            # Only stand-ins when a tools folder is given: a missing one is a failure, never the system's own.
            program = str(self.tools / argv[0])
        return run([program, *argv[1:]], timeout=timeout, env=self.environment(), label=argv[0])

    # ------------------------------------------------------------------------------------------------ the walk
    @contextlib.contextmanager
    def _folder(self, parts: list[str], create: int | None = None) -> Iterator[int | None]:
        """The folder `parts` under the root, opened component by component without following a link: its fd, or
        None when a component is missing (with `create`, a missing one is made with that mode)."""
        fd = os.open(self.root, FOLDER)
        try:
            for depth, part in enumerate(parts):
                try:
                    child = os.open(part, FOLDER, dir_fd=fd)
                except FileNotFoundError:
                    if create is None:
                        yield None
                        return
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, create, dir_fd=fd)
                    child = self._open_folder(part, fd, parts[: depth + 1])
                except OSError as error:
                    if error.errno in (errno.ENOTDIR, errno.ELOOP):
                        raise _not(parts[: depth + 1], _lstat_kind(part, fd), "folder") from None
                    raise
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _open_folder(name: str, parent: int, parts: list[str]) -> int:
        try:
            return os.open(name, FOLDER, dir_fd=parent)
        except OSError as error:
            if error.errno in (errno.ENOTDIR, errno.ELOOP):
                raise _not(parts, _lstat_kind(name, parent), "folder") from None
            raise

    def read(self, absolute: str) -> str | None:
        """The file's text (bytes that are not UTF-8 kept as surrogates: compared, never decoded wrong), or None when
        it (or a folder on its way) does not exist."""
        parts = node_parts(absolute)
        with self._folder(parts[:-1]) as folder:
            if folder is None:
                return None
            try:
                fd = os.open(parts[-1], FILE, dir_fd=folder)
            except FileNotFoundError:
                return None
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                    raise _not(parts, _lstat_kind(parts[-1], folder), "regular file") from None
                raise
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise _not(parts, _kind(info.st_mode), "regular file")
                if info.st_nlink > 1 and not _trusted(folder):
                    raise Refused(
                        f"{absolute} has {info.st_nlink} names (hard links) in a folder others can write: the agent "
                        f"reads no file it cannot tell is this one; remove it"
                    )
                data = _bounded(fd) if info.st_size <= READ_LIMIT else None
                if data is None:
                    raise Refused(f"{absolute} is larger than {READ_LIMIT:,} bytes: the agent reads none that large")
                return data.decode("utf-8", "surrogateescape")
            finally:
                os.close(fd)

    def mode(self, absolute: str) -> int | None:
        parts = node_parts(absolute)
        with self._folder(parts[:-1]) as folder:
            if folder is None:
                return None
            try:
                info = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                return None
            if stat.S_ISLNK(info.st_mode):
                raise Refused(f"{absolute} is a symbolic link: the agent follows no link it did not make; remove it")
            return info.st_mode & 0o7777

    def names(self, absolute: str) -> list[str]:
        """The names in a folder (none when it does not exist), sorted."""
        with self._folder(node_parts(absolute)) as folder:
            return sorted(os.listdir(folder)) if folder is not None else []

    def write(self, absolute: str, text: str | bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
        """Atomically: a new file beside the target (O_EXCL|O_NOFOLLOW, its final mode and owner from the start),
        then a rename within the folder already opened. Missing folders on the way are made (0700 for a private
        file, else 0755); a link anywhere on the way, or at the target, is refused."""
        parts = node_parts(absolute)
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
        with self._folder(parts[:-1], create=0o700 if not mode & 0o077 else 0o755) as folder:
            if folder is None:  # not reached: with `create` the walk makes every missing folder
                raise Refused(f"{_shown(parts[:-1])} could not be made")
            name = parts[-1]
            with contextlib.suppress(FileNotFoundError):
                found = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
                if not stat.S_ISREG(found):
                    raise _not(parts, _kind(found), "regular file")
            temporary = f".{name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temporary, NEW_FILE, 0o600, dir_fd=folder)
            try:
                try:
                    os.fchmod(fd, mode)
                    if owner is not None and os.geteuid() == 0:
                        os.fchown(fd, *owner)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)
                raise
            os.fsync(folder)

    def remove(self, absolute: str) -> None:
        """The name only (unlink never follows a link); nothing when it, or a folder on its way, is not there."""
        parts = node_parts(absolute)
        with self._folder(parts[:-1]) as folder:
            if folder is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(parts[-1], dir_fd=folder)

    def directory(self, absolute: str, mode: int, owner: tuple[int, int] | None = None) -> None:
        """The folder itself (its parent must exist), made if missing; mode and owner set on the opened folder."""
        parts = node_parts(absolute)
        with self._folder(parts[:-1]) as parent:
            if parent is None:
                raise Refused(f"{_shown(parts[:-1])} does not exist: the agent makes {absolute} in it, not it")
            with contextlib.suppress(FileExistsError):
                os.mkdir(parts[-1], mode, dir_fd=parent)
            fd = self._open_folder(parts[-1], parent, parts)
            try:
                os.fchmod(fd, mode)
                if owner is not None and os.geteuid() == 0:
                    os.fchown(fd, *owner)
            finally:
                os.close(fd)
