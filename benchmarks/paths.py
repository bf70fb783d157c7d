"""Paths as the benchmarks print them: relative to the repository, never where this machine keeps things.

A benchmark's report is pasted into the docs (docs/commands.md, the ADRs) and read on other machines: an absolute
path there names one machine's checkout, virtualenv or temporary folder, which no reader has. Inside the repository
a path is shown relative to its root (`.venv/bin/python`); a temporary folder as `$TMPDIR/…`; the home folder as
`~/…`; anything else by its name alone.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _absolute(path: Path | str) -> Path:
    """Absolute without resolving symlinks: the venv's python is a link to an interpreter outside the repository."""
    return Path(os.path.abspath(path))


def shown(path: Path | str) -> str:
    """How a report names `path` (see the module's docstring)."""
    path = _absolute(path)
    for base, name in ((ROOT, None), (_absolute(tempfile.gettempdir()), "$TMPDIR"), (_absolute(Path.home()), "~")):
        if path == base or base in path.parents:
            relative = path.relative_to(base)
            if name is None:
                return str(relative)
            return name if relative == Path(".") else f"{name}/{relative}"
    return path.name


def scrubbed(text: str, **named: Path | str) -> str:
    """`text` (a tool's output) with each absolute path it holds named: the `named` ones first (name -> path, e.g.
    SCRATCH=<a temporary folder>, written $SCRATCH), then the repository (.), the temporary folder and home."""
    replacements = [(str(_absolute(path)), f"${name}") for name, path in named.items()]
    replacements += [
        (str(ROOT), "."),
        (str(_absolute(tempfile.gettempdir())), "$TMPDIR"),
        (str(_absolute(Path.home())), "~"),
    ]
    for path, name in sorted(replacements, key=lambda item: -len(item[0])):
        text = text.replace(path, name)
    return text
