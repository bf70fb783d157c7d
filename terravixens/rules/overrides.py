"""Stack-level overrides as Python added them: cdktf merges them into the stack's JSON but keeps them where no binding
can read them back.

`TerraformStack.add_override(path, value)` is merged into the stack's JSON after every element wrote its block, so
what it writes belongs to no construct: the rules see its text in the JSON, but not that it is text (an element's
references are told from text by its raw configuration, where cdktf still writes them as tokens). Each call is
recorded here, tokens unresolved, when it is made — `TerraformStack.add_override` is wrapped once, when
terravixens.rules is first imported — and TV007 judges the recorded values as it judges raw configurations.
"""
from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from cdktf import TerraformStack

_RECORDED: WeakKeyDictionary = WeakKeyDictionary()
_MARK = "_terravixens_records_overrides"


def stack_overrides(stack: TerraformStack) -> list[tuple[str, Any]]:
    """(path, value) of every stack-level override added to `stack` from Python, in order."""
    return list(_RECORDED.get(stack, ()))


def metadata_written(stack: TerraformStack) -> set[tuple[str, str, str]]:
    """(kind, type, logical id) of every resource or data block whose `//` metadata a recorded stack-level override
    writes: its construct path is then the override's word, not cdktf's (a block copied from a cdk.tf.json carries
    one), so the block has no construct path the rules can trust."""
    found = set()
    for path, value in stack_overrides(stack):
        tree = value
        for part in reversed(path.split(".")):
            tree = {part: tree}
        for kind in ("resource", "data"):
            types = tree.get(kind)
            for kind_type, items in (types.items() if isinstance(types, dict) else ()):
                for logical_id, body in (items.items() if isinstance(items, dict) else ()):
                    if isinstance(body, dict) and "//" in body:
                        found.add((kind, kind_type, logical_id))
    return found


def unrecorded_keys(stack: TerraformStack, document: dict) -> list[str]:
    """Top-level keys of the stack's JSON that hold stack-level overrides none of the recorded ones explains: added
    from outside Python (a construct library written in TypeScript calls the method in Node.js) or before this
    module was imported. cdktf lists the top-level key of every stack-level override in the JSON's metadata."""
    listed = (((document.get("//") or {}).get("metadata") or {}).get("overrides") or {}).get("stack") or []
    recorded = {path.split(".", 1)[0] for path, _ in stack_overrides(stack)}
    return [key for key in listed if key not in recorded]


def _record_overrides() -> None:
    original = TerraformStack.add_override
    if getattr(original, _MARK, False):
        return

    def add_override(self, path: str, value: Any) -> None:
        _RECORDED.setdefault(self, []).append((path, value))
        original(self, path, value)

    setattr(add_override, _MARK, True)
    add_override.__doc__ = original.__doc__
    TerraformStack.add_override = add_override


_record_overrides()
