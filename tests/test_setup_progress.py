"""Set-up progress (issue 18, item 3): each step says when it starts, its lines as they come, and how long it took;
a heartbeat on a terminal, none in CI (scripts/step.py, the Makefile's set-up steps)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = ROOT / "scripts" / "step.py"
SLOW = [sys.executable, "-c", "import sys, time; time.sleep(2.5); print('late line'); sys.exit(3)"]


def test_the_start_line_comes_before_the_step_ends_and_the_end_says_how_long():
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(STEP), "demo", "--", *SLOW],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, CI="true"),
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    first_at = time.monotonic() - started
    rest = process.stdout.read().splitlines()
    code = process.wait()
    assert first.startswith("[demo] ") and "time.sleep(2.5)" in first
    assert first_at < 2.0, f"the start line came after {first_at:.1f} s: held until the step ended"
    assert rest[0] == "[demo] late line"
    assert re.fullmatch(r"\[demo\] failed with exit 3 \(\d+\.\d s\)", rest[-1]), rest
    assert code == 3 and len(rest) == 2  # no heartbeat outside a terminal / in CI


def run_on_a_terminal(ci: str) -> str:
    leader, follower = pty.openpty()
    env = dict(os.environ, TERRAVIXENS_STEP_HEARTBEAT="0.5", CI=ci)
    process = subprocess.Popen(
        [sys.executable, str(STEP), "npm", "--", *SLOW], stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait()
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_silent_step_on_a_terminal_gets_a_heartbeat_but_not_in_ci():
    shown = run_on_a_terminal(ci="")
    assert re.search(r"^\[npm\] … still running \(\d s\)$", shown, re.M), shown
    assert "[npm] late line" in shown and "[npm] failed with exit 3" in shown
    assert "still running" not in run_on_a_terminal(ci="true")


def test_a_successful_step_and_a_missing_program():
    done = subprocess.run([sys.executable, str(STEP), "ok", "--", "true"], capture_output=True, text=True)
    assert done.returncode == 0 and re.fullmatch(r"\[ok\] true\n\[ok\] done \(\d\.\d s\)\n", done.stdout)
    missing = subprocess.run(
        [sys.executable, str(STEP), "x", "--", "no-such-program-tv"], capture_output=True, text=True
    )
    assert (
        missing.returncode == 127 and "[x] cannot start no-such-program-tv: No such file or directory" in missing.stdout
    )


def test_the_makefile_runs_its_long_steps_through_the_wrapper_without_output_sync():
    """make's --output-sync held a step's lines until it ended; the long steps print as they go instead."""
    makefile = (ROOT / "Makefile").read_text()
    calls = re.findall(r"\$\(MAKE\)[^\n]*", makefile) + re.findall(r"^PARALLEL :=[^\n]*", makefile, re.M)
    assert len(calls) >= 4 and not [call for call in calls if "--output-sync" in call or " -O" in call], calls
    for step in (
        "npm -- npm ci",
        "pipenv -- pipenv sync",
        "bindings -- python3 scripts/providers.py bindings",
        "mirror -- python3 scripts/providers.py mirror",
        "--inherit synth -- cdktf synth",
    ):
        assert f"$(STEP) {step}" in makefile, step


def test_an_inherited_step_keeps_the_output_as_is_and_is_timed():
    done = subprocess.run(
        [sys.executable, str(STEP), "--inherit", "synth", "--", "sh", "-c", "echo as is; exit 4"],
        capture_output=True,
        text=True,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 4 and lines[:2] == ["[synth] sh -c 'echo as is; exit 4'", "as is"]
    assert re.fullmatch(r"\[synth\] failed with exit 4 \(\d+\.\d s\)", lines[2]) and len(lines) == 3
