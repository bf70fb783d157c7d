"""The node the agent converges: a root folder and the managers it calls, every call through the bounded runner.

On a guest the root is `/` and the managers are the system's own (`apt-get`, `dpkg-query`, `systemctl`, `useradd`,
`usermod`, `hostname`, `ssh-keygen`), found in the system's PATH. Anything else — a test's throwaway root — must name
a folder of stand-ins (`--tools`): the system's managers act on `/` whatever root the agent was given, so a root
without its own tools is refused rather than half-applied to the machine it runs on.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from terravixens.runner import Ran, run

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ROOT_ENV, TOOLS_ENV = "TERRAVIXENS_AGENT_ROOT", "TERRAVIXENS_AGENT_TOOLS"
# apt-get install on a slow mirror takes minutes; a status query seconds.
INSTALL_TIMEOUT, CALL_TIMEOUT = 1800.0, 120.0


class Unusable(Exception):
    """The root or tools cannot be used: nothing is done."""


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
        """A node path (`/etc/hostname`) inside the root."""
        return self.root / absolute.lstrip("/")

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

    def read(self, absolute: str) -> str | None:
        try:
            return self.path(absolute).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def mode(self, absolute: str) -> int | None:
        try:
            return self.path(absolute).stat().st_mode & 0o7777
        except FileNotFoundError:
            return None

    def write(self, absolute: str, text: str, mode: int, owner: tuple[int, int] | None = None) -> None:
        """Atomically: a temp file in the same folder with its final mode from creation, then a rename."""
        target = self.path(absolute)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, mode)
            if owner is not None and os.geteuid() == 0:
                os.fchown(fd, *owner)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def remove(self, absolute: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(absolute).unlink()

    def directory(self, absolute: str, mode: int, owner: tuple[int, int] | None = None) -> None:
        folder = self.path(absolute)
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, mode)
        if owner is not None and os.geteuid() == 0:
            os.chown(folder, *owner)


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str
    shell: str


def accounts(node: Node) -> dict[str, Account]:
    """/etc/passwd under the root (name:x:uid:gid:gecos:home:shell)."""
    found = {}
    for line in (node.read("/etc/passwd") or "").splitlines():
        parts = line.split(":")
        if len(parts) == 7 and parts[2].isdigit() and parts[3].isdigit():
            found[parts[0]] = Account(parts[0], int(parts[2]), int(parts[3]), parts[5], parts[6])
    return found


def memberships(node: Node) -> dict[str, set[str]]:
    """/etc/group under the root (name:x:gid:members): each user's supplementary groups."""
    groups: dict[str, set[str]] = {}
    for line in (node.read("/etc/group") or "").splitlines():
        parts = line.split(":")
        if len(parts) == 4:
            for member in filter(None, parts[3].split(",")):
                groups.setdefault(member, set()).add(parts[0])
    return groups
