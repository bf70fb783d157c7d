"""One YAML document, built from the parser's events (never recursively), with every safety check on the way.

Why not `yaml.safe_load`: it keeps the last of two equal keys (a pasted node block silently replaces another node),
expands aliases without bound (a 3 KB "billion laughs" file), recurses once per nesting level (a RecursionError
traceback at a few hundred brackets) and turns a 5,000-digit number into a ValueError. Here:

- a duplicate key at any depth is a problem naming both lines. Keys compare as text, so `111` and `'111'` collide
  (both would become VLAN 111), and as the values YAML reads, so `120` and `120.0` (or `1` and `true`) collide too:
  a Python mapping holds them as one key and would keep only the second;
- nesting deeper than `max_depth`, more than `max_values` values, or aliases that expand to more than
  `max_alias_values` values stop the load at once;
- integers are bounded, `.inf`/`.nan` refused, dates stay text, unknown tags are refused;
- merge keys (`<<: *defaults`) work as YAML 1.1 says: explicit keys win, earlier merged mappings win over later ones.

The result records the line of every key and list item (`Lines`), so later problems (pydantic's) can be located,
and how each number was written when YAML reads it as another text (`0120` is 80, `0x78` is 120, `yes` is true), so
later checks can say why a value is not what the file seems to say (terravixens.config.coercion).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import yaml
from yaml import events

from terravixens.inputs.problems import FieldPath, InputError, Problem, field_path, shown

# Only the parser's events are used (never its constructor). libyaml is several times faster than the pure-Python
# parser, which gives the same events.
_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_RESOLVER = yaml.resolver.Resolver()
# types-PyYAML leaves BaseResolver.resolve unannotated: its signature as PyYAML uses it (node kind, text, implicit).
_resolve: Callable[[type[yaml.Node], str, tuple[bool, bool]], str] = _RESOLVER.resolve
_CONSTRUCT = yaml.constructor.SafeConstructor()
_TAG = "tag:yaml.org,2002:"
_MERGE = object()
_NO_KEY = object()
MAX_INT = 2**63 - 1
# First characters for which the resolver has implicit types; anything else plain is a string (no wildcard resolver).
_IMPLICIT_FIRST = frozenset(key for key in _RESOLVER.yaml_implicit_resolvers if key)
if None in _RESOLVER.yaml_implicit_resolvers:  # an explicit check: the app runs under `python -O` (cdktf.json)
    raise ImportError("PyYAML has a wildcard implicit resolver: the first-character shortcut of yaml_strict is wrong")


@dataclass(frozen=True)
class YamlLimits:
    max_depth: int = 32
    max_values: int = 150_000
    max_alias_values: int = 10_000


class Lines:
    """The line (1-based) of each field path; a path without its own line gets its nearest ancestor's.

    Also how a key or a value was written when YAML read it as a number or a boolean of another text (`0120` → 80,
    `+120` → 120, `yes` → True): `written(path)` for the value at a path, `written(path, key=True)` for the key that
    ends it. Nothing is recorded for what reads as written (`120`), nor for strings.
    """

    def __init__(self) -> None:
        self._lines: dict[FieldPath, int] = {}
        self._written: dict[tuple[bool, FieldPath], str] = {}

    def record(self, path: FieldPath, line: int) -> None:
        self._lines.setdefault(path, line)

    def record_written(self, path: FieldPath, text: str, *, key: bool = False) -> None:
        self._written.setdefault((key, path), text)

    def written(self, path: FieldPath, *, key: bool = False) -> str | None:
        return self._written.get((key, path))

    def of(self, path: FieldPath) -> int | None:
        for end in range(len(path), 0, -1):
            line = self._lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


class _Stop(Exception):
    """A problem that makes the rest of the file meaningless (too deep, too big): report it alone, now."""


@dataclass
class _Frame:
    container: dict[object, object] | list[object]
    path: FieldPath
    line: int
    anchor: str | None
    size: int = 1
    key: object = _NO_KEY
    key_line: int = 0
    key_written: str | None = None
    seen: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # key text -> (line, how it was written)
    numbers: dict[object, tuple[int, str]] = field(default_factory=dict)  # numeric/boolean keys by value
    merges: list[dict[object, object]] = field(default_factory=list)


class _Builder:
    def __init__(self, path: Path | str, limits: YamlLimits):
        self.path, self.limits = path, limits
        self.problems: list[Problem] = []
        self.lines = Lines()
        self.anchors: dict[str, tuple[object, int]] = {}
        self.stack: list[_Frame] = []
        self.values = 0
        self.alias_values = 0
        self.documents = 0
        self.root: object = None
        self.written: str | None = None  # how the scalar being emitted was written, when it reads as another text

    # ------------------------------------------------------------------------------------------------- events
    def feed(self, event: events.Event) -> None:
        line = event.start_mark.line + 1 if event.start_mark else 0
        if isinstance(event, events.ScalarEvent):  # the most frequent event first
            self.count(line)
            value = self.scalar(event, line)
            if value is not None and not isinstance(value, str) and value is not _MERGE and str(value) != event.value:
                self.written = event.value
            self.emit(value, line, event.anchor, 1)
            self.written = None
        elif isinstance(event, events.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                self.stop(line, "(file)", "holds more than one YAML document ('---'): keep one document per file")
        elif isinstance(event, (events.MappingStartEvent, events.SequenceStartEvent)):
            self.count(line)
            self.check_collection_tag(event, line)
            if len(self.stack) >= self.limits.max_depth:
                self.stop(
                    line,
                    self.child_label(),
                    f"is nested more than {self.limits.max_depth} levels deep: "
                    f"no terravixens file needs that; check the brackets/indentation",
                )
            container: dict[object, object] | list[object] = {} if isinstance(event, events.MappingStartEvent) else []
            self.stack.append(_Frame(container, self.child_path(), line, event.anchor))
        elif isinstance(event, (events.MappingEndEvent, events.SequenceEndEvent)):
            frame = self.stack.pop()
            if isinstance(frame.container, dict):
                self.apply_merges(frame, frame.container)
            self.emit(frame.container, frame.line, frame.anchor, frame.size)
        elif isinstance(event, events.AliasEvent):
            if event.anchor is None or event.anchor not in self.anchors:
                self.stop(line, self.child_label(), f"uses alias *{event.anchor} before its anchor &{event.anchor}")
            value, size = self.anchors[event.anchor]
            self.alias_values += size
            if self.alias_values > self.limits.max_alias_values:
                self.stop(
                    line,
                    self.child_label(),
                    (
                        f"aliases expand to more than {self.limits.max_alias_values:,} values: write the values out, "
                        f"or use fewer nested aliases"
                    ),
                )
            self.emit(value, line, None, size)

    def count(self, line: int) -> None:
        self.values += 1
        if self.values > self.limits.max_values:
            self.stop(
                line, "(file)", f"holds more than {self.limits.max_values:,} values: check that this is the right file"
            )

    # ------------------------------------------------------------------------------------------------- building
    def child_path(self) -> FieldPath:
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.container, list):
            return (*top.path, len(top.container))
        return top.path if top.key is _NO_KEY or top.key is _MERGE else (*top.path, top.key)

    def child_label(self) -> str:
        return field_path(self.child_path())

    def emit(self, value: object, line: int, anchor: str | None, size: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        top.size += size
        container = top.container
        if isinstance(container, list):
            self.lines.record((*top.path, len(container)), line)
            if self.written is not None:
                self.lines.record_written((*top.path, len(container)), self.written)
            container.append(value)
        elif top.key is _NO_KEY:
            self.take_key(top, value, line)
        else:
            self.take_value(top, container, value, line)

    def take_key(self, top: _Frame, key: object, line: int) -> None:
        if isinstance(key, (dict, list)):
            self.problems.append(
                Problem(field_path(top.path), "a key must be a plain value, not a mapping or a list", line)
            )
            key = f"<complex key at line {line}>"
        top.key, top.key_line, top.key_written = key, line, self.written

    def take_value(self, top: _Frame, container: dict[object, object], value: object, line: int) -> None:
        key, key_line = top.key, top.key_line
        top.key = _NO_KEY
        if key is _MERGE:
            merged = value if isinstance(value, list) else [value]
            mappings = [item for item in merged if isinstance(item, dict)]
            if len(mappings) != len(merged):
                self.problems.append(
                    Problem(
                        field_path(top.path),
                        "'<<' merges a mapping (or a list of mappings) into this one: give it *an_anchored_mapping",
                        line,
                    )
                )
                return
            top.merges.extend(mappings)
            return
        text = str(key)
        first = top.seen.get(text)
        if first is None and isinstance(key, (int, float)):
            first = top.numbers.get(key)  # 120 and 120.0, 1 and true: equal once read, one key in a mapping
        if first is not None:
            first_line, first_written = first
            spelled = self.spellings(first_written or text, top.key_written or text)
            self.problems.append(
                Problem(
                    field_path((*top.path, key)),
                    (
                        f"appears twice in the same mapping (lines {first_line} and {key_line}{spelled}): YAML would "
                        f"keep only the second silently; remove or rename one"
                    ),
                    key_line,
                )
            )
            return
        top.seen[text] = (key_line, top.key_written)
        if isinstance(key, (int, float)):
            top.numbers[key] = (key_line, top.key_written or text)
        container[key] = value
        self.lines.record((*top.path, key), key_line)
        if top.key_written is not None:
            self.lines.record_written((*top.path, key), top.key_written, key=True)
        if self.written is not None:
            self.lines.record_written((*top.path, key), self.written)

    @staticmethod
    def spellings(first: str, second: str) -> str:
        """', written 120 and 120.0: …' when the two keys were written differently (else nothing to add)."""
        if first == second:
            return ""
        return f", written {first} and {second}: one key once read"

    def apply_merges(self, frame: _Frame, container: dict[object, object]) -> None:
        for merged in frame.merges:  # explicit keys win; earlier merged mappings win over later ones
            for key, value in merged.items():
                if str(key) not in frame.seen and not (isinstance(key, (int, float)) and key in frame.numbers):
                    frame.seen[str(key)] = (frame.line, None)
                    if isinstance(key, (int, float)):
                        frame.numbers[key] = (frame.line, str(key))
                    container[key] = value
                    self.lines.record((*frame.path, key), frame.line)

    # ------------------------------------------------------------------------------------------------- scalars
    def check_collection_tag(self, event: events.CollectionStartEvent, line: int) -> None:
        allowed = (None, "!", f"{_TAG}map", f"{_TAG}seq")
        if event.tag not in allowed:
            self.problems.append(
                Problem(self.child_label(), f"tag {shown(event.tag)} is not supported: remove it", line)
            )

    def scalar(self, event: events.ScalarEvent, line: int) -> object:
        tag = event.tag
        value = event.value
        # Fast path for most scalars, as the resolver would decide: quoted text, or plain text whose first character
        # starts no implicit type (numbers, booleans, null, dates, merge keys).
        if tag is None and (not event.implicit[0] or (value and value[0] not in _IMPLICIT_FIRST)):
            return value
        if tag is None or tag == "!":
            tag = _resolve(yaml.ScalarNode, event.value, event.implicit)
        # The C parser's events carry yaml._yaml.Mark, which types-PyYAML does not list among ScalarNode's marks (the
        # node takes either: a mark is only read back for messages).
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)  # type: ignore[arg-type]
        kind = tag.removeprefix(_TAG)
        if kind in ("str", "timestamp"):  # dates stay as written: no field of ours is a date
            return event.value
        if kind == "null":
            return None
        if kind == "bool":
            return _CONSTRUCT.construct_yaml_bool(node)
        if kind == "merge":
            return _MERGE
        if kind == "int":
            digits = event.value.lstrip("+-").replace("_", "")
            if len(digits) > 20:
                return self.bad_number(event.value, line)
            number = _CONSTRUCT.construct_yaml_int(node)
            return number if abs(number) <= MAX_INT else self.bad_number(event.value, line)
        if kind == "float":
            if len(event.value) > 40:
                return self.bad_number(event.value, line)
            real = _CONSTRUCT.construct_yaml_float(node)
            return real if math.isfinite(real) else self.bad_number(event.value, line)
        self.problems.append(Problem(self.child_label(), f"tag {shown(event.tag)} is not supported: remove it", line))
        return event.value

    def bad_number(self, text: str, line: int) -> str:
        self.problems.append(
            Problem(
                self.child_label(),
                (f"number {shown(text)} is out of range: numbers here are finite and below 2^63"),
                line,
            )
        )
        return text

    def stop(self, line: int, where: str, message: str) -> NoReturn:
        self.problems.append(Problem(where, message, line or None))
        raise _Stop


def _parser_problem(error: yaml.YAMLError, text: str) -> Problem:
    if isinstance(error, yaml.reader.ReaderError):
        line = text.count("\n", 0, max(error.position, 0)) + 1
        return Problem("(file)", f"holds a character YAML does not allow ({error.character!r}): remove it", line)
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "(file)"
    return Problem(where, f"is not valid YAML: {shown(problem, 120).strip(chr(39))}")


def load_yaml(
    text: str, path: Path | str, *, what: str = "file", limits: YamlLimits = YamlLimits()
) -> tuple[object, Lines]:
    """The document's data and its lines; raises InputError listing every problem found."""
    builder = _Builder(path, limits)
    parser = _Parser(text)
    try:
        while parser.check_event():
            builder.feed(parser.get_event())
    except _Stop:
        pass
    except yaml.YAMLError as error:
        builder.problems.append(_parser_problem(error, text))
    finally:
        dispose = getattr(parser, "dispose", None)
        if dispose is not None:
            dispose()
    if builder.problems:
        raise InputError(path, builder.problems, what)
    return builder.root, builder.lines
