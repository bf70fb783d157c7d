"""What the model would read differently from what the site file says: keys that become one key, VLAN ids written as
something else than a number, numbers YAML reads in another base. Checked on the parsed data, before the model.

pydantic (lax mode) turns `120.0`, `'0120'`, `' 120 '`, `'+120'`, `'1_20'` and `true` into integers; in a map keyed
by integers two such keys become one key and the model keeps the last, silently (a node's VLAN interface replaced by
another). The strict YAML reader already refuses keys equal as text or as numbers (`111` and `'111'`, `120` and
`120.0`); this module finds the rest, with the model's own coercion: every map of the model whose keys are not text
is found by walking the model's annotations, and each key is coerced by pydantic itself (`TypeAdapter` of the key
type), so what collides here is exactly what would collide in the model.

Decided (docs/adr/0032-what-the-site-says-is-what-is-read.md):
- a VLAN id (map key, field or list item) is written as a plain number, `120` (or the same digits quoted): `120.0`,
  `'0120'`, `true`, `0x78`, `0120` are refused, each with what it would have been read as. A VLAN id is an 802.1Q
  tag, an identifier that names interfaces (`eth0.120`) and bridges' allowed lists, not a quantity;
- any integer written with a leading zero (`vm_id: 01101`) or with `:` (`1:20`) is refused: YAML 1.1 reads them in
  base 8 and base 60 (577 and 80), not what a reader of the file sees;
- a VLAN listed twice in a bridge's `vlans` (in any spelling) is refused: the list is a set.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from terravixens.config import model
from terravixens.inputs import Lines, Problem, shown
from terravixens.inputs.problems import field_path

R = TypeVar("R")

PLAIN_NUMBER = re.compile(r"[1-9][0-9]*")


def _is_vlan(metadata: Iterable[object]) -> bool:
    return any(getattr(item, "func", None) is model.vlan_id for item in metadata)


def _strip(annotation: object, metadata: tuple[Any, ...] = ()) -> tuple[object, tuple[Any, ...]]:
    """The annotation without `Annotated`, and every metadata item found on the way."""
    while typing.get_origin(annotation) is typing.Annotated:
        arguments = typing.get_args(annotation)
        annotation, metadata = arguments[0], (*metadata, *arguments[1:])
    return annotation, tuple(metadata)


def _cached(function: Callable[[Any], R]) -> Callable[[Any], R]:
    """Memoized by the annotation's identity: annotations live as long as the model, and not all are hashable."""
    results: dict[int, tuple[object, R]] = {}

    @functools.wraps(function)
    def cached(annotation: Any) -> R:
        found = results.get(id(annotation))
        if found is None:
            found = results[id(annotation)] = (annotation, function(annotation))  # keeps the id's owner alive
        return found[1]

    return cached


VLAN = TypeAdapter(model.VlanId)


@_cached
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


@_cached
def _reaches(annotation: object) -> bool:
    """Whether values of this annotation can hold an integer, a non-text key or a VLAN id (else: not visited)."""
    bare, _ = _strip(annotation)
    if bare is int:
        return True
    origin = typing.get_origin(bare)
    if origin is dict:
        key, value = typing.get_args(bare)
        return _strip(key)[0] is not str or _reaches(value)
    if origin in (list, typing.Union, types.UnionType):
        return any(_reaches(argument) for argument in typing.get_args(bare) if argument is not type(None))
    if isinstance(bare, type) and issubclass(bare, BaseModel):
        return bool(_fields(bare))
    return False


@_cached
def _fields(model_class: type[BaseModel]) -> tuple[tuple[str, object, tuple[Any, ...]], ...]:
    """The fields worth visiting: (name, annotation, metadata)."""
    return tuple(
        (name, field.annotation, tuple(field.metadata))
        for name, field in model_class.model_fields.items()
        if _reaches(field.annotation) or _is_vlan(field.metadata)
    )


class _Check:
    def __init__(self, lines: Lines):
        self.lines = lines
        self.problems: list[Problem] = []

    def add(self, path: tuple[Any, ...], message: str) -> None:
        self.problems.append(Problem(field_path(path), message, self.lines.of(path)))

    # ------------------------------------------------------------------------------------------------ the walk
    def visit(self, annotation: object, metadata: tuple[Any, ...], data: object, path: tuple[Any, ...]) -> None:
        bare, metadata = _strip(annotation, metadata)
        if _is_vlan(metadata):
            self.vlan_id(data, path, key=False)
            return
        if bare is int:
            self.integer(data, path)
            return
        origin = typing.get_origin(bare)
        if origin in (typing.Union, types.UnionType):
            for argument in typing.get_args(bare):
                if argument is not type(None) and _reaches(argument):
                    self.visit(argument, metadata, data, path)
        elif origin is list and isinstance(data, list):
            (item,) = typing.get_args(bare)
            if _is_vlan(_strip(item)[1]):
                self.vlan_list(data, path)
            elif _reaches(item):
                for index, value in enumerate(data):
                    self.visit(item, (), value, (*path, index))
        elif origin is dict and isinstance(data, dict):
            key, value = typing.get_args(bare)
            if _strip(key)[0] is not str:
                self.keys(key, data, path)
            if _reaches(value):
                for name, item in data.items():
                    self.visit(value, (), item, (*path, name))
        elif isinstance(bare, type) and issubclass(bare, BaseModel) and isinstance(data, dict):
            for name, field_annotation, field_metadata in _fields(bare):
                if name in data:
                    self.visit(field_annotation, field_metadata, data[name], (*path, name))

    # ------------------------------------------------------------------------------------------------ keys
    def keys(self, key_annotation: object, data: dict[Any, Any], path: tuple[Any, ...]) -> None:
        """Keys the model coerces to one value: each after the first names the first, with its line; a key alone is
        checked as its type is (a VLAN id's spelling, an integer's base)."""
        vlan = _is_vlan(_strip(key_annotation)[1])
        adapter = VLAN if vlan else _adapter(key_annotation)
        groups: dict[object, list[object]] = {}
        for raw in data:
            try:
                groups.setdefault(adapter.validate_python(raw), []).append(raw)
            except ValidationError:
                continue  # the model says what is wrong with it
        for read, raws in groups.items():
            first = raws[0]
            if len(raws) == 1:
                if vlan:
                    self.vlan_id(first, (*path, first), key=True)
                else:
                    self.integer(first, (*path, first), key=True)
                continue
            line = self.lines.of((*path, first))
            where = f" (line {line})" if line is not None and line != self.lines.of(path) else ""
            what = f"VLAN {read}" if vlan else f"the key {read!r}"
            fix = ", and write VLAN ids as plain numbers" if vlan else ""
            for raw in raws[1:]:
                self.add(
                    (*path, raw),
                    (
                        f"{self.written(raw, (*path, raw), key=True)} and "
                        f"{self.written(first, (*path, first), key=True)}{where} are both {what} once read: the site "
                        f"would keep only one of them, silently; remove one{fix}"
                    ),
                )

    def written(self, raw: object, path: tuple[Any, ...], *, key: bool = False) -> str:
        """A value as the file wrote it: `0120` for an octal, `'0120'` for text, `120.0` for a float."""
        spelled = self.lines.written(path, key=key)
        if spelled is not None:
            return spelled
        return shown(raw) if isinstance(raw, str) else str(raw).lower() if isinstance(raw, bool) else str(raw)

    # ------------------------------------------------------------------------------------------------ VLAN ids
    def vlan_id(self, raw: object, path: tuple[Any, ...], *, key: bool) -> None:
        try:
            read = VLAN.validate_python(raw)
        except ValidationError:
            return  # not a VLAN id at all, or out of range: the model says so
        written = self.written(raw, path, key=key)
        if isinstance(raw, bool):
            self.add(
                path,
                f"VLAN id {written} is a YAML boolean (true/yes/on), which would be read as VLAN {read}: "
                f"write the VLAN id as a number, e.g. 111",
            )
        elif isinstance(raw, float):
            self.add(
                path,
                f"VLAN id {written} is written as a decimal number, which would silently become {read}: "
                f"a VLAN id is a whole number (an 802.1Q tag, 1-4094); write {read}",
            )
        elif isinstance(raw, str):
            if not PLAIN_NUMBER.fullmatch(raw):
                self.add(
                    path,
                    f"VLAN id {written} is text that would be read as VLAN {read}: write it as a plain "
                    f"number, {read}{_octal_hint(raw.strip())}",
                )
        elif isinstance(raw, int) and self.lines.written(path, key=key) is not None:
            if _reads_in_another_base(written):
                fix = f"write {read} if you meant VLAN {read}, or {_fix_digits(written)}"
            else:
                fix = f"write VLAN ids as plain numbers, {read}"
            self.add(path, f"VLAN id written {written} is read as {read}{_base_reason(written)}: {fix}")

    def vlan_list(self, data: list[Any], path: tuple[Any, ...]) -> None:
        """A bridge's allowed VLANs: each a VLAN id, none twice in any spelling (the list is a set: Proxmox'
        `bridge-vids`); a repeat is named with the first, not also for its spelling."""
        first: dict[int, int] = {}
        for index, raw in enumerate(data):
            try:
                read = VLAN.validate_python(raw)
            except ValidationError:
                continue  # the model says what is wrong with it
            if read not in first:
                first[read] = index
                self.vlan_id(raw, (*path, index), key=False)
                continue
            line = self.lines.of((*path, first[read]))
            self.add(
                (*path, index),
                (
                    f"VLAN {read} is listed twice (items {first[read]} and {index}"
                    f"{f', line {line}' if line else ''}): a bridge lets a VLAN through once; remove one"
                ),
            )

    # ------------------------------------------------------------------------------------------------ integers
    def integer(self, raw: object, path: tuple[Any, ...], *, key: bool = False) -> None:
        """An integer YAML read in base 8 or 60: not the number a reader of the file sees."""
        written = self.lines.written(path, key=key)
        if written is None or isinstance(raw, bool) or not isinstance(raw, int):
            return
        if _reads_in_another_base(written):
            self.add(
                path,
                f"written {written}, which is read as {raw}{_base_reason(written)}: "
                f"{_fix_digits(written)}, or {raw} if you meant that",
            )


def _digits(written: str) -> str:
    return written.lstrip("+-").replace("_", "")


def _reads_in_another_base(written: str) -> bool:
    digits = _digits(written)
    return ":" in digits or (len(digits) > 1 and digits[0] == "0" and digits[1].isdigit())


def _base_reason(written: str) -> str:
    digits = _digits(written).lower()
    if ":" in digits:
        return " (YAML 1.1 reads numbers with ':' in base 60)"
    if digits.startswith("0x"):
        return " (hexadecimal)"
    if digits.startswith("0b"):
        return " (binary)"
    if len(digits) > 1 and digits[0] == "0":
        return " (YAML 1.1 reads a leading 0 as octal)"
    return ""


def _fix_digits(written: str) -> str:
    """The fix for a number read in base 8 or 60: the digits a reader sees, without what changes the base."""
    if ":" in written:
        return "write the number without ':'"
    sign = "-" if written.startswith("-") else ""
    return f"write {sign}{_digits(written).lstrip('0') or '0'} without the leading zero"


def _octal_hint(text: str) -> str:
    """For quoted digits with a leading zero: unquoted, they would not even be that number."""
    digits = text.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0" and digits.isdigit():
        octal = f": {int(digits, 8)}" if set(digits) <= set("01234567") else ""
        return f" (unquoted, {text} would be octal in YAML 1.1{octal})"
    return ""


def problems(data: object, lines: Lines | None = None) -> list[Problem]:
    """Every place where the model would read the site file differently from what it says (nothing raised)."""
    check = _Check(lines or Lines())
    if isinstance(data, dict):
        check.visit(model.Site, (), data, ())
    return check.problems


def coerced_key_maps(annotation: object = None, path: str = "") -> list[str]:
    """The maps of the site model whose keys are not text (pydantic coerces them), as dotted paths with `<name>` for
    any key and `<n>` for any list index: what `problems` checks for keys that become one."""
    bare, _ = _strip(model.Site if annotation is None else annotation)
    found: list[str] = []
    origin = typing.get_origin(bare)
    if origin in (typing.Union, types.UnionType):
        for argument in typing.get_args(bare):
            found += coerced_key_maps(argument, path) if argument is not type(None) else []
    elif origin is list:
        found += coerced_key_maps(typing.get_args(bare)[0], f"{path}.<n>")
    elif origin is dict:
        key, value = typing.get_args(bare)
        if _strip(key)[0] is not str:
            found.append(path.lstrip("."))
        found += coerced_key_maps(value, f"{path}.<name>")
    elif isinstance(bare, type) and issubclass(bare, BaseModel):
        for name, field in bare.model_fields.items():
            found += coerced_key_maps(field.annotation, f"{path}.{name}")
    return found


__all__ = ["coerced_key_maps", "problems"]
