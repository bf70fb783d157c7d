"""The operations' shape: commands import shared steps, never each other, and nothing imports the command line
(docs/architecture.md). Read from the source (every import, also those inside functions), not from what happens to
be loaded."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "terravixens"
COMMANDS = {"deploy", "destroy", "restore", "decommission", "dead_member", "drift", "review", "plan_guard", "validate"}


def imported(path: Path) -> set[str]:
    """Every module `path` imports, by full name (`from a.b import c` counts a.b and a.b.c)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_commands_import_steps_never_each_other():
    assert {path.stem for path in (PACKAGE / "operations").glob("*.py")} >= COMMANDS | {"steps"}
    for name in sorted(COMMANDS):
        others = {f"terravixens.operations.{other}" for other in COMMANDS - {name}}
        assert not imported(PACKAGE / "operations" / f"{name}.py") & others, name
    users = {name for name in COMMANDS
             if "terravixens.operations.steps" in imported(PACKAGE / "operations" / f"{name}.py")}
    assert users >= {"deploy", "destroy", "restore", "decommission", "dead_member", "drift"}


def test_nothing_imports_the_command_line():
    """The import cycle cli ↔ operations was how a rule stopping synth became an ImportError."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != PACKAGE / "cli.py":
            assert not {"terravixens.cli"} & imported(path), path.relative_to(PACKAGE.parent)


def test_exit_codes_are_spelled_in_one_place():
    """No module keeps its own list of exit codes any more (upgrade's EXIT_* are aliases of the table's)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if path.name != "exitcodes.py":
            assert "class ExitCode" not in text and "IN_SYNC, ERROR, DRIFT = " not in text, path
            assert "= 0, 1, 2, 3" not in text and "= 0, 2, 3, 4, 5, 6, 7" not in text, path
