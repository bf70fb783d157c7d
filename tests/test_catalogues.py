"""Catalogues kept in prose are held to the code they describe (issue 29): the guard's module docstring lists every
check of `ALL_CHECKS`, the docs' ranges of rule and check codes are the ones that ship, and the ADR index lists
every record. The code is the catalogue; these tests fail as soon as prose falls behind it."""

from __future__ import annotations

import re
from pathlib import Path

import terravixens.guard
from terravixens.guard.checks import ALL_CHECKS
from terravixens.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent
# Documents that say what ships today (ADRs are records of their time: PG001–PG009 was ADR 0021's catalogue).
CURRENT_DOCS = ["README.md", "docs/architecture.md", "docs/commands.md", "docs/json-output.md"]
CODE_RANGE = re.compile(r"\b(TV|PG)(\d{3})[–-](TV|PG)(\d{3})\b")
# Ranges that name part of a catalogue on purpose, and what they are.
PARTS = {"PG001–PG003": "the checks that judge the per-node view (terravixens/guard/nodes.py)"}


def test_the_guard_docstring_lists_every_check_in_code_order():
    listed = re.findall(r"^- (PG\d{3}) (\w+):", terravixens.guard.__doc__ or "", re.MULTILINE)
    assert listed == [(check.code, check.name) for check in ALL_CHECKS]


def ranges(text: str) -> list[str]:
    return [f"{a}{m}–{b}{n}" for a, m, b, n in CODE_RANGE.findall(text)]


def test_the_docs_ranges_of_codes_are_the_catalogues():
    whole = {
        f"{ALL_RULES[0].code}–{ALL_RULES[-1].code}",
        f"{ALL_CHECKS[0].code}–{ALL_CHECKS[-1].code}",
    }
    found = {(name, found) for name in CURRENT_DOCS for found in ranges((ROOT / name).read_text())}
    assert found and {(name, code) for name, code in found if code not in whole | set(PARTS)} == set()


def test_a_stale_range_is_seen():
    assert ranges("rules (TV001–TV007), a plan guard (PG001-PG009)") == ["TV001–TV007", "PG001–PG009"]


def test_the_adr_index_lists_every_record():
    folder = ROOT / "docs" / "adr"
    index = (folder / "README.md").read_text()
    records = sorted(path.name for path in folder.glob("[0-9][0-9][0-9][0-9]-*.md"))
    linked = sorted(set(re.findall(r"\]\(([0-9]{4}-[^)]+\.md)\)", index)))
    assert linked == records
