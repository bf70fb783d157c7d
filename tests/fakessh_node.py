"""A fake standalone node's SSH side, for `terravixens spec push|handoff` (loopback only, test-only).

It accepts one client key (public key auth, as the driver's `ssh -o BatchMode=yes` needs) and answers exactly the
driver's commands (terravixens.operations.spec_push): INSTALL stores the base64 bundle at the node's
/usr/local/lib/terravixens/agent.pyz, and `PYTHONPATH=<bundle> python3 -m terravixens.agent …` runs that bundle —
with `python3 -S` (no site-packages: a bare guest) and the node's "/" being a throwaway root with stand-ins for its
managers (TERRAVIXENS_AGENT_ROOT / _TOOLS, tests/agent_support.py). Anything else exits 127, loudly.
What a real node adds: a login shell, sshd's own environment, the real managers acting on its own root.
"""

from __future__ import annotations

import asyncio
import base64
import re
import shlex
import sys
from pathlib import Path

import asyncssh

from terravixens.agent.units import BUNDLE
from terravixens.operations.spec_push import AGENT, INSTALL
from tests.fakessh import LoopbackSshServer

AGENT_COMMAND = re.compile(rf"^{re.escape(AGENT)} (?P<args>(converge|run)( [a-z0-9/._-]+| -)*)$")


class FakeNode(LoopbackSshServer):
    what = "the fake node"

    def __init__(self, host: str, root: Path, tools: Path, client_key: asyncssh.SSHKey, user: str = "root"):
        super().__init__(host)
        self.root, self.tools, self.user = root, tools, user
        self.client_key = client_key
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")

    def known_hosts_line(self) -> str:
        return f"[{self.host}]:{self.port} {self.host_key.export_public_key().decode().strip()}\n"

    async def _listen(self):
        fake = self

        class Server(asyncssh.SSHServer):
            def begin_auth(self, username: str) -> bool:
                return True

            def public_key_auth_supported(self) -> bool:
                return True

            def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
                return username == fake.user and key.public_data == fake.client_key.public_data

        return await asyncssh.create_server(
            Server,
            self.host,
            self.port,
            server_host_keys=[self.host_key],
            process_factory=self._process,
            encoding=None,
        )

    async def _process(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command or ""
        self.commands.append(command)
        if command == INSTALL:
            data = await process.stdin.read()
            target = self.root / BUNDLE.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(data))
            process.exit(0)
            return
        match = AGENT_COMMAND.match(command)
        if match is None:
            process.stderr.write(f"fake node: command not modelled: {command[:200]}\n".encode())
            process.exit(127)
            return
        bundle = self.root / BUNDLE.lstrip("/")
        if not bundle.exists():
            process.stderr.write(b"/usr/bin/python3: No module named terravixens.agent\n")
            process.exit(1)
            return
        stdin = await process.stdin.read() if "--spec -" in command else b""
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-S",
            "-m",
            "terravixens.agent",
            *shlex.split(match.group("args")),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.root,
            env={
                "PYTHONPATH": str(bundle),
                "PATH": "/usr/bin:/bin",
                "TERRAVIXENS_AGENT_ROOT": str(self.root),
                "TERRAVIXENS_AGENT_TOOLS": str(self.tools),
            },
        )
        out, err = await child.communicate(stdin)
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(child.returncode or 0)
