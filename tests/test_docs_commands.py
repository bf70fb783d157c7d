"""Every command README.md and docs/*.md show runs in a new shell after `make synth` (issue 18, item 1; ADR 0049).

The documented commands are read from the docs themselves: `$ …` lines of every code block, and every line of the
README's `sh`/`bash` blocks. Each simple command of a line (split at `&&`, `||`, `;`, `|` and parentheses, variable
assignments and comments dropped) must resolve in a new shell — a minimal `PATH=/usr/bin:/bin`, a HOME of its own,
no pipenv, no activated virtualenv —: a path of this checkout (`bin/terravixens`, `bin/cdktf`, `.venv/bin/python`,
`tools/…`) that exists and is executable, a program on that PATH, or one of the declared PREREQUISITES the docs
tell the reader to install. The cheap read-only ones (RUN) are run verbatim from the checkout's root in that shell;
the others (deploys, destroys, upgrades: they need a Proxmox VE and a cluster) are only resolved.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NEW_PATH = "/usr/bin:/bin"
# Shell builtins and words that are no program.
BUILTINS = {"cd", "echo", "export", "eval", "umask", ":", "exit", "set", "unset", "source", ".", "["}
# Programs the docs tell the reader to install (README's requirements) or that run elsewhere, with where it is said.
PREREQUISITES = {
    "terraform": "README: Terraform >= 1.11 on PATH (or OpenTofu)",
    "talosctl": "docs/commands.md: the operator's talosctl for Talos' own commands",
    "terravixens": "docs/standalone.md: on a standalone node, pip-installed (`spec get`)",
    "pct": "on the Proxmox VE host",
    "go": "README: Go >= 1.26.1 for `make test` (Talos validators)",
    "ssh-keyscan": "OpenSSH client",
    "ssh-keygen": "OpenSSH client",
    "openssl": "OpenSSL",
    "curl": "curl",
}
# Run verbatim in the new shell (read-only, seconds each): `bin/terravixens` followed by one of these words.
RUN = ("validate", "stacks", "show", "schema", "--help", "--version", "spec validate")


def documented_lines() -> list[tuple[str, str]]:
    """(where, command line) for every documented command (a line ending in a backslash continues on the next)."""
    found: list[tuple[str, str]] = []
    for doc in DOCS:
        fence = None
        continued = False
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if continued:
                found[-1] = (found[-1][0], found[-1][1][:-1] + " " + line.strip())
                continued = line.endswith("\\")
                continue
            if line.startswith("```"):
                fence = None if fence is not None else line[3:].strip()
                continue
            if fence is None:
                continue
            where = f"{doc.relative_to(ROOT)}:{number}"
            if line.startswith("$ "):
                found.append((where, line[2:]))
            elif doc.name == "README.md" and fence in ("sh", "bash") and line.strip() and line[0] != " ":
                found.append((where, line))
            else:
                continue
            continued = line.endswith("\\")
    return found


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line, each without its leading variable assignments."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", "||", ";", "|", "(", ")", "&", ";;"):
            commands.append([])
        elif token.startswith((">", "<")) or (commands[-1] and commands[-1][-1] in (">", ">>", "<")):
            commands[-1].append(token)  # a redirection and its target: never a program
        else:
            commands[-1].append(token)
    out = []
    for words in commands:
        words = [w for w in words if not re.fullmatch(r"\d*[<>]+&?\d*", w)]
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words.pop(0)
        if words:
            out.append(words)
    return out


def programs(line: str) -> list[str]:
    return [words[0] for words in simple_commands(line) if words[0] not in BUILTINS and not words[0].startswith("$")]


LINES = documented_lines()


def new_shell(home: Path) -> dict[str, str]:
    """A new shell: the minimal PATH plus where the README's prerequisite Terraform is (the README asks for it on PATH;
    `--version` then reports it as a user's shell would), nothing of the project's."""
    terraform = shutil.which("terraform")
    path = NEW_PATH if terraform is None else f"{NEW_PATH}:{Path(terraform).parent}"
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}


def test_the_docs_show_commands_and_the_new_shell_has_no_pipenv():
    """The extraction finds the documented commands (it would pass on nothing otherwise), and the premise holds."""
    assert len(LINES) > 150
    assert any(line.startswith("bin/cdktf deploy") for _, line in LINES)
    assert any(line.startswith("bin/terravixens validate") for _, line in LINES)
    assert shutil.which("pipenv", path=NEW_PATH) is None, "pipenv on /usr/bin:/bin: this test would prove nothing"


def test_no_documented_command_needs_pipenv_or_npx():
    """One convention (ADR 0042): `bin/terravixens`, `bin/cdktf`, `.venv/bin/…` — never `pipenv run` or `npx`, which
    a new shell after `make synth` does not have (pipenv) or runs on the system's Node (npx)."""
    offending = [f"{where}: {line}" for where, line in LINES if {"pipenv", "npx"} & set(programs(line))]
    assert offending == []


def test_every_documented_program_resolves_in_a_new_shell():
    unresolved = []
    for where, line in LINES:
        for program in programs(line):
            if "/" in program:
                path = Path(program).expanduser()
                path = path if path.is_absolute() else ROOT / path
                resolved = path.is_file() and os.access(path, os.X_OK)
                # A path the docs show on a node or in an example folder, not in this checkout.
                resolved = resolved or program.startswith(("/etc/", "/var/", "/usr/local/"))
            else:
                resolved = shutil.which(program, path=NEW_PATH) is not None or program in PREREQUISITES
            if not resolved:
                unresolved.append(f"{where}: {program} ({line[:80]})")
    assert unresolved == []


def words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def to_run() -> list[tuple[str, str]]:
    return [
        (where, line)
        for where, line in LINES
        if line.startswith("bin/terravixens ")
        and any(words(line)[1:][: len(word.split())] == word.split() for word in RUN)
    ]


def test_the_cheap_commands_are_declared_and_found():
    """What RUN selects: validate (sites and every shipped example), stacks, schema export at least."""
    selected = {words(line)[1] for _, line in to_run()}
    assert {"validate", "stacks", "schema"} <= selected, selected


@pytest.mark.parametrize("where, line", to_run(), ids=[where for where, _ in to_run()])
def test_a_cheap_documented_command_runs_verbatim_in_a_new_shell(where, line, tmp_path):
    if " schema export" in line:
        line = line.replace("schema export", f"schema export --out {shlex.quote(str(tmp_path / 'schemas'))}", 1)
    result = subprocess.run(
        ["/bin/sh", "-c", line],
        cwd=ROOT,
        env=new_shell(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    said = result.stdout + result.stderr
    assert result.returncode in (0, 1, 2), (where, result.returncode, said[-2000:])
    assert "not found" not in result.stderr and "No such file or directory" not in said.replace("(No such", ""), said
    assert "Traceback" not in said and "end-of-life" not in said and "DEP0044" not in said, said[-2000:]


def test_the_launchers_refuse_a_checkout_that_is_not_set_up(tmp_path):
    """Copied into a checkout without .venv/node_modules: one line saying to run `make synth`, exit 4."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "scripts").mkdir()
    for name in ("bin/terravixens", "bin/cdktf", "scripts/node-env.sh"):
        shutil.copy2(ROOT / name, tmp_path / name)
    for launcher in ("terravixens", "cdktf"):
        result = subprocess.run(
            [str(tmp_path / "bin" / launcher), "--help"], env=new_shell(tmp_path), capture_output=True, text=True
        )
        assert result.returncode == 4
        assert result.stderr == f"{launcher}: not set up in {tmp_path}: run `make synth` there first\n"


def test_bin_terravixens_works_through_a_symlink_from_another_folder(tmp_path):
    link = tmp_path / "terravixens"
    link.symlink_to(ROOT / "bin" / "terravixens")
    result = subprocess.run(
        [str(link), "validate", str(ROOT / "sites" / "example.yaml")],
        cwd=tmp_path,
        env=new_shell(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "ok — site 'homelab'" in result.stdout, result.stderr


if __name__ == "__main__":  # what is run and what is only resolved, now
    for where, line in LINES:
        print(f"{'run     ' if (where, line) in to_run() else 'resolve '} {where}: {line[:100]}", file=sys.stdout)
