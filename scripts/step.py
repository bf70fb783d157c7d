#!/usr/bin/env python3
"""One set-up step, told as it happens: `python3 scripts/step.py NAME -- COMMAND...` (the Makefile's set-up steps).

Prints `[NAME] COMMAND` when the step starts (with --inherit, a step make runs alone, the command keeps the
terminal and only the start and end lines are added), every line of its output prefixed with `[NAME]` as it comes
(so the steps make runs side by side stay readable without make's --output-sync, which held a step's lines until it
ended),
and `[NAME] done (12.3 s)` or `[NAME] failed with exit N (12.3 s)` at the end; exits with the command's code.
On a terminal (and not in CI, CI=true), a step silent for HEARTBEAT seconds gets a `[NAME] … still running (40 s)`
line, so `npm ci` is never minutes of nothing; in CI and logs only the step's own lines. Standard library only.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time

HEARTBEAT = float(os.environ.get("TERRAVIXENS_STEP_HEARTBEAT", "15"))  # seconds of silence before a heartbeat


def heartbeat_wanted() -> bool:
    return sys.stdout.isatty() and os.environ.get("CI", "").lower() not in ("1", "true", "yes")


def main(argv: list[str]) -> int:
    inherit = argv[:1] == ["--inherit"]
    argv = argv[1:] if inherit else argv
    if len(argv) < 3 or argv[1] != "--":
        print("usage: step.py [--inherit] NAME -- COMMAND...", file=sys.stderr)
        return 2
    name, command = argv[0], argv[2:]
    started = time.monotonic()
    last = [started]
    print(f"[{name}] {shlex.join(command)}", flush=True)
    if inherit:  # a step run alone (synth): its own terminal output (cdktf's spinner needs the terminal), timed
        try:
            code = subprocess.call(command, stdin=subprocess.DEVNULL)
        except OSError as error:
            print(f"[{name}] cannot start {command[0]}: {error.strerror}", flush=True)
            return 127
        return finish(name, started, code)
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as error:
        print(f"[{name}] cannot start {command[0]}: {error.strerror}", flush=True)
        return 127
    assert process.stdout is not None

    def relay() -> None:
        for raw in iter(process.stdout.readline, b""):
            sys.stdout.write(f"[{name}] {raw.decode(errors='replace').rstrip()}\n")
            sys.stdout.flush()
            last[0] = time.monotonic()

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    beat = heartbeat_wanted()
    try:
        while True:
            try:
                code = process.wait(timeout=min(1.0, HEARTBEAT))
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if beat and now - last[0] >= HEARTBEAT:
                    print(f"[{name}] … still running ({now - started:.0f} s)", flush=True)
                    last[0] = now
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
        code = process.wait()
    reader.join(timeout=5)
    return finish(name, started, code)


def finish(name: str, started: float, code: int) -> int:
    took = time.monotonic() - started
    print(
        f"[{name}] done ({took:.1f} s)" if code == 0 else f"[{name}] failed with exit {code} ({took:.1f} s)", flush=True
    )
    return code if code >= 0 else 128 - code  # ended by a signal: the shell's 128+N


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
