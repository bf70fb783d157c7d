"""talosctl as the upgrades call it: every call bounded in time, every failure an answer, never an exception.

A rolling upgrade must be able to say where it stopped. So a call that cannot start (no binary, not executable),
that hangs past its deadline, or that fails, comes back as a `Call` with a reason; the caller decides to stop.
A hung call is killed with its whole process group (a wrapper script's children included), so its pipes close.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

DURATION = re.compile(r"^(\d+)(s|m|h)?$")
UNITS = {"s": 1, "m": 60, "h": 3600, None: 1}
DEFAULT_TIMEOUT = 15 * 60
# talosctl gets the timeout itself (upgrade --timeout, health --wait-timeout) and reports it; the process is only
# killed after this grace, when talosctl did not stop on its own.
MAX_GRACE = 30


def parse_duration(text: str) -> int:
    """'90s', '15m', '1h' or plain seconds -> seconds (at least 1)."""
    found = DURATION.match(text.strip())
    if not found or int(found.group(1)) == 0:
        raise ValueError(f"{text!r} is not a duration: write seconds or a number with s, m or h, e.g. 90s, 15m, 1h")
    return int(found.group(1)) * UNITS[found.group(2)]


@dataclass(frozen=True)
class Call:
    """One talosctl call's answer. `reason` is set when it did not succeed: exit code and message, a timeout,
    or why it could not start."""

    ok: bool
    stdout: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Talosctl:
    binary: str = "talosctl"
    talosconfig: str = "talosconfig"
    timeout: int = DEFAULT_TIMEOUT

    def run(self, arguments: Sequence[str]) -> Call:
        command = [self.binary, "--talosconfig", self.talosconfig, *arguments]
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as error:
            return Call(False, reason=f"cannot run {self.binary}: {error.strerror or error}")
        limit = self.timeout + min(MAX_GRACE, self.timeout)
        try:
            stdout, stderr = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.communicate()
            # Every call starts with --nodes ADDRESS, then the subcommand.
            return Call(False, reason=f"talosctl {arguments[2]} did not answer within {limit}s "
                                      f"(timeout {self.timeout}s), killed")
        except KeyboardInterrupt:
            # In its own session it does not get the terminal's SIGINT: stop it here, then let the caller report.
            _kill_group(process)
            raise
        if process.returncode != 0:
            message = (stderr or stdout).strip().splitlines()
            return Call(False, stdout, f"exit {process.returncode}: {' '.join(message)[:200] or 'no message'}")
        return Call(True, stdout)

    def version(self, address: str) -> Call:
        return self.run(["--nodes", address, "version"])

    def upgrade(self, address: str, image: str) -> Call:
        return self.run(["--nodes", address, "upgrade", "--image", image, "--wait", "--timeout", f"{self.timeout}s"])

    def upgrade_k8s(self, address: str, target: str) -> Call:
        return self.run(["--nodes", address, "upgrade-k8s", "--to", target])

    def health(self, control_planes: Sequence[str], workers: Sequence[str]) -> Call:
        arguments = ["--nodes", control_planes[0], "health", "--control-plane-nodes", ",".join(control_planes),
                     "--wait-timeout", f"{self.timeout}s"]
        if workers:
            arguments += ["--worker-nodes", ",".join(workers)]
        return self.run(arguments)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
