"""Stack-level overrides as Python added them: cdktf merges them into the stack's JSON but keeps them where no binding
can read them back.

`TerraformStack.add_override(path, value)` is merged into the stack's JSON after every element wrote its block, so
what it writes belongs to no construct: the rules see its text in the JSON, but not that it is text (an element's
references are told from text by its raw configuration, where cdktf still writes them as tokens). Each call is
recorded here, tokens unresolved, when it is made, and TV007 judges the recorded values as it judges raw
configurations.

Recording is asked for per stack, explicitly: `record(stack)`, called by the terravixens stack base class when a
stack is created (terravixens.stacks.base) and by `apply_rules(stack)` for any other stack. It shadows that stack's
`add_override` with one that writes the call down first; cdktf's classes are never patched, so what is recorded
does not depend on which module was imported first. An override added to a stack before it records (or from
outside Python: a construct library written in TypeScript calls the method in Node.js) is listed in the JSON's
metadata without a record: TV007 refuses it (`unrecorded_keys`) instead of passing text it cannot read.
"""

from __future__ import annotations

import types
from typing import Any
from weakref import WeakKeyDictionary

from cdktf import TerraformStack

_RECORDED: WeakKeyDictionary[TerraformStack, list[tuple[str, Any]]] = WeakKeyDictionary()


def record(stack: TerraformStack) -> None:
    """From now on, write down every stack-level override added to `stack` from Python (`stack.add_override`), then
    add it as cdktf does. Idempotent; the stack's class and cdktf's are left as they are."""
    if stack in _RECORDED:
        return
    _RECORDED[stack] = []
    stack.add_override = types.MethodType(_recording_add_override, stack)  # type: ignore[method-assign]


def _recording_add_override(stack: TerraformStack, path: str, value: Any) -> None:
    _RECORDED[stack].append((path, value))
    type(stack).add_override(stack, path, value)


def stack_overrides(stack: TerraformStack) -> list[tuple[str, Any]]:
    """(path, value) of every stack-level override added to `stack` from Python since it records, in order."""
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
            for kind_type, items in types.items() if isinstance(types, dict) else ():
                for logical_id, body in items.items() if isinstance(items, dict) else ():
                    if isinstance(body, dict) and "//" in body:
                        found.add((kind, kind_type, logical_id))
    return found


def unrecorded_keys(stack: TerraformStack, document: dict[str, Any]) -> list[str]:
    """Top-level keys of the stack's JSON that hold stack-level overrides none of the recorded ones explains: added
    from outside Python (a construct library written in TypeScript calls the method in Node.js) or before the stack
    recorded them (`record`). cdktf lists the top-level key of every stack-level override in the JSON's metadata."""
    listed = (((document.get("//") or {}).get("metadata") or {}).get("overrides") or {}).get("stack") or []
    recorded = {path.split(".", 1)[0] for path, _ in stack_overrides(stack)}
    return [key for key in listed if key not in recorded]
