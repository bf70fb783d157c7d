"""A pytest plugin for `make mutation` (scripts/mutation.py), loaded with `-p tests.mutation_fork`.

mutmut forks one process per mutant from a process that already ran the tests, so its jsii kernel (the Node.js
process cdktf talks to) is running; children sharing it would interleave their requests on its pipes. After a
fork, the child talks to another kernel: one the parent lent it (KernelPool: started in the parent with the
assemblies it imported, lent to one fork at a time, replaced after a fork ended by a signal and after `reuse` forks),
or else a new Node.js process started on first use that loads those assemblies; with an empty reference map (an
object id of the parent's process means nothing to another kernel) and no jsii object kept from the parent by a
functools cache (`terravixens.constructs.build.null`). scripts/mutation.py checks that the selected tests pass in
such a fork before it trusts a kill; tests/test_mutation_fork.py checks that a fork synthesizes what its parent does,
on a new kernel and on a lent one fork after fork.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
import os
import signal
import sys
from pathlib import Path

from jsii import _reference_map, _runtime
from jsii._kernel.providers.process import ProcessProvider, _NodeProcess
from jsii._kernel.types import LoadRequest, LoadResponse


def assemblies() -> list[tuple[str, str, str]]:
    """(name, version, tarball) of every jsii assembly imported so far, in import order (dependencies first): each
    generated package's `_jsii` module keeps the record of its `JSIIAssembly.load`."""
    found = []
    for name, module in list(sys.modules.items()):
        record = getattr(module, "__jsii_assembly__", None) if name.endswith("._jsii") else None
        if record is not None:
            path = importlib.resources.files(f"{record.module}._jsii").joinpath(record.filename)
            found.append((record.name, record.version, os.fspath(path)))
    return found


def start_kernel(loads: list[tuple[str, str, str]]) -> _NodeProcess:
    """A new Node.js process (jsii's kernel) with these assemblies loaded, in this order."""
    process = _NodeProcess()
    process.start()
    for name, version, tarball in loads:
        process.send(LoadRequest(name=name, version=version, tarball=tarball), LoadResponse)
    return process


class _ChildProvider(ProcessProvider):
    """The kernel of a forked process: the one handed over by its parent, or a new Node.js process that loads the
    parent's assemblies before its first request."""

    def __init__(self, loads: list[tuple[str, str, str]], node: _NodeProcess | None = None):
        super().__init__()
        self.loads = loads
        self.node = node
        self.node_seconds_at_fork = process_tree_seconds(node._process.pid) if node is not None else 0.0

    @property  # type: ignore[override]
    def _process(self) -> _NodeProcess:
        if self.node is None:
            self.node = start_kernel(self.loads)
        return self.node


class KernelPool:
    """Kernels started in the parent, their assemblies loaded, each lent to one fork at a time (ADR 0051).

    A fork that ended normally (its last request answered: jsii's protocol is one response per request, callbacks
    included) gives its kernel back; one ended by a signal (a CPU limit, a timeout) may have left a request or a
    response in a pipe, so its kernel is stopped, as is a kernel after `reuse` forks (its object table only grows).
    The parent never talks to a lent kernel; it drains every kernel's standard error (jsii's sink thread)."""

    def __init__(self, reuse: int) -> None:
        self.reuse = reuse
        self.free: list[tuple[_NodeProcess, int]] = []  # kernel, forks it served
        self.lent: dict[str, tuple[_NodeProcess, int]] = {}  # what the fork runs (a mutant) -> its kernel
        self.started = self.stopped = 0
        self.start_seconds = 0.0  # CPU seconds the started kernels took to start and load the assemblies

    def lend(self, key: str) -> None:
        """Before a fork: the next forked process takes a free kernel (a new one if none is free)."""
        if self.free:
            kernel, served = self.free.pop()
        else:
            kernel, served = start_kernel(assemblies()), 0
            self.started += 1
            self.start_seconds += process_tree_seconds(kernel._process.pid)
        self.lent[key] = (kernel, served + 1)
        _handed[:] = [kernel]

    def forked(self) -> None:
        """After the fork, in the parent: the hand-over is done."""
        _handed.clear()

    def back(self, key: str, exit_code: int) -> None:
        """The fork that ran `key` ended with exit_code (negative: a signal ended it)."""
        kernel, served = self.lent.pop(key)
        if exit_code not in (0, 1):
            self.stop(kernel)
        elif served < self.reuse:
            self.free.append((kernel, served))
        else:
            self.stopped += 1
            kernel.stop()  # jsii's own: {"exit":0}, then its process is waited for (its CPU time counted)

    def stop(self, kernel: _NodeProcess) -> None:
        """Ends the kernel's process tree (it may be mid-request: it would not read jsii's {"exit":0})."""
        self.stopped += 1
        process = kernel._process
        pids = [process.pid, *descendants(process.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        kernel.stop()  # jsii's own clean-up: the pipes, the stderr thread, the runtime's temporary directory

    def close(self) -> None:
        for kernel, _ in self.free:
            self.stopped += 1
            kernel.stop()
        for kernel, _ in self.lent.values():
            self.stop(kernel)
        self.free.clear()
        self.lent.clear()


_handed: list[_NodeProcess] = []  # the kernel the next fork takes (KernelPool.lend), in the parent only


def _clear_caches() -> None:
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("terravixens", "tests")) or name.startswith("terravixens._bindings"):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper):
                value.cache_clear()


def descendants(pid: int) -> list[int]:
    """The living descendants of a process, from /proc."""
    try:
        children = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [pid for child in children for pid in (child, *descendants(child))]


def process_tree_seconds(pid: int) -> float:
    """CPU seconds (user + system) of a process and its living descendants, from /proc (0 when it is gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / tick
        for task in Path(f"/proc/{pid}/task").iterdir():
            total += sum(process_tree_seconds(int(child)) for child in (task / "children").read_text().split())
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return total


def kernel_seconds() -> float:
    """CPU seconds this process's kernel (Node.js) spent since the fork: a started kernel only (0 before)."""
    provider = _runtime.kernel.provider
    if not isinstance(provider, _ChildProvider) or provider.node is None:
        return 0.0
    return process_tree_seconds(provider.node._process.pid) - provider.node_seconds_at_fork


def fresh_kernel() -> None:
    """What a forked process runs first: its own kernel (lent by the parent's KernelPool, or a new one on first use),
    its own references, no cached jsii object. A fork of this process gets a new kernel, never this one."""
    _runtime.kernel.provider = _ChildProvider(assemblies(), _handed.pop() if _handed else None)
    _reference_map._refs._refs.clear()
    _clear_caches()


if not getattr(_runtime, "_terravixens_fork_safe", False):
    _runtime._terravixens_fork_safe = True  # type: ignore[attr-defined]
    os.register_at_fork(after_in_child=fresh_kernel)
