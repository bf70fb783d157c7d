"""`make mutation` forks one process per mutant from a process whose jsii kernel runs (tests/mutation_fork.py): a
fork synthesizes with another kernel (a new one, or one the parent lent it after other forks), the same JSON as its
parent, and the parent's kernel still answers."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from jsii import _runtime

from tests import mutation_fork, support


def node_pid() -> int:
    return _runtime.kernel.provider._process._process.pid


def test_a_forked_process_synthesizes_with_its_own_kernel_the_same_json(example_site):
    assert [name for name, _, _ in mutation_fork.assemblies()][:2] == ["constructs", "cdktf"]
    parent = support.synth(example_site)  # the kernel runs, objects of this process are in its reference map
    given_back = synth_in_a_fork(example_site)
    assert given_back["node"] != node_pid(), "the fork talked to its parent's Node.js process"
    assert given_back["stacks"] == parent
    assert support.synth(example_site, Path(tempfile.mkdtemp(prefix="tv-after-fork-"))) == parent  # the parent's kernel


def synth_in_a_fork(example_site) -> dict:
    """The example synthesized in a fork of this process: its stacks and the pid of the kernel it talked to."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(read)
            child = support.synth(example_site)
            with os.fdopen(write, "w") as out:
                json.dump({"stacks": child, "node": node_pid()}, out)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as given:
        text = given.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the fork could not synthesize"
    return json.loads(text)


def test_a_kernel_lent_to_fork_after_fork_synthesizes_the_parents_json_every_time(example_site):
    """make mutation lends each fork a kernel the parent started (KernelPool): a kernel that served forks before
    (their objects still in its table, its JIT warm) answers the next fork with the same bytes; a fork ended by a
    signal, or a kernel's last fork, stops it and the next fork gets a new one."""
    parent = support.synth(example_site)
    pool = mutation_fork.KernelPool(reuse=3)
    try:
        served = []
        for mutant in ("first", "second", "third"):
            pool.lend(mutant)
            try:
                given_back = synth_in_a_fork(example_site)
            finally:
                pool.forked()
            pool.back(mutant, 0)
            assert given_back["stacks"] == parent, f"the {mutant} fork on a lent kernel synthesized other JSON"
            served.append(given_back["node"])
        assert served[0] == served[1] == served[2] != node_pid(), "the forks did not share the lent kernel"
        assert (pool.started, pool.stopped) == (1, 1), "the kernel was not stopped after its third fork"
        pool.lend("killed")
        pool.forked()
        pool.back("killed", -24)  # SIGXCPU: the kernel may be mid-request
        assert (pool.started, pool.stopped) == (2, 2)
        pool.lend("after")
        try:
            after = synth_in_a_fork(example_site)
        finally:
            pool.forked()
        pool.back("after", 0)
        assert after["stacks"] == parent and after["node"] not in served
        assert (pool.started, pool.stopped) == (3, 2)
    finally:
        pool.close()
    assert not pool.free and not pool.lent
    assert support.synth(example_site, Path(tempfile.mkdtemp(prefix="tv-after-pool-"))) == parent  # the parent's kernel
