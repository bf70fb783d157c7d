"""Every message terravixens prints names its commands as a new shell runs them from the checkout (`bin/terravixens …`,
`bin/cdktf …`: ADR 0049), never `pipenv run …` (pipenv is not on a new shell's PATH) or `npx …` (issue 29, item 6).

What is read: every string of the package that is not a docstring (messages, `--help` texts, what the stacks write:
the pieces of an f-string count), every `--help` as printed, the validation message every synthesized stack carries
(the committed snapshots, which tests/test_snapshots.py holds equal to synth, and the message of a layer of each kind),
and what the launchers and the Terraform wrapper print (`echo`). The docs' commands are held to the same rule by
tests/test_docs_commands.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from terravixens import cli, guarded_path
from terravixens.layers import LAYER_KINDS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "terravixens"
FORBIDDEN = re.compile(r"\bpipenv run\b|\bnpx\b")
SNAPSHOTS = ROOT / "tests" / "__snapshots__"
LAUNCHERS = [ROOT / "bin" / "terravixens", ROOT / "bin" / "cdktf", ROOT / "scripts" / "terravixens-terraform"]


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def strings(source: str, name: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of every string that is not a docstring; an f-string's text with `{}` for each value."""
    tree = ast.parse(source, name)
    skip = docstrings(tree)
    inside: set[int] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else "{}"
                for part in node.values
            )
            inside |= {id(part) for part in node.values}
            found.append((node.lineno, text))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip | inside:
            found.append((node.lineno, node.value))
    return found


def offending(source: str, name: str = "<source>") -> list[str]:
    return [f"{name}:{line}: {text[:160]}" for line, text in strings(source, name) if FORBIDDEN.search(text)]


def test_no_string_of_the_package_names_pipenv_run_or_npx():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_bindings" not in path.relative_to(PACKAGE).parts:
            found += offending(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []


def test_the_check_reads_messages_and_f_strings_but_not_docstrings():
    """It can fail: a message and an f-string naming them are found; a docstring saying how `npx cdktf` reaches the
    wrapper (the .npmrc: still true) is not a message."""
    source = (
        '"""The Terraform `npx cdktf` runs."""\n'
        "def stop(layer):\n"
        '    """`npx cdktf deploy` works too."""\n'
        '    print(f"run `pipenv run terravixens deploy {layer}` again")\n'
        '    return "or `npx cdktf diff`"\n'
        'OK = "run `bin/terravixens deploy` (not npxs)"\n'
    )
    assert offending(source) == [
        "<source>:4: run `pipenv run terravixens deploy {}` again",
        "<source>:5: or `npx cdktf diff`",
    ]


@pytest.mark.parametrize("entry", cli.COMMANDS, ids=lambda c: c.name)
def test_no_help_names_them(entry, capsys):
    with pytest.raises(SystemExit):
        cli.main([*entry.name.split(), "--help"])
    assert not FORBIDDEN.search(capsys.readouterr().out)


def test_no_stack_names_them_in_its_json():
    """The synthesized JSON: the committed snapshots of every stack (held equal to synth by tests/test_snapshots.py
    and tests/test_standalone_stacks.py), and the guarded-path message for a layer of every kind."""
    files = sorted(SNAPSHOTS.rglob("*.json"))
    assert len(files) >= 5
    for path in files:
        text = path.read_text()
        assert "terravixens_guarded" in text and not FORBIDDEN.search(text), path.name
    for kind in LAYER_KINDS:
        message = guarded_path.refusal(f"{kind.name}-x")
        assert "`bin/cdktf deploy " in message and "`bin/terravixens deploy " in message
        assert not FORBIDDEN.search(message)


@pytest.mark.parametrize("path", LAUNCHERS, ids=lambda p: p.name)
def test_no_launcher_prints_them(path):
    printed = [line for line in path.read_text().splitlines() if re.match(r"\s*(echo|printf)\b", line)]
    assert printed, path  # each says what to run when the checkout is not set up
    assert [line for line in printed if FORBIDDEN.search(line)] == []
