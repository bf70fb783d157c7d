"""`make mutation` forks one process per mutant from a process whose jsii kernel runs (tests/mutation_fork.py): a
fork synthesizes with a kernel of its own, the same JSON as its parent, and the parent's kernel still answers."""

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
    given_back = json.loads(text)
    assert given_back["node"] != node_pid(), "the fork talked to its parent's Node.js process"
    assert given_back["stacks"] == parent
    assert support.synth(example_site, Path(tempfile.mkdtemp(prefix="tv-after-fork-"))) == parent  # the parent's kernel
