"""The one bounded runner for every external command terravixens starts (terraform, talosctl, kubectl).

An operation must always be able to say where it stopped, so running a program never raises for what the program
did: a binary that is missing or not executable, a call past its deadline, a non-zero exit, all come back as a
`Ran` whose `reason` says why. The rules (ADR 0033):

- every call has a deadline; the program starts in its own session (its own process group), so at the deadline
  the whole group — a wrapper script's children, Terraform's provider plugins — gets SIGTERM, then after a grace
  SIGKILL;
- its output is read by threads, never by the caller: a grandchild that keeps stdout open (a helper left behind by
  a wrapper, a daemon that escaped the group) is abandoned at the deadline, or shortly after the program itself
  exited, instead of holding the caller for ever;
- inside `handle_signals()` SIGTERM and SIGHUP behave like Ctrl-C: every process group the runner started is ended
  (SIGTERM, grace, SIGKILL), then `Interrupted` (a KeyboardInterrupt) is raised in the main thread, so the command
  can print one line of what is done and what is not. A second signal during that stop kills at once (and raises
  nothing more). Calls started after a stop was asked for do not start; a call is registered before its program
  starts, so a stop that arrives while the program is starting ends it and names it like any other.

Output is streamed: `on_stdout_line` gets each line as it arrives (Terraform's `-json` progress).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import IO

# SIGTERM to SIGKILL: long enough for Terraform to write its state after an interrupt, short enough for an operator.
TERM_GRACE = 20.0
# After the program exited, how long its output pipes may stay open (held by a left-behind grandchild) before the
# rest of its group is killed and the pipes are abandoned: everything the program wrote is already in the pipe.
PIPE_LINGER = 2.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
MESSAGE_LIMIT = 300

DURATION = re.compile(r"^(\d+)(s|m|h)?$")
UNITS = {"s": 1, "m": 60, "h": 3600, None: 1}


# The longest deadline a command takes (--timeout, --poll, $TERRAVIXENS_TERRAFORM_TIMEOUT…): a call that runs longer
# has hung, and a deadline of years is no deadline.
MAX_DEADLINE = 24 * 3600


def parse_duration(text: str, *, zero: bool = False, maximum: int | None = None) -> int:
    """'90s', '15m', '1h' or plain seconds -> seconds: the one duration parser of the command line and of the
    environment's deadlines. At least 1, unless `zero` (a wait of 0: once); at most `maximum` when given."""
    found = DURATION.match(text.strip())
    if not found or (int(found.group(1)) == 0 and not zero):
        raise ValueError(f"{text!r} is not a duration: write seconds or a number with s, m or h, e.g. 90s, 15m, 1h")
    value = int(found.group(1)) * UNITS[found.group(2)]
    if maximum is not None and value > maximum:
        raise ValueError(
            f"{text[:32]!r} is longer than {seconds(maximum)}: a deadline is at most {seconds(maximum)} (a call that "
            f"runs longer has hung)"
        )
    return value


def seconds(value: float) -> str:
    """How a deadline is said: 90s, 15m, 6h, 1.5s."""
    if value >= 60 and value % 3600 == 0:
        return f"{int(value // 3600)}h"
    if value >= 60 and value % 60 == 0:
        return f"{int(value // 60)}m"
    return f"{value:g}s"


@dataclass(frozen=True)
class Ran:
    """What one external command did. `returncode` is None when it never started or was stopped by us;
    `reason` is empty when it succeeded, else one line: why it could not start, that it was stopped at its deadline
    or by a signal, or its exit code and last message."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    reason: str
    timed_out: bool = False
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.interrupted


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived; every child group was ended before this was raised.

    `signal` is the signal's name; `stopped` the labels of the commands that were running. On the way up the
    command may set `where` (what it was doing) and `summary` (what is done and what is not) for the one line the
    command line prints (terravixens.cli)."""

    def __init__(self, signal_name: str, stopped: Sequence[str] = ()):
        super().__init__(signal_name)
        self.signal = signal_name
        self.stopped = tuple(stopped)
        self.where: str | None = None
        self.summary: str | None = None


def annotate(error: BaseException, *, where: str | None = None, summary: str | None = None) -> None:
    """On an interrupt's way up, a command says where it was and what is done and what is not (any
    KeyboardInterrupt: a plain Ctrl-C outside handle_signals is not an `Interrupted`)."""
    # setattr: any exception may carry them (a KeyboardInterrupt too), not only an `Interrupted`.
    if where is not None:
        setattr(error, "where", where)  # noqa: B010
    if summary is not None:
        setattr(error, "summary", summary)  # noqa: B010


def interrupted_line(error: BaseException) -> str:
    """One line for an interrupt (an `Interrupted`, or a plain KeyboardInterrupt outside handle_signals):
    'interrupted by SIGTERM during X (terraform apply stopped with its process group); done: …; not done: …'."""
    name = getattr(error, "signal", "SIGINT")
    where = getattr(error, "where", None)
    stopped = getattr(error, "stopped", ())
    summary = getattr(error, "summary", None) or "nothing after it was started; the lines above say what is done"
    return (
        f"interrupted by {name}{' ' + where if where else ''}"
        f"{' (' + ', '.join(stopped) + ' stopped with its process group)' if stopped else ''}; {summary}"
    )


# ------------------------------------------------------------------------------------------------ live groups
@dataclass(eq=False)
class _Live:
    """One call, registered before its program is started: a stop that arrives while Popen is half done (the
    program may already run and write its pid) takes it like any other, and whoever attaches the process ends it."""

    label: str
    grace: float
    process: subprocess.Popen[str] | None = None  # None while it starts (or when it could not start)
    stopped_by: str | None = None  # the signal whose stop ended it
    ended: bool = False  # a stop or the caller's cleanup took it: a process attached afterwards is killed at once


# Re-entrant: the signal handler runs in the main thread, possibly while that thread holds the lock.
_lock = threading.RLock()
_live: set[_Live] = set()
_stopping: str | None = None  # the signal that asked every call to stop (inside handle_signals)


def stopping() -> str | None:
    """The signal a stop was asked for with, or None."""
    return _stopping


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _take(entries: Sequence[_Live], stopped_by: str | None = None) -> list[tuple[subprocess.Popen[str], float]]:
    """Marks the calls as ended (under the lock, so a call still starting sees it) and returns the processes that
    exist now, with their grace."""
    with _lock:
        for entry in entries:
            entry.ended = True
            entry.stopped_by = entry.stopped_by or stopped_by
        return [(entry.process, entry.grace) for entry in entries if entry.process is not None]


def _end(processes: Sequence[tuple[subprocess.Popen[str], float]], now: bool = False) -> None:
    """SIGTERM to each group, up to its grace for the leader to exit, then SIGKILL to whatever is left of the group."""
    if not now:
        for process, _grace in processes:
            _signal_group(process.pid, signal.SIGTERM)
        for process, grace in processes:
            deadline = time.monotonic() + grace
            while process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
    for process, _grace in processes:
        _signal_group(process.pid, signal.SIGKILL)
    for process, _grace in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


def _stop_all(name: str, now: bool = False) -> list[str]:
    """Ends every call, those still starting included (their starter kills what it starts): all are named."""
    with _lock:
        entries = list(_live)
        processes = _take(entries, name)
    _end(processes, now)
    return [entry.label for entry in entries]


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    global _stopping
    name = signal.Signals(signum).name
    if _stopping is not None:
        # A second signal while stopping: no more grace (the first stop's wait ends as the groups die). Nothing is
        # raised: the first Interrupted is already on its way up, and cleanup code must not be cut short.
        _stop_all(name, now=True)
        return
    _stopping = name
    raise Interrupted(name, _stop_all(name))


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise `Interrupted` in the main thread after every child group the runner started
    is ended. Outside the main thread (where Python cannot install handlers) it changes nothing."""
    global _stopping
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum in SIGNALS:
        signal.signal(signum, _on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _stopping = None


# ------------------------------------------------------------------------------------------------ one call
def _reader(
    stream: IO[str], into: list[str], on_line: Callable[[str], None] | None, errors: list[BaseException]
) -> None:
    try:
        for line in stream:
            into.append(line)
            if on_line is not None and not errors:
                try:
                    on_line(line.rstrip("\n"))
                except Exception as error:  # reported to the caller once the call is over
                    errors.append(error)
    except (OSError, ValueError):  # the pipe was closed under us
        pass


def _writer(stream: IO[str], text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.write(text)
        stream.close()


def _spawn(
    argv: list[str],
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    with_input: bool,
    label: str,
    grace: float,
) -> tuple[_Live, subprocess.Popen[str]] | OSError | str:
    """Registers the call, then starts the program in its own session in a helper thread: a signal arriving in the
    main thread while Popen is half done then never leaves an unregistered child behind, nor a stop that does not
    name it. A str: the signal a stop was asked for with before it started (it does not start)."""
    entry = _Live(label, grace)
    failed: list[OSError] = []

    def start() -> None:
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=None if env is None else dict(env),
                start_new_session=True,
                stdin=subprocess.PIPE if with_input else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
            )
        except OSError as error:
            failed.append(error)
            return
        with _lock:
            entry.process = process
            ended = entry.ended
        if ended:  # a stop took the call while it started: it does not run
            _signal_group(process.pid, signal.SIGKILL)

    helper = threading.Thread(target=start, name=f"start {label}", daemon=True)
    try:
        with _lock:
            if _stopping is not None:
                return _stopping
            _live.add(entry)
        helper.start()
        helper.join()
    except BaseException:
        with contextlib.suppress(RuntimeError):  # interrupted before it started: it kills what it starts (`ended`)
            helper.join()
        _finish(entry, now=True)
        raise
    if failed or entry.process is None:
        _forget(entry)
        return failed[0] if failed else OSError(f"{label} did not start")
    return entry, entry.process


def _finish(entry: _Live, now: bool = False) -> None:
    """Ends the call's group; it stays registered until then, so a second signal meanwhile still reaches it."""
    try:
        _end(_take([entry]), now)
    finally:
        _forget(entry)


def _forget(entry: _Live) -> None:
    with _lock:
        _live.discard(entry)


def _message(stderr: str, stdout: str) -> str:
    lines = [line.strip() for line in (stderr or stdout).strip().splitlines() if line.strip()]
    return " ".join(lines)[:MESSAGE_LIMIT] or "no message"


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    on_stdout_line: Callable[[str], None] | None = None,
    label: str | None = None,
    grace: float = TERM_GRACE,
) -> Ran:
    """Runs `argv` to completion or to its deadline (`timeout` seconds); never raises for what the program does.

    `label` names the command in reasons (default: the binary's name); `grace` is the time between SIGTERM and
    SIGKILL. A KeyboardInterrupt (or `Interrupted`) while it runs ends its group, then propagates."""
    argv = [str(part) for part in argv]
    label = label or os.path.basename(argv[0])
    if _stopping is not None:
        return Ran(tuple(argv), None, "", "", f"{label} not started: {_stopping} received", interrupted=True)
    started = time.monotonic()
    spawned = _spawn(argv, cwd, env, input is not None, label, grace)
    if isinstance(spawned, str):
        return Ran(tuple(argv), None, "", "", f"{label} not started: {spawned} received", interrupted=True)
    if isinstance(spawned, OSError):
        return Ran(tuple(argv), None, "", "", f"cannot run {argv[0]}: {spawned.strerror or spawned}")
    entry, process = spawned
    out: list[str] = []
    err: list[str] = []
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_reader, args=(process.stdout, out, on_stdout_line, errors), daemon=True),
        threading.Thread(target=_reader, args=(process.stderr, err, None, errors), daemon=True),
    ]
    if input is not None:
        threads.append(threading.Thread(target=_writer, args=(process.stdin, input), daemon=True))
    for thread in threads:
        thread.start()
    deadline = started + timeout
    timed_out = False
    try:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _finish(entry)
        else:
            # The program is done; its pipes close unless something it left behind still holds them: then the
            # rest of its group is killed (a grandchild outside the group is abandoned below).
            _join(threads[:2], min(PIPE_LINGER, max(0.0, deadline - time.monotonic())))
            if any(thread.is_alive() for thread in threads[:2]):
                _finish(entry, now=True)
            else:
                _forget(entry)
        _join(threads[:2], 1.0)  # what is still open now is held outside the group: abandoned
    except BaseException:
        _finish(entry)
        raise
    if errors:
        raise errors[0]
    stdout, stderr = "".join(list(out)), "".join(list(err))
    argv_t = tuple(argv)
    if timed_out:
        return Ran(
            argv_t,
            None,
            stdout,
            stderr,
            f"{label} did not finish within {seconds(timeout)}: stopped (SIGTERM, then SIGKILL to its process group)",
            timed_out=True,
        )
    if entry.stopped_by is not None:
        return Ran(argv_t, None, stdout, stderr, f"{label} stopped: {entry.stopped_by} received", interrupted=True)
    if process.returncode != 0:
        return Ran(argv_t, process.returncode, stdout, stderr, f"exit {process.returncode}: {_message(stderr, stdout)}")
    return Ran(argv_t, 0, stdout, stderr, "")


def _join(threads: Sequence[threading.Thread], within: float) -> None:
    until = time.monotonic() + within
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()))


__all__ = [
    "MAX_DEADLINE",
    "PIPE_LINGER",
    "TERM_GRACE",
    "Interrupted",
    "Ran",
    "annotate",
    "handle_signals",
    "interrupted_line",
    "parse_duration",
    "run",
    "seconds",
    "stopping",
]
