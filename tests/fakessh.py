"""A fake Proxmox VE node's SSH side, for bpg/proxmox's snippet uploads (loopback only, test-only).

bpg uploads `snippets` files over SSH, not through the API: it probes for sudo (`id -u`), streams the file into
`try_sudo /usr/bin/tee <datastore path>/snippets/<file>`, then checks its size and sets its mode over SFTP. Then it
reads the file back through the API's storage content listing. `FakeSsh` answers exactly that: the two commands
(anything else fails loudly, so a new bpg behaviour shows up as a test failure, not as a silent pass), an SFTP
subsystem rooted in a folder of its own, and each uploaded file registered as a `snippets` volume of the fake API
(`register(storage, file_name, size)`, run inside fakepve's loop). Uploaded files stay readable for the tests
(`read(path)`): that is how a test sees the cloud-init vendor data and hookscripts a node would get.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Self

import asyncssh

TEE = re.compile(r"try_sudo /usr/bin/tee (?P<path>/[A-Za-z0-9._/-]+)'?$")
SUDO_PROBE = 'if [ "$(id -u)" = "0" ]'


class LoopbackSshServer:
    """An asyncssh server on its own event-loop thread, on a loopback address only; subclasses say what it accepts
    and answers (`_listen`). `start` picks a free port (`port` 0), `stop` ends the server, the loop and the thread."""

    what = "the fake SSH server"

    def __init__(self, host: str):
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"{self.what} must listen on loopback, not {host}")
        self.host = host
        self.port = 0
        self.commands: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncssh.SSHAcceptor | None = None

    def start(self) -> Self:
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(timeout=30)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            asyncio.run_coroutine_threadsafe(self.server.wait_closed(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    async def _listen(self) -> asyncssh.SSHAcceptor:
        raise NotImplementedError


class FakeSsh(LoopbackSshServer):
    """An SSH server on `host:port` (0: a free port) that accepts `user`/`password`; files go under `root`."""

    def __init__(
        self,
        host: str,
        root: Path,
        register: Callable[[str, int], None],
        user: str = "root",
        password: str = "secret",
        storage_path: str = "/var/lib/vz",
    ):
        super().__init__(host)
        self.root, self.register = root, register
        self.user, self.password, self.storage_path = user, password, storage_path

    def start(self) -> FakeSsh:
        self.root.mkdir(parents=True, exist_ok=True)
        return super().start()

    def local(self, remote: str) -> Path:
        return self.root / remote.lstrip("/")

    def read(self, remote: str) -> str:
        return self.local(remote).read_text()

    async def _listen(self):
        fake = self

        class Server(asyncssh.SSHServer):
            def begin_auth(self, username: str) -> bool:
                return True

            def password_auth_supported(self) -> bool:
                return True

            def validate_password(self, username: str, password: str) -> bool:
                return username == fake.user and password == fake.password

        return await asyncssh.create_server(
            Server,
            self.host,
            self.port,
            server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")],
            process_factory=self._process,
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(self.root)),
            allow_scp=False,
        )

    async def _process(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command or ""
        self.commands.append(command)
        if SUDO_PROBE in command:
            process.stdout.write("0\n")  # root: no sudo needed
            process.exit(0)
            return
        match = TEE.search(command.strip())
        if match and match.group("path").startswith(f"{self.storage_path}/snippets/"):
            data = await process.stdin.read()
            data = data.encode() if isinstance(data, str) else data
            target = self.local(match.group("path"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            self.register(target.name, len(data))
            process.exit(0)
            return
        process.stderr.write(f"fake ssh: command not modelled: {command[:200]}\n")
        process.exit(127)
