"""The one bounded runner (terravixens/runner.py): deadlines, whole process groups ended, pipes that cannot hold the
caller, failures as values, and SIGINT/SIGTERM/SIGHUP ending every child before `Interrupted` propagates — in
process and through `terravixens` itself (exit 130, one line)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from terravixens import runner
from terravixens.runner import Interrupted, handle_signals, run
from tests import processes, support
from tests.processes import hanging_tool, pid_in

ROOT = Path(__file__).resolve().parent.parent


def later(seconds: float, action) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


# ---------------------------------------------------------------------------------------------------------- deadlines
def test_a_call_past_its_deadline_is_stopped_with_its_whole_group(tmp_path):
    """The program and the child it started (which holds the same stdout) are both ended at the deadline."""
    script = f"sleep 300 & echo $! > {tmp_path}/child; echo started; exec sleep 300"
    started = time.monotonic()
    ran = run(["sh", "-c", script], timeout=1, grace=1)
    assert time.monotonic() - started < 5
    assert (ran.ok, ran.returncode, ran.timed_out, ran.stdout) == (False, None, True, "started\n")
    assert ran.reason == "sh did not finish within 1s: stopped (SIGTERM, then SIGKILL to its process group)"
    assert processes.ends_soon(pid_in(tmp_path / "child"))


def test_sigterm_comes_first_then_sigkill_for_what_ignores_it(tmp_path):
    script = f"trap '' TERM; sleep 300 & echo $! > {tmp_path}/child; wait"
    started = time.monotonic()
    ran = run(["sh", "-c", script], timeout=0.5, grace=1, label="stubborn")
    elapsed = time.monotonic() - started
    assert ran.timed_out and ran.reason.startswith("stubborn did not finish within 0.5s")
    assert 1.4 <= elapsed < 5  # the deadline, then the whole grace (SIGTERM was ignored), then SIGKILL
    assert processes.ends_soon(pid_in(tmp_path / "child"))


def test_a_grandchild_holding_stdout_after_the_program_exited_cannot_hold_the_caller(tmp_path):
    script = f"sleep 300 & echo $! > {tmp_path}/child; echo done"
    started = time.monotonic()
    ran = run(["sh", "-c", script], timeout=60)
    assert time.monotonic() - started < runner.PIPE_LINGER + 3  # not the 300 s of the grandchild
    assert (ran.ok, ran.stdout, ran.reason) == (True, "done\n", "")
    assert processes.ends_soon(pid_in(tmp_path / "child"))  # what it left in its group is ended too


def test_a_pipe_held_outside_the_group_is_abandoned_at_the_deadline(tmp_path):
    """A daemon that left the group (setsid) cannot be ended by the runner, but it cannot hold the caller either."""
    script = f"setsid sleep 30 & echo $! > {tmp_path}/escaped; echo waiting; exec sleep 300"
    started = time.monotonic()
    try:
        ran = run(["sh", "-c", script], timeout=1, grace=1)
        assert time.monotonic() - started < 5
        assert ran.timed_out and ran.stdout == "waiting\n"
    finally:
        os.kill(pid_in(tmp_path / "escaped"), signal.SIGKILL)


# ---------------------------------------------------------------------------------------------------------- values
@pytest.mark.parametrize(
    "problem, message", [("missing", "No such file or directory"), ("not-executable", "Permission denied")]
)
def test_a_binary_that_cannot_run_is_a_value(tmp_path, problem, message):
    binary = tmp_path / "tool"
    if problem == "not-executable":
        binary.write_text("#!/bin/sh\n")
    ran = run([str(binary), "version"], timeout=5)
    assert (ran.ok, ran.returncode, ran.timed_out) == (False, None, False)
    assert ran.reason == f"cannot run {binary}: {message}"


def test_a_failure_is_a_value_with_its_exit_code_and_message():
    ran = run(["sh", "-c", "echo partial; echo 'error: no such layer' >&2; exit 3"], timeout=5)
    assert (ran.ok, ran.returncode, ran.stdout, ran.stderr) == (False, 3, "partial\n", "error: no such layer\n")
    assert ran.reason == "exit 3: error: no such layer"


def test_output_is_streamed_line_by_line_and_input_given():
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    ran = run(
        ["sh", "-c", "echo one; sleep 1; cat; echo three"],
        timeout=10,
        input="two\n",
        on_stdout_line=lambda line: seen.append((line, time.monotonic() - started)),
    )
    assert ran.ok and ran.stdout == "one\ntwo\nthree\n"
    assert [line for line, _ in seen] == ["one", "two", "three"]
    assert seen[0][1] < 0.9 < seen[2][1]  # the first line arrived while the program still ran


# ---------------------------------------------------------------------------------------------------------- signals
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_a_call_ends_its_group_then_raises_interrupted(tmp_path, signum):
    before = signal.getsignal(signum)
    script = f"sleep 300 & echo $! > {tmp_path}/child; exec sleep 300"
    started = time.monotonic()
    with pytest.raises(Interrupted) as caught, handle_signals():
        timer = later(0.5, lambda: os.kill(os.getpid(), signum))
        run(["sh", "-c", script], timeout=60, label="talosctl upgrade", grace=2)
    timer.join()
    assert time.monotonic() - started < 5
    assert caught.value.signal == signal.Signals(signum).name and caught.value.stopped == ("talosctl upgrade",)
    assert isinstance(caught.value, KeyboardInterrupt)  # `except KeyboardInterrupt` keeps working
    assert processes.ends_soon(pid_in(tmp_path / "child"))
    assert signal.getsignal(signum) == before and runner.stopping() is None


@pytest.mark.parametrize("in_thread", [False, True], ids=["main thread", "other thread"])
def test_a_stop_while_a_child_is_starting_is_reported_like_any_other(tmp_path, monkeypatch, in_thread):
    """The signal arrives after the program exists (it already wrote its pid, as the fake Terraform of
    test_operations_cli does) but before Popen returned to the runner: the stop must still end it and name it in
    the one line. Deterministic: Popen does not return until the stop has taken its list of calls to end."""
    stop_taken = threading.Event()
    real_stop_all, real_popen = runner._stop_all, subprocess.Popen

    def stop_all(name: str, now: bool = False) -> list[str]:
        try:
            return real_stop_all(name, now)
        finally:
            stop_taken.set()

    class SlowToReturn(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pid_in(tmp_path / "pid")
            os.kill(os.getpid(), signal.SIGINT)
            assert stop_taken.wait(10), "the stop never ran"

    monkeypatch.setattr(runner, "_stop_all", stop_all)
    monkeypatch.setattr(subprocess, "Popen", SlowToReturn)
    results: list[runner.Ran] = []

    def call() -> None:
        results.append(run(["sh", "-c", f"echo $$ > {tmp_path}/pid; exec sleep 300"], timeout=60, label="plan"))

    with pytest.raises(Interrupted) as caught, handle_signals():
        if not in_thread:
            call()
        worker = threading.Thread(target=call)
        worker.start()
        while True:
            time.sleep(0.05)
    if in_thread:
        worker.join(10)
        assert results[0].interrupted and results[0].reason == "plan stopped: SIGINT received"
    assert caught.value.stopped == ("plan",)
    assert runner.interrupted_line(caught.value).startswith("interrupted by SIGINT (plan stopped with its process")
    assert processes.ends_soon(pid_in(tmp_path / "pid"))
    assert runner.stopping() is None and not runner._live


def test_calls_in_other_threads_are_ended_too_and_nothing_new_starts(tmp_path):
    results: dict[int, runner.Ran] = {}

    def call(number: int) -> None:
        results[number] = run(
            ["sh", "-c", f"sleep 300 & echo $! > {tmp_path}/child{number}; exec sleep 300"],
            timeout=60,
            label=f"upgrade {number}",
            grace=2,
        )

    workers = [threading.Thread(target=call, args=(n,)) for n in (1, 2)]
    with pytest.raises(Interrupted) as caught, handle_signals():
        for worker in workers:
            worker.start()
        for number in (1, 2):
            pid_in(tmp_path / f"child{number}")
        later(0.2, lambda: os.kill(os.getpid(), signal.SIGTERM))
        try:
            while True:
                time.sleep(0.05)
        finally:
            after = run(["true"], timeout=5)  # cleanup code calling the runner during the stop: not started
    for worker in workers:
        worker.join(10)
    assert sorted(caught.value.stopped) == ["upgrade 1", "upgrade 2"]
    assert all(results[n].interrupted and results[n].reason == f"upgrade {n} stopped: SIGTERM received" for n in (1, 2))
    assert after.interrupted and after.reason == "true not started: SIGTERM received"
    assert all(processes.ends_soon(pid_in(tmp_path / f"child{n}")) for n in (1, 2))
    assert run(["true"], timeout=5).ok  # outside handle_signals again: calls run


def test_a_second_signal_does_not_wait_for_the_grace(tmp_path):
    script = f"trap '' TERM; sleep 300 & echo $! > {tmp_path}/child; wait"
    started = time.monotonic()
    with pytest.raises(Interrupted), handle_signals():
        later(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM))
        later(1.5, lambda: os.kill(os.getpid(), signal.SIGTERM))
        run(["sh", "-c", script], timeout=60, grace=60)
    assert time.monotonic() - started < 10  # not the 60 s grace
    assert processes.ends_soon(pid_in(tmp_path / "child"))


def test_a_signal_during_cleanup_after_a_stop_cuts_nothing_short(tmp_path):
    """The first Interrupted is on its way up; a second Ctrl-C must not turn the cleanup (or the one line the
    command prints) into a traceback."""
    cleaned = []
    with handle_signals():
        with pytest.raises(Interrupted):
            later(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM))
            run(["sleep", "300"], timeout=60, grace=2)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        cleaned.append("done")
    assert cleaned == ["done"]


# ---------------------------------------------------------------------------------------------------------- the command
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_terravixens_interrupted_ends_terraform_and_exits_130_with_one_line(tmp_path, signum):
    terraform = hanging_tool(tmp_path / "bin", "terraform")
    process = subprocess.Popen(
        [sys.executable, "-m", "terravixens.cli", "drift", "platform-prod", "--site", str(support.EXAMPLE_SITE)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            TERRAFORM_BINARY_NAME=str(terraform),
            FAKE_HANG_ON="init",
            FAKE_HANG_DIR=str(tmp_path),
        ),
    )
    try:
        pid_in(tmp_path / "hung", within=120)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130
    assert stderr == (
        f"terravixens drift: interrupted by {signal.Signals(signum).name} (terraform init stopped with "
        f"its process group) at platform-prod: done: synth; not done: platform-prod\n"
    )
    assert processes.all_gone(processes.recorded(tmp_path / "hung"))
