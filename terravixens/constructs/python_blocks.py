"""Blocks written from Python: a construct's resources kept as the JSON cdktf would write, cdktf elements on demand.

Creating a provider binding costs cdktf's Node.js process far more than the round trip (the VM binding alone builds
two dozen token objects, each with a captured stack trace), and every element is resolved again at each of cdktf's
passes over the stack. A node's two resources are most of a synth at fleet scale (docs/adr/0057-blocks-from-python.md).
So, in a stack that accepts them (the app's stacks, terravixens.stacks.base.LayerStack), a construct such as
TalosNode hands its blocks over here as data — exactly the JSON its bindings would write — instead of creating them,
and keeps the ability to create them (`materialize()`):

- the JSON is byte-for-byte what the bindings give (`tests/test_python_blocks.py` synthesizes the test sites both
  ways and compares the files): app.synth() writes the stack's JSON with cdktf and adds these blocks from Python
  (`json_text.dumps`, cdktf's own layout); `stack.to_terraform()` and `Testing.synth(stack)` get them through one
  element of the stack (`BlocksFromPython`) that writes them whenever cdktf asks;
- the rules judge them in the stack's document (`document_of`) and read their configuration as Python wrote it,
  tokens unresolved (`PythonBlock.raw`), with no round trip;
- anything that needs the constructs gets them: reading a construct's element (`TalosNode.vm`, `.apply`), an
  Aspect of the stack, HCL output, a rule error attached to one of them, or `materialize(stack)`. Then every owner
  of the stack creates its elements, in the order the owners were created (the construct tree cdktf would have
  built, so the JSON stays the same), and the stack is an ordinary cdktf stack from then on. Not seen: an Aspect
  attached below the stack (to a node itself) visits the node's elements only once they exist; such a caller reads
  `node.vm` or calls `materialize(stack)` first. Until then `node.node.children` holds no VM nor apply either.

An owner hands its blocks over only when they are plain data: strings without template sequences (only the
reference tokens of constructs of the same stack, resolved by cdktf at synth), ints, bools, None, lists and dicts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jsii
from cdktf import (
    App,
    Aspects,
    DefaultTokenResolver,
    IStackSynthesizer,
    ISynthesisSession,
    StringConcat,
    TerraformElement,
    TerraformStack,
    Tokenization,
)
from constructs import IConstruct

from terravixens.constructs.build import null
from terravixens.constructs.json_text import dumps

WRITER_ID = "blocks_from_python"
# A string token as cdktf encodes it before resolution (its STRING_TOKEN_REGEX); list and map tokens are other markers.
STRING_TOKEN = re.compile(r"\$\{TfToken\[[a-zA-Z0-9:._-]+\]\}")
_ACCEPTS = "_terravixens_accepts_python_blocks"
_REGISTRY = "_terravixens_python_blocks"


class BlockOwner(Protocol):
    """A construct whose blocks may be written from Python."""

    def materialize(self) -> None:
        """Create the cdktf elements of the blocks it handed over (called once, by the stack's registry)."""


@dataclass(frozen=True)
class PythonBlock:
    """One resource or data block: kind ("resource" or "data"), type, logical id, the construct path its element
    would have, its body as cdktf writes it (without the "//" metadata), the keys it overrides (cdktf lists them in
    the stack's metadata), and the construct that owns it."""

    kind: str
    type: str
    logical_id: str
    path: str
    body: dict[str, Any]
    owner: BlockOwner = field(compare=False)
    overrides: tuple[str, ...] = ()
    tokens: frozenset[str] = frozenset()  # the string tokens its body holds, each as a whole string

    @property
    def address(self) -> str:
        return f"{'data.' if self.kind == 'data' else ''}{self.type}.{self.logical_id}"

    def raw(self) -> dict[str, Any]:
        """The block as its element's `to_terraform()` would give it: {kind: {type: {id: body}}}, tokens unresolved
        (shared with the block: read it, never change it)."""
        return {self.kind: {self.type: {self.logical_id: {**self.body, "//": self.metadata()}}}}

    def metadata(self) -> dict[str, Any]:
        return {"metadata": {"path": self.path, "uniqueId": self.logical_id}}

    def written(self, resolved: dict[str, str]) -> dict[str, Any]:
        """The body as synth writes it: cdktf's metadata added, each token replaced by its text in `resolved`."""
        if self.tokens:
            body: dict[str, Any] = _mapped(
                self.body, lambda value: STRING_TOKEN.sub(lambda m: resolved[m.group(0)], value)
            )
        else:
            body = dict(self.body)
        body["//"] = self.metadata()
        return body


def plain(value: Any, tokens: frozenset[str]) -> bool:
    """True when `value` is JSON data cdktf writes unchanged, but for whole strings that are one of `tokens` (string
    tokens of constructs of the same stack, which cdktf resolves): str, int, bool, None, lists and str-keyed dicts,
    no other token marker nor template sequence in a string, no float (cdktf encodes a number token as one)."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            if ("${" in item or "{TfToken[" in item) and item not in tokens:
                return False
        elif kind is dict:
            if any(type(key) is not str for key in item):
                return False
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif not (item is None or kind is bool or kind is int):
            return False
    return True


def _mapped(value: Any, text: Any) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {key: _mapped(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [_mapped(item, text) for item in value]
    return value


def _for_cdktf(value: Any) -> Any:
    """Data handed to cdktf: None as cdktf's null token (jsii drops a None inside an object)."""
    if value is None:
        return null()
    if isinstance(value, dict):
        return {key: _for_cdktf(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_for_cdktf(item) for item in value]
    return value


class StackBlocks:
    """The blocks written from Python in one stack, in the order their owners were created."""

    def __init__(self, stack: TerraformStack):
        self.stack = stack
        self.path: str = stack.node.path  # an owner's blocks sit below it: "<stack path>/<owner id>/<element id>"
        self.pending: list[tuple[BlockOwner, list[PythonBlock]]] = []
        self.materialized = False
        self.silent = False  # set while cdktf writes the rest of the stack, these blocks added from Python
        self.writer = BlocksFromPython(stack, WRITER_ID, self)
        stack.synthesizer = _Synthesizer(self, stack.synthesizer)

    # -------------------------------------------------------------------------------------------- owners
    def add(self, owner: BlockOwner, blocks: list[PythonBlock]) -> None:
        self.pending.append((owner, blocks))

    @property
    def blocks(self) -> list[PythonBlock]:
        return [block for _, blocks in self.pending for block in blocks]

    def materialize(self) -> None:
        """Every owner creates its elements, in creation order; from now on the stack is all cdktf's."""
        self.materialized = True
        pending, self.pending = self.pending, []
        for owner, _ in pending:
            owner.materialize()

    # ------------------------------------------------------------------------------------------ the JSON
    def _resolved_tokens(self) -> dict[str, str]:
        """Each string token of the blocks -> its text in this stack (one round trip for all of them)."""
        tokens = sorted({token for block in self.blocks for token in block.tokens})
        if not tokens:
            return {}
        resolved = Tokenization.resolve(
            tokens, scope=self.stack, preparing=False, resolver=DefaultTokenResolver(StringConcat())
        )
        return dict(zip(tokens, resolved, strict=True))

    def _conflicts(self, document: dict[str, Any]) -> bool:
        """True when cdktf's part of the stack writes an address of these blocks, or lists overrides of one of their
        types: the merge would then depend on where elements sit in the tree, which only cdktf knows."""
        listed = ((document.get("//") or {}).get("metadata") or {}).get("overrides") or {}
        for block in self.blocks:
            if block.logical_id in ((document.get(block.kind) or {}).get(block.type) or {}):
                return True
            if block.overrides and block.type in listed:
                return True
        return False

    def _merge(self, document: dict[str, Any]) -> None:
        resolved = self._resolved_tokens()
        for block in self.blocks:
            document.setdefault(block.kind, {}).setdefault(block.type, {})[block.logical_id] = block.written(resolved)
            if block.overrides:
                metadata = document.setdefault("//", {}).setdefault("metadata", {})
                metadata.setdefault("overrides", {}).setdefault(block.type, []).extend(block.overrides)

    def _cdktf_part(self) -> dict[str, Any]:
        with self.quiet():
            return dict(self.stack.to_terraform())

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """cdktf's passes over the stack leave these blocks out meanwhile (they are added from Python)."""
        before, self.silent = self.silent, True
        try:
            yield
        finally:
            self.silent = before

    def document(self) -> dict[str, Any]:
        """The stack's JSON as it will be written (resolved), with one round trip for cdktf's part of it."""
        if not self.pending:
            return dict(self.stack.to_terraform())
        document = self._cdktf_part()
        if self._conflicts(document):
            self.materialize()
            return dict(self.stack.to_terraform())
        self._merge(document)
        return document

    def write(self, path: Path) -> None:
        """Add the blocks to the JSON cdktf wrote for the rest of the stack."""
        document = json.loads(path.read_text(encoding="utf-8"))
        if self._conflicts(document):
            raise RuntimeError(
                f"stack {self.stack.node.id!r}: an element added during synth (an Aspect below the stack?) writes an "
                f"address or overrides a type that blocks written from Python also write: call "
                f"terravixens.constructs.python_blocks.materialize(stack) before synth"
            )
        self._merge(document)
        path.write_text(dumps(document), encoding="utf-8")  # as cdktf writes it

    def for_cdktf(self) -> dict[str, Any]:
        """What the writer element gives cdktf: the blocks, tokens unresolved (cdktf resolves them)."""
        if self.silent or not self.pending:
            return {}
        found: dict[str, Any] = {}
        for block in self.blocks:
            found.setdefault(block.kind, {}).setdefault(block.type, {})[block.logical_id] = _for_cdktf(
                {**block.body, "//": block.metadata()}
            )
        return found

    def metadata_for_cdktf(self) -> dict[str, Any]:
        if self.silent or not self.pending:
            return {}
        overrides: dict[str, list[str]] = {}
        for block in self.blocks:
            if block.overrides:
                overrides.setdefault(block.type, []).extend(block.overrides)
        return {"overrides": overrides} if overrides else {}

    # ---------------------------------------------------------------------------------------- synth hooks
    def before_prepare(self, app: App) -> None:
        """cdktf's synth starts: create the elements if anything there would need them: an Aspect of the stack
        (cdktf 0.21 invokes Aspects from each stack down; one added to the App is never invoked), HCL output."""
        if not self.pending:
            return
        if Aspects.of(self.stack).all or app.hcl_output or os.environ.get("SYNTH_HCL_OUTPUT") in ("true", "1"):
            self.materialize()


@jsii.implements(IStackSynthesizer)
class _Synthesizer:
    """cdktf's synthesizer of the stack, then the blocks added to the file it wrote."""

    def __init__(self, blocks: StackBlocks, inner: IStackSynthesizer):
        self._blocks = blocks
        self._inner = inner

    def synthesize(self, session: ISynthesisSession) -> None:
        blocks = self._blocks
        if not blocks.pending:
            self._inner.synthesize(session)
            return
        with blocks.quiet():
            self._inner.synthesize(session)
        if blocks.pending:  # a rule error may have made them elements; cdktf wrote everything then
            stack_file = session.manifest.for_stack(blocks.stack).synthesized_stack_path
            blocks.write(Path(session.outdir) / stack_file)


class BlocksFromPython(TerraformElement):
    """The one element that writes a stack's blocks from Python when cdktf asks for the stack's JSON outside a synth
    (`stack.to_terraform()`, `Testing.synth`); empty while cdktf synthesizes (they are added from Python then)."""

    def __init__(self, scope: TerraformStack, id: str, blocks: StackBlocks):
        super().__init__(scope, id)
        self._blocks = blocks

    def to_terraform(self) -> Any:
        return self._blocks.for_cdktf()

    def to_metadata(self) -> Any:
        return self._blocks.metadata_for_cdktf()


# ---------------------------------------------------------------------------------------------------- access
def accept(stack: TerraformStack) -> None:
    """Let constructs created directly in `stack` write their blocks from Python (the app's stacks do)."""
    setattr(stack, _ACCEPTS, True)


def blocks_for(scope: IConstruct) -> StackBlocks | None:
    """The registry of `scope` when it is a stack that accepts blocks from Python and has not become all cdktf's."""
    if not getattr(scope, _ACCEPTS, False):
        return None
    registry: StackBlocks | None = getattr(scope, _REGISTRY, None)
    if registry is None:
        registry = StackBlocks(scope)  # type: ignore[arg-type]  # only stacks are marked by accept()
        setattr(scope, _REGISTRY, registry)
    return None if registry.materialized else registry


def registry_of(stack: IConstruct) -> StackBlocks | None:
    return getattr(stack, _REGISTRY, None)


def materialize(stack: IConstruct) -> None:
    """Create every element of `stack` whose block is written from Python (nothing when there is none)."""
    registry = registry_of(stack)
    if registry is not None:
        registry.materialize()


def pending_blocks(stack: IConstruct) -> list[PythonBlock]:
    registry = registry_of(stack)
    return registry.blocks if registry is not None else []


def document_of(stack: TerraformStack) -> dict[str, Any]:
    """The stack's JSON as synth writes it, resolved: its blocks from Python included."""
    registry = registry_of(stack)
    return registry.document() if registry is not None else dict(stack.to_terraform())


def is_writer(construct: object) -> bool:
    return isinstance(construct, BlocksFromPython)


__all__ = [
    "STRING_TOKEN",
    "BlockOwner",
    "BlocksFromPython",
    "PythonBlock",
    "StackBlocks",
    "accept",
    "blocks_for",
    "document_of",
    "is_writer",
    "materialize",
    "pending_blocks",
    "plain",
    "registry_of",
]
