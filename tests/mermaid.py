"""A strict reader of the mermaid `terravixens show --format mermaid` writes (and `review` embeds): every line is a
declaration, an edge, a classDef or a class line, anything else fails (tests/test_show.py, tests/test_review.py)."""

from __future__ import annotations

import re

ID = r"[A-Za-z][A-Za-z0-9_]*"
DECLARATION = re.compile(rf'^  ({ID})(\[\["|\[\("|\(")([^"]*)("\]\]|"\)\]|"\))$')
EDGE = re.compile(rf"^  ({ID}) (-->|-\.->) ({ID})$")
CLASS_DEF = re.compile(r"^  classDef [a-z]+ [a-z0-9:#,;-]+$")
CLASS = re.compile(rf"^  class ({ID}(?:,{ID})*) ([a-z]+)$")


def parse(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]], dict[str, set[str]]]:
    """A strict reading of the mermaid this module writes: every line is a declaration, an edge, a classDef or a
    class line, and anything else fails. Returns labels by id, edges, and the ids of each class."""
    lines = text.splitlines()
    assert lines[0] == "graph LR" and text.endswith("\n")
    labels: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    classes: dict[str, set[str]] = {}
    defined: set[str] = set()
    for line in lines[1:]:
        if match := DECLARATION.match(line):
            assert match.group(1) not in labels, f"{match.group(1)} declared twice"
            labels[match.group(1)] = match.group(3)
        elif match := EDGE.match(line):
            edges.append((match.group(1), match.group(2), match.group(3)))
        elif CLASS_DEF.match(line):
            defined.add(line.split()[1])
        elif match := CLASS.match(line):
            assert match.group(2) in defined, f"class {match.group(2)} used before its classDef"
            classes.setdefault(match.group(2), set()).update(match.group(1).split(","))
        else:
            raise AssertionError(f"not a line show writes: {line!r}")
    for source, _, target in edges:
        assert source in labels and target in labels, (source, target)
    for ids in classes.values():
        assert ids <= set(labels), ids - set(labels)
    return labels, edges, classes


def decoded(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label)
