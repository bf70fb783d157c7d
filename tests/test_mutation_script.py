"""scripts/mutation.py (`make mutation`, ADR 0051): what mypy rejects, and which test killed a mutant first."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


MUTANTS = """
def x_add__mutmut_orig(a: int) -> int:
    return a + 1


def x_add__mutmut_1(a: int) -> int:
    return a + None


def x_add__mutmut_2(a: int) -> int:
    return a + 2


def x_shared__mutmut_orig(a: int) -> str:
    return a


def x_shared__mutmut_1(a: int) -> str:
    return a


def x_shared__mutmut_2(a: int) -> str:
    return a + ""


class Node:
    def xǁNodeǁname__mutmut_orig(self, index: int) -> str:
        return f"node-{index}"

    def xǁNodeǁname__mutmut_1(self, index: int) -> str:
        return None
"""


def test_mypy_rejects_a_mutant_for_an_error_its_original_does_not_have(tmp_path):
    """The real mypy over a mutants/-like tree: an error the original's copy shares (x_shared__mutmut_1) or no error
    (x_add__mutmut_2) is no rejection; a new error in the mutant's copy is, method copies included."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(textwrap.dedent(MUTANTS))
    command = [sys.executable, "-m", "mypy", "--strict", "--output", "json", "--cache-dir", str(tmp_path / "c"), "pkg"]
    rejected = load_script().rejected_by_mypy(tmp_path, command)
    names = ("x_add__mutmut_1", "x_shared__mutmut_2", "xǁNodeǁname__mutmut_1")
    assert sorted(rejected) == [f"pkg.mod.{name}" for name in names]
    path, start, end, message = rejected["pkg.mod.x_add__mutmut_1"]
    assert (path, end - start) == ("pkg/mod.py", 1) and "None" in message


def test_mypy_is_the_virtualenvs_own_when_the_virtualenv_is_not_on_path(tmp_path, monkeypatch):
    """`.venv/bin/python scripts/mutation.py` with a PATH that lacks the virtualenv: pyproject's bare `mypy` is found
    beside the interpreter (without it the run stopped before its first mutant)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(textwrap.dedent(MUTANTS))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    command = ["mypy", "--strict", "--output", "json", "--cache-dir", str(tmp_path / "c"), "pkg"]
    assert "pkg.mod.x_add__mutmut_1" in load_script().rejected_by_mypy(tmp_path, command)


def test_the_report_credits_each_kill_to_the_test_that_failed_first_in_the_mutants_last_run(tmp_path):
    script = load_script()
    script.KILLS = tmp_path / "mutation-kills.tsv"
    script.KILLS.write_text(
        "m.a\ttests/test_guard.py::test_old\tcall\n"  # an earlier run of m.a (--keep)
        "m.b\ttests/test_guard.py::test_plan_shape[x]\tsetup\n"
        "m.a\ttests/test_guard_usage.py::test_words\tcall\n"
        "m.c\ttests/test_guard.py::test_before_mypy\tcall\n"
        "m.e\ttests/test_guard.py::test_before_it_survived\tcall\n"
    )
    plan = "terravixens/guard/plan.py"
    found = [
        script.Mutant("m.a", plan, "killed"),
        script.Mutant("m.b", plan, "killed"),
        script.Mutant("m.c", plan, "mypy"),
        script.Mutant("m.d", plan, "timeout"),
        script.Mutant("m.e", plan, "survived"),
        script.Mutant("m.f", "terravixens/rules/ruleset.py", "killed"),
    ]
    assert script.killers(found) == {
        "terravixens/guard/": {
            "tests/test_guard_usage.py": 1,
            "tests/test_guard.py": 1,
            "mypy (make lint)": 1,
            "(timeout: no test failed first)": 1,
        },
        "terravixens/rules/": {"(killed: no test failed first)": 1},
    }
