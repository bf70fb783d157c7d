"""The operations' shape: commands import shared steps, never each other, and nothing imports the command line
(docs/architecture.md). Read from the source (every import, also those inside functions), not from what happens to
be loaded."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "terravixens"
# The modules commands share (steps, not commands). Every other module of operations/ is a command's: a new command
# is checked without being listed here, and a new shared module must be listed (until it is, commands importing it
# fail the test below, which is the point: nothing becomes shared by accident).
STEP_MODULES = {
    "__init__",
    "backup",
    "console",
    "etcd",
    "files",
    "journal",
    "kube",
    "observe",
    "offsite",  # a cluster's offsite backup bucket and age identity: snapshot --list, restore-etcd, check (ADR 0059)
    "outcome",
    "scale_in",
    "show",  # the site's view: `terravixens show` prints it, `review` draws its blast radius from it
    "standalone_env",
    "steps",
    "summary",
    "terraform",
    "workspace",
}
STEP_PACKAGES = {"acceptance"}  # the acceptance checks, one module each (check and deploy --check run them)


def ours() -> list[Path]:
    """Every module of the package but the bindings `cdktf get` generates (terravixens/_bindings)."""
    return [path for path in sorted(PACKAGE.rglob("*.py")) if "_bindings" not in path.relative_to(PACKAGE).parts]


COMMANDS = {path.stem for path in (PACKAGE / "operations").glob("*.py")} - STEP_MODULES


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
    assert {
        "deploy",
        "destroy",
        "restore",
        "decommission",
        "dead_member",
        "drift",
        "check",
        "snapshot",
        "upgrade",
    } <= COMMANDS
    for name in sorted(COMMANDS):
        others = {f"terravixens.operations.{other}" for other in COMMANDS - {name}}
        assert not imported(PACKAGE / "operations" / f"{name}.py") & others, name
    users = {
        name for name in COMMANDS if "terravixens.operations.steps" in imported(PACKAGE / "operations" / f"{name}.py")
    }
    assert users >= {"deploy", "destroy", "restore", "decommission", "dead_member", "drift"}


def test_step_modules_import_no_command():
    """A step module (the shared steps, the etcd steps, the scale-in sequence deploy runs) is imported by commands:
    importing one back would make two commands depend on each other through it."""
    commands = {f"terravixens.operations.{name}" for name in COMMANDS}
    shared = [PACKAGE / "operations" / f"{name}.py" for name in sorted(STEP_MODULES)]
    shared += [
        path for package in sorted(STEP_PACKAGES) for path in sorted((PACKAGE / "operations" / package).glob("*.py"))
    ]
    for path in shared:
        assert not imported(path) & commands, path.relative_to(PACKAGE)


def test_nothing_imports_the_command_line():
    """The import cycle cli ↔ operations was how a rule stopping synth became an ImportError."""
    for path in ours():
        if path != PACKAGE / "cli.py":
            assert not {"terravixens.cli"} & imported(path), path.relative_to(PACKAGE.parent)


def _numbers_bound_to_code_names(path: Path) -> list[str]:
    """`NAME = 4` or `A, B = 2, 130` where NAME is the name of an exit code of the one table (FAILED, INTERRUPTED…):
    a module keeping its own copy of a code (tfwrap's `BAD_INPUT, DECLINED, FAILED, INTERRUPTED = 2, 3, 4, 130`)."""
    from terravixens.exitcodes import TABLES

    names = {code.name for table in TABLES for code in table}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (
                list(zip(target.elts, node.value.elts, strict=True))
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                else [(target, node.value)]
            )
            found += [
                f"{name.id} = {value.value} (line {node.lineno})"
                for name, value in pairs
                if isinstance(name, ast.Name)
                and name.id.split("EXIT_")[-1] in names
                and isinstance(value, ast.Constant)
                and type(value.value) is int
            ]
    return found


def test_exit_codes_are_spelled_in_one_place():
    """No module keeps its own list of exit codes any more (upgrade's EXIT_* aliases are gone, tfwrap's names are the
    table's members). The one exception is the first-boot bootstrap (terravixens/standalone/first_boot.py): it runs
    on a stock image before terravixens is there, so it cannot import the table; tests/test_first_boot.py pins its
    numbers to SpecGetExit."""
    for path in ours():
        text = path.read_text()
        if path.name not in ("exitcodes.py", "first_boot.py"):
            assert "class ExitCode" not in text and "IN_SYNC, ERROR, DRIFT = " not in text, path
            assert "= 0, 1, 2, 3" not in text and "= 0, 2, 3, 4, 5, 6, 7" not in text, path
            assert not _numbers_bound_to_code_names(path), (path, _numbers_bound_to_code_names(path))
