"""A pytest plugin for `make mutation` (scripts/mutation.py), loaded with `-p tests.mutation_fork`.

mutmut forks one process per mutant from a process that already ran the tests, so its jsii kernel (the Node.js
process cdktf talks to) is running; children sharing it would interleave their requests on its pipes. After a
fork, the child gets a kernel of its own: a new Node.js process, started on first use, with the assemblies the
parent imported loaded again (milliseconds), an empty reference map (an object id of the parent's process means
nothing to the new one) and no jsii object kept from the parent by a functools cache
(`terravixens.constructs.build.null`). scripts/mutation.py checks that the selected tests pass in such a fork before
it trusts a kill; tests/test_mutation_fork.py checks that a fork synthesizes what its parent does.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import sys

from jsii import _reference_map, _runtime
from jsii._kernel.providers.process import ProcessProvider, _NodeProcess
from jsii._kernel.types import LoadRequest, LoadResponse
from jsii._utils import memoized_property


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


class _ChildProvider(ProcessProvider):
    """A new Node.js process that loads the parent's assemblies before its first request."""

    def __init__(self, loads: list[tuple[str, str, str]]):
        super().__init__()
        self.loads = loads

    @memoized_property
    def _process(self) -> _NodeProcess:
        process = _NodeProcess()
        process.start()
        for name, version, tarball in self.loads:
            process.send(LoadRequest(name=name, version=version, tarball=tarball), LoadResponse)
        return process


def _clear_caches() -> None:
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("terravixens", "tests")) or name.startswith("terravixens._bindings"):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper):
                value.cache_clear()


def fresh_kernel() -> None:
    """What a forked process runs first: its own kernel, its own references, no cached jsii object."""
    _runtime.kernel.provider = _ChildProvider(assemblies())
    _reference_map._refs._refs.clear()
    _clear_caches()


if not getattr(_runtime, "_terravixens_fork_safe", False):
    _runtime._terravixens_fork_safe = True  # type: ignore[attr-defined]
    os.register_at_fork(after_in_child=fresh_kernel)
