"""One look at a whole stack, shared by every rule: its resolved JSON, its constructs, and who owns each block.

Each call into cdktf crosses to its Node.js process and back (a jsii round trip, a fraction of a millisecond), so the
rules read a stack in bulk instead of asking each construct: the stack's JSON once (`to_terraform()`, references
rendered as `${type.name...}`), its constructs once (`find_all()`), and the path of a construct only for the few
classes a rule asks about (TalosNode, ClusterConfig). Resource and data blocks are taken from the JSON, where cdktf
writes each block's construct path (`"//": {"metadata": {"path": …}}`); a block belongs to the nearest enclosing
construct of a class when that construct's path is a prefix of the block's path. What a rule reads is what
Terraform will read: overrides, stack-level overrides and Aspects included.

Blocks written from Python (terravixens.constructs.python_blocks: a node's VM and apply in the app's stacks) are in
the JSON as synth writes them, and their configuration is read as Python wrote it (`raw_configuration`); they have
no element until something asks for one (`element_of`, `construct_at`, `block_elements`), which creates the
elements of every such block of the stack at once.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar, cast, overload

from cdktf import (
    DefaultTokenResolver,
    StringConcat,
    TerraformDataSource,
    TerraformElement,
    TerraformResource,
    TerraformStack,
    Tokenization,
)
from constructs import IConstruct, Node

from terravixens.constructs import python_blocks

C = TypeVar("C", bound=IConstruct)


def imported_class(module: str, name: str) -> type | None:
    """The construct class `name` of `module` when that module is imported, else None. A class never imported has no
    instance in any stack, and importing it to look (with the bindings it imports) would cost every synth."""
    loaded = sys.modules.get(module)
    found: type | None = getattr(loaded, name, None) if loaded is not None else None
    return found


BLOCK_KINDS = ("resource", "data")
PATH_SEP = "/"


@dataclass(frozen=True)
class Block:
    """A resource or data block as synthesized: kind ("resource" or "data"), type, logical id, resolved body, and
    the path of the construct that wrote it. A block without a construct path in the JSON — one a stack-level
    `add_override` added whole, or a remote state (cdktf writes no path for those) — or whose path a stack-level
    override wrote (terravixens.rules.overrides.metadata_written), or one written as a list of objects (Terraform
    reads it as a block; only an override writes one) has the stack's path and `pathless` set."""

    kind: str
    type: str
    logical_id: str
    body: dict[str, Any]
    path: str
    pathless: bool = False

    @property
    def address(self) -> str:
        prefix = "data." if self.kind == "data" else ""
        return f"{prefix}{self.type}.{self.logical_id}"

    def nested(self, key: str) -> dict[str, Any]:
        """A nested block of the body (lifecycle) as one object: Terraform's JSON takes it as an object or as a list
        of objects (an override may write either)."""
        value = self.body.get(key)
        merged: dict[str, Any] = {}
        for part in value if isinstance(value, list) else [value]:
            if isinstance(part, dict):
                merged.update(part)
        return merged

    def wrapped(self) -> dict[str, Any]:
        """The block as its element's `to_terraform()` nests it: {kind: {type: {logical id: body}}}."""
        return {self.kind: {self.type: {self.logical_id: self.body}}}


def _entries(value: object) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(key, object, listed) of each entry of a JSON object, as Terraform reads it: an object, or a list of objects
    (its JSON syntax takes a block as a list of objects too; cdktf never writes one, a stack-level override may).
    `listed` is True for entries that came from a list."""
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, dict):
            continue
        for key, entry in item.items():
            for part in entry if isinstance(entry, list) else [entry]:
                if isinstance(part, dict):
                    yield key, part, isinstance(value, list) or isinstance(entry, list)


class StackView:
    """A stack as the rules read it; built once per stack when the rules run (terravixens.rules.RuleSet)."""

    def __init__(self, stack: TerraformStack):
        self.stack = stack
        self._node = stack.node
        self.name: str = self._node.id
        self.document: dict[str, Any] = python_blocks.document_of(stack)
        # After the document: a conflict there makes the blocks elements (python_blocks.StackBlocks.document).
        written = python_blocks.pending_blocks(stack)
        self._python = {(block.kind, block.type, block.logical_id): block for block in written}
        self._python_paths = {block.path for block in written}
        self.constructs: list[IConstruct] = self._constructs()
        self._paths: dict[int, str] = {}
        self._nodes: dict[int, Node] = {}
        self._by_path: dict[str, IConstruct] = {}
        self._owners: dict[type, dict[str, IConstruct]] = {}
        self._documents: dict[int, dict[str, Any]] = {}
        self._remember(stack, self._node)

    # ------------------------------------------------------------------------------------------------ the JSON
    @cached_property
    def blocks(self) -> list[Block]:
        from terravixens.rules.overrides import metadata_written

        found: list[Block] = []
        overridden = metadata_written(self.stack)
        for kind in BLOCK_KINDS:
            for kind_type, items, listed in _entries(self.document.get(kind)):
                for logical_id, body, in_list in _entries(items):
                    path = ((body.get("//") or {}).get("metadata") or {}).get("path")
                    if path is None or listed or in_list or (kind, kind_type, logical_id) in overridden:
                        # a stack-level override wrote the block or its path, or a remote state (cdktf writes none)
                        found.append(
                            Block(kind, kind_type, logical_id, body, self._paths[id(self.stack)], pathless=True)
                        )
                    else:
                        found.append(Block(kind, kind_type, logical_id, body, path))
        return found

    def blocks_of(self, types: Iterable[str]) -> list[Block]:
        return [block for block in self.blocks if block.type in types]

    def python_block(self, block: Block) -> python_blocks.PythonBlock | None:
        """The block as Python wrote it, when it has no element yet (terravixens.constructs.python_blocks)."""
        if block.pathless:
            return None
        return self._python.get((block.kind, block.type, block.logical_id))

    def raw_configuration(self, block: Block) -> tuple[TerraformElement | python_blocks.PythonBlock, dict[str, Any]]:
        """Who wrote a block and its configuration before resolution (tokens as cdktf encodes them): a block written
        from Python as Python wrote it (no round trip), any other as its element gives it (`element_of`)."""
        written = self.python_block(block)
        if written is not None:
            return written, written.raw()
        return self.element_of(block)

    def _constructs(self) -> list[IConstruct]:
        return [construct for construct in self._node.find_all() if not python_blocks.is_writer(construct)]

    def _materialize(self) -> None:
        """Every block written from Python becomes an element; the constructs are read again."""
        if not self._python:
            return
        python_blocks.materialize(self.stack)
        self._python, self._python_paths = {}, set()
        self.constructs = self._constructs()
        for cached in ("block_elements", "current_block_elements", "_writers"):
            self.__dict__.pop(cached, None)

    # ------------------------------------------------------------------------------------------ the constructs
    @overload
    def of_class(self, kind: type[C]) -> list[C]: ...

    @overload
    def of_class(self, kind: tuple[type, ...]) -> list[Any]: ...

    def of_class(self, kind: type | tuple[type, ...]) -> list[Any]:
        return [construct for construct in self.constructs if isinstance(construct, kind)]

    @cached_property
    def block_elements(self) -> list[TerraformResource | TerraformDataSource]:
        """The resource and data source constructs (each writes one block, unless moved); blocks written from Python
        become elements first."""
        self._materialize()
        return self.of_class((TerraformResource, TerraformDataSource))

    @cached_property
    def current_block_elements(self) -> list[TerraformResource | TerraformDataSource]:
        """The resource and data source constructs there are now (a block written from Python has none)."""
        return self.of_class((TerraformResource, TerraformDataSource))

    def _remember(self, construct: IConstruct, node: Node | None = None) -> str:
        key = id(construct)
        if key not in self._paths:
            node = node or construct.node
            self._nodes[key] = node
            self._paths[key] = node.path
            self._by_path[self._paths[key]] = construct
        return self._paths[key]

    def path_of(self, construct: IConstruct) -> str:
        """The construct's path: computed from the scope and id it recorded (terravixens.constructs.build.locate),
        or asked of cdktf (two round trips) for any other construct."""
        from terravixens.constructs.build import location_of

        key = id(construct)
        if key in self._paths:
            return self._paths[key]
        location = location_of(construct)
        if location is None:
            return self._remember(construct)
        scope, child_id = location
        parent = self.path_of(scope)
        child = child_id.replace(PATH_SEP, "--")
        path = f"{parent}{PATH_SEP}{child}" if parent else child
        self._paths[key] = path
        self._by_path[path] = construct
        return path

    def owner(self, block: Block, kind: type[C]) -> C | None:
        """The nearest construct of class `kind` that encloses the block, else None."""
        if kind not in self._owners:
            self._owners[kind] = {self.path_of(construct): construct for construct in self.of_class(kind)}
        owners = self._owners[kind]
        if not owners:
            return None
        path = block.path
        while path:
            if path in owners:
                return cast(C, owners[path])  # the cache of `kind` holds instances of `kind` only
            path = path.rpartition(PATH_SEP)[0]
        return None

    @cached_property
    def _writers(self) -> dict[tuple[str, str, str], TerraformResource | TerraformDataSource]:
        """(kind, type, logical id) of a block -> the element that wrote it, as far as order tells: cdktf merges
        elements into the stack's JSON in tree order, so the n-th element of a kind and type wrote the n-th block of
        that kind and type. A guess to be verified (`element_of`); kinds and types whose counts differ (a moved
        resource) are left out."""
        from terravixens.constructs.build import declared_type

        elements: dict[tuple[str, str], list[TerraformResource | TerraformDataSource]] = defaultdict(list)
        for element in self.current_block_elements:
            kind = "resource" if isinstance(element, TerraformResource) else "data"
            kind_type = declared_type(type(element)) or element.terraform_resource_type
            elements[(kind, kind_type)].append(element)
        blocks: dict[tuple[str, str], list[Block]] = defaultdict(list)
        for block in self.blocks:
            if not block.pathless and self.python_block(block) is None:
                blocks[(block.kind, block.type)].append(block)
        writers: dict[tuple[str, str, str], TerraformResource | TerraformDataSource] = {}
        for key, written in blocks.items():
            if len(elements.get(key, ())) == len(written):
                writers.update(
                    {
                        (block.kind, block.type, block.logical_id): element
                        for block, element in zip(written, elements[key], strict=True)
                    }
                )
        return writers

    def element_of(self, block: Block) -> tuple[TerraformElement, dict[str, Any]]:
        """The element that wrote a block and its own (unresolved) configuration, which names the block it writes:
        the guess by order is checked against it, and the construct at the block's path is taken otherwise. Not for
        a `pathless` block: its writer, if any, is not among the stack's constructs by path."""
        if block.pathless:
            raise LookupError(f"{block.address} has no construct path (a stack-level override or a remote state)")
        if self.python_block(block) is not None:
            self._materialize()
        element = self._writers.get((block.kind, block.type, block.logical_id))
        if element is not None:
            raw = element.to_terraform()
            if block.logical_id in ((raw.get(block.kind) or {}).get(block.type) or {}):
                return element, raw
        at_path = self.construct_at(block.path)
        if not isinstance(at_path, TerraformElement):
            raise LookupError(f"{block.address}: the construct at {block.path!r} writes no block")
        return at_path, at_path.to_terraform()

    def construct_at(self, path: str) -> IConstruct:
        """The construct at a path of this stack, found from the nearest construct whose path is known (the element
        of a block written from Python is created first)."""
        if path in self._python_paths:
            self._materialize()
        ancestor = path
        while ancestor not in self._by_path:
            ancestor = ancestor.rpartition(PATH_SEP)[0]
            if not ancestor:
                raise LookupError(f"{path!r} is not a construct path of stack {self.name!r}")
        construct = self._by_path[ancestor]
        for part in path[len(ancestor) :].strip(PATH_SEP).split(PATH_SEP) if path != ancestor else ():
            node = self._nodes.get(id(construct))
            if node is None:
                node = self._nodes[id(construct)] = construct.node
            construct = node.find_child(part)
            ancestor = f"{ancestor}{PATH_SEP}{part}"  # a child's path is its parent's, a separator and its id
            self._paths[id(construct)] = ancestor
            self._by_path[ancestor] = construct
        return construct

    # ------------------------------------------------------------------------------------------- other stacks
    @cached_property
    def _cross_stack_origins(self) -> dict[str, TerraformStack]:
        """The remote state cdktf adds for a cross-stack reference (`cross-stack-reference-input-<stack path>`) ->
        the stack it reads. Asked of cdktf only when a rule follows such a reference."""
        origins: dict[str, TerraformStack] = {}
        for construct in self._node.root.node.find_all():
            if isinstance(construct, TerraformStack) and construct is not self.stack:
                path = construct.node.path
                for name in {path, path.replace(PATH_SEP, "--")}:
                    origins[f"cross-stack-reference-input-{name}"] = construct
        return origins

    def cross_stack_output(self, remote_state: str, output: str) -> tuple[str, object] | None:
        """(stack name, value) of the output another stack of the app writes for a cross-stack reference read
        through `remote_state`, else None (a remote state of another kind, or an output not found)."""
        origin = self._cross_stack_origins.get(remote_state)
        if origin is None:
            return None
        if id(origin) not in self._documents:
            self._documents[id(origin)] = python_blocks.document_of(origin)
        written = (self._documents[id(origin)].get("output") or {}).get(output)
        if not isinstance(written, dict):
            return None
        return origin.node.id, written.get("value")

    # -------------------------------------------------------------------------------------------- resolution
    @cached_property
    def _resolver(self) -> DefaultTokenResolver:
        return DefaultTokenResolver(StringConcat())

    def resolved(self, raw: Any) -> dict[str, Any]:
        """An element's own configuration (`raw`: its `to_terraform()`, read already) resolved as the stack's JSON
        holds it (for elements that are not resource or data blocks). A configuration without any token is its own
        resolution: no round trip then."""
        if not holds_tokens(raw):
            return cast(dict[str, Any], raw)
        resolved: dict[str, Any] = Tokenization.resolve(raw, scope=self.stack, preparing=False, resolver=self._resolver)
        return resolved


def holds_tokens(value: Any) -> bool:
    """True when a raw configuration (an element's `to_terraform()`) may change when cdktf resolves it: a string
    holding a token's encoding (`${TfToken[…]}`, a list's `#{TfToken[…]}`), a number (cdktf encodes a number token
    as one), or anything but plain JSON data (an object of Node.js)."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            if "TfToken[" in item:
                return True
        elif kind is dict:
            pending.extend(item.keys())
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif not (item is None or kind is bool or kind is int):
            return True
    return False
