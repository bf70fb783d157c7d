"""The documented examples run as written: each `terravixens validate` of a file in docs/examples/ shown in
docs/commands.md prints what the docs say it prints, and every file in docs/examples/ is used there."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from terravixens import cli

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ROOT / "docs" / "commands.md"
EXAMPLES = ROOT / "docs" / "examples"
RUN = "$ bin/terravixens validate docs/examples/"


def documented_runs() -> list[tuple[str, list[str]]]:
    """(command, the lines the docs show it printing) for each validate of a shipped example."""
    runs: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", COMMANDS.read_text(), re.S):
        current: list[str] | None = None
        for line in block.splitlines():
            if line.startswith("$ "):
                current = [] if line.startswith(RUN) else None
                if current is not None:
                    runs.append((line[2:], current))
            elif current is not None:
                current.append(line)
    return runs


@pytest.mark.parametrize("command, shown", documented_runs(), ids=lambda value: str(value)[:60])
def test_a_documented_validate_prints_what_the_docs_show(command, shown, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    arguments = shlex.split(command)[1:]  # after `bin/terravixens`
    code = cli.main(arguments)
    printed = capsys.readouterr()
    assert (printed.out + printed.err).splitlines() == shown
    assert code == (0 if shown and ": ok — " in shown[0] else 2)


def test_every_example_is_used_in_the_docs():
    text = COMMANDS.read_text()
    unused = [
        path.name
        for path in sorted(EXAMPLES.iterdir())
        if path.name != "specs" and f"docs/examples/{path.name}" not in text
    ]
    assert unused == []
    assert len(documented_runs()) >= 6
