"""Turn a walk the lifecycle state machine printed into a regression test, or replay it.

A failing walk ends its message with

    replay with tests/lifecycle_replay.py:
    WALK = {"start": "v1.11.5", "edits": [{"op": "readdress", "node": "wk-a", "octet": 101}, ...]}

Give that line (or the whole message, or just the JSON) on stdin:

    pipenv run python -m tests.lifecycle_replay --name readdress_after_promotion < failure.txt   # prints a test
    pipenv run python -m tests.lifecycle_replay --run < failure.txt                             # replays it now

The printed test goes into tests/test_lifecycle_regressions.py: it replays the same edits from the same start with
every check of the walk (tests/lifecycle.py), so the bug stays fixed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

# As tests/conftest.py: jsii runs its kernel on the project's pinned Node.js.
os.environ.setdefault("JSII_NODE", str(Path(__file__).resolve().parent.parent / "node_modules" / ".bin" / "node"))
os.environ.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")

from tests import lifecycle


def parse(text: str) -> dict:
    """The walk in a failure message, a `WALK = {...}` line or bare JSON (the last one given)."""
    walks = []
    for line in text.splitlines():
        line = line.strip().removeprefix("WALK = ")
        if line.startswith('{"start"'):
            walks.append(json.loads(line))
    if not walks:
        raise ValueError('no walk found: give the line `WALK = {"start": ..., "edits": [...]}` of the failure')
    walk = walks[-1]
    if set(walk) != {"start", "edits"} or walk["start"] not in lifecycle.STARTS:
        raise ValueError(f"not a walk: keys {sorted(walk)}, start {walk.get('start')!r}")
    for edit in walk["edits"]:
        if not isinstance(edit, dict) or not isinstance(edit.get("op"), str):
            raise ValueError(f"not an edit: {edit!r}")
    return walk


def regression_test(walk: dict, name: str, why: str = "") -> str:
    """The source of a pytest test replaying `walk` with every check of the lifecycle walk."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise ValueError(f"test name {name!r}: use lowercase letters, digits and underscores")
    body = json.dumps(walk, indent=4)  # strings, numbers, lists and objects: Python as written
    body = "\n".join("    " + line if index else line for index, line in enumerate(body.splitlines()))
    doc = f'    """{why or "Found by the lifecycle walk."}"""\n'
    return f"\n\ndef test_walk_{name}():\n{doc}    replay(\n    {body}\n    )\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lifecycle_replay", description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="regression", help="the test's name after test_walk_")
    parser.add_argument("--why", default="", help="the test's docstring: what broke")
    parser.add_argument("--run", action="store_true", help="replay the walk now instead of printing a test")
    args = parser.parse_args(argv)
    try:
        walk = parse(sys.stdin.read())
    except ValueError as error:
        print(f"lifecycle_replay: {error}", file=sys.stderr)
        return 2
    if args.run:
        walker = lifecycle.replay(walk)
        print(f"walk from {walk['start']}: {walker.steps} steps, every check passed")
        return 0
    print(regression_test(walk, args.name, args.why), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
