"""TV007 NoTemplateSequences: no text reaches the JSON that Terraform would evaluate as a template.

Terraform evaluates `${…}` and `%{…}` in every string of a resource, data source, provider, output or local; cdktf
copies strings into the JSON unchanged. The site model refuses both sequences in site text (docs/adr/0016); this
rule is the second net, for library users who build constructs from props directly.

How text is told from terravixens' own expressions: before resolution, cdktf encodes every token (a reference or a
function call) as `${TfToken[TOKEN.n]}`, and resolves it to an interpolation in its place (`${aws_x.y.id}`). So an
element's raw configuration is scanned as Terraform scans the resolved string, tokens in place: a `${` that starts an
encoding is cdktf's, any other is text, and no sequence runs across a token (`100%` + a reference + `{x}` resolves to
`100%${aws_x.y.id}{x}`: no directive; `$` + a reference makes `$${`, an escape). Inside a token, cdktf escapes `${`
in a function's string arguments (`$${`) but not `%{`, and cdktf itself never writes a directive: an unescaped `%{`
anywhere in the resolved JSON is text too. `$${` and `%%{` are escapes
(Terraform reads them as a literal `${` and `%{`) and pass. Variable defaults and descriptions and the `terraform`
block (backend) are read literally by Terraform, so they are not checked; a variable's validation error_message and
an import block's id are templates, and are. A stack-level override belongs to no element: its value is
judged as recorded when it was added (terravixens.rules.overrides), tokens unresolved, like a raw configuration; a
stack-level override that was not recorded (added from Node.js, or before the stack recorded its overrides) cannot be
judged, and fails the rule.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from cdktf import TerraformBackend, TerraformDataSource, TerraformElement, TerraformResource, TerraformVariable

from terravixens.constructs.python_blocks import PythonBlock
from terravixens.inputs import shown_at
from terravixens.rules.base import Rule
from terravixens.rules.overrides import stack_overrides, unrecorded_keys
from terravixens.rules.view import Block, StackView

# Left to right, as Terraform scans a template: an escape is consumed whole, so `$$${` is an escape too.
SEQUENCE = re.compile(r"\$\$\{|%%\{|([$%]\{)")
TOKEN = re.compile(r"\$\{TfToken\[TOKEN\.\d+\]\}")
LITERAL_ELEMENTS = (TerraformVariable, TerraformBackend)


def unescaped(text: str) -> list[str]:
    """The template sequences Terraform would evaluate in `text`, in order."""
    return [match.group(1) for match in SEQUENCE.finditer(text) if match.group(1)]


@lru_cache(maxsize=1 << 16)
def _text_sequences(value: str) -> tuple[str, ...]:
    """The sequences of a raw configuration's string that are text: scanned with cdktf's token encodings in place,
    as Terraform scans the interpolations they resolve to, the `${` that starts an encoding left out. Each distinct
    string once (every node's blocks repeat the same references)."""
    tokens = {match.start() for match in TOKEN.finditer(value)}
    return tuple(match.group(1) for match in SEQUENCE.finditer(value) if match.group(1) and match.start() not in tokens)


def _as_read(element: TerraformElement, raw: Any) -> tuple[TerraformElement, Any]:
    """An element and its own (unresolved) configuration, read already."""
    return element, raw


def _strings(value: object, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """(path, text) of every string in a JSON-like value, keys of maps included, in document order."""
    found: list[tuple[tuple[Any, ...], str]] = []

    def walk(value: object, path: tuple[Any, ...]) -> None:
        if isinstance(value, str):
            found.append((path, value))
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    found.append(((*path, key), key))
                walk(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*path, index))

    walk(value, path)
    return found


def _imports(document: dict[str, Any]) -> dict[str, list[Any]]:
    """The import blocks of the stack's JSON by the address they import to. Their `id` is an expression: Terraform
    evaluates a template in it at plan time."""
    found: dict[str, list[Any]] = {}
    for entry in document.get("import") or []:
        if isinstance(entry, dict) and isinstance(entry.get("to"), str):
            found.setdefault(entry["to"], []).append(entry)
    return found


def _cdktf_workspace(path: tuple[Any, ...], value: str) -> bool:
    """The workspace cdktf writes, as a plain string, into the remote state of each cross-stack reference (every
    backend's getRemoteStateDataSource): an expression of cdktf's that reads only the workspace's name."""
    return (
        value == "${terraform.workspace}"
        and len(path) == 4
        and path[:2] == ("data", "terraform_remote_state")
        and path[3] == "workspace"
    )


def _label(element: TerraformElement, block: Block | None) -> str:
    if block is not None:
        return block.address
    if isinstance(element, TerraformResource):
        return f"{element.terraform_resource_type}.{element.friendly_unique_id}"
    if isinstance(element, TerraformDataSource):
        return f"data.{element.terraform_resource_type}.{element.friendly_unique_id}"
    return element.node.path


def _where(path: tuple[Any, ...], element: TerraformElement) -> str:
    """The attribute path inside the element's block (resource/data blocks start with kind, type and id)."""
    if isinstance(element, (TerraformResource, TerraformDataSource)) and len(path) > 3:
        path = path[3:]
    return ".".join(str(part) for part in path) or "(block)"


class NoTemplateSequences(Rule):
    code = "TV007"
    name = "NoTemplateSequences"
    why = (
        "Terraform evaluates ${…} and %{…} in every JSON string: text from a site file or from props that carries "
        "one would run at plan or apply time (read files, or the environment that holds the Proxmox token and S3 "
        "keys during a deploy)."
    )

    def check(self, view: StackView) -> None:
        # Resource and data blocks from the stack's JSON (most carry no sequence at all and are skipped); an
        # element's raw configuration is read only when its block, or an import block its element writes, holds one.
        imports = _imports(view.document)
        for block in view.blocks:
            if not block.pathless:  # a remote state is judged with the other elements, an override's block below
                body = block.wrapped()
                if block.address in imports:
                    body = {**body, "import": imports[block.address]}
                self._check(view, body, functools.partial(view.raw_configuration, block), block)
        self._check_validation_messages(view)
        for path, value in stack_overrides(view.stack):
            for where, text in _strings(value):
                found = _text_sequences(text)
                if found:
                    at = (*path.split("."), *where)
                    shown_path = ".".join(str(part) for part in at)
                    self.fail(
                        view.stack,
                        f"stack {view.name!r} override {shown_path}: {shown_at(at, text)} holds "
                        f"{found[0]!r}, which Terraform would evaluate as a template; an override is "
                        f"copied into the JSON unchanged. Remove it, or write a literal as '$${{' / "
                        f"'%%{{'.",
                    )
        unread = unrecorded_keys(view.stack, view.document)
        if unread:
            self.fail(
                view.stack,
                f"stack {view.name!r} has stack-level overrides under "
                f"{', '.join(map(repr, unread))} that were not added through "
                f"stack.add_override once the stack recorded them: their text cannot be told "
                f"from references. Add them after apply_rules(stack) (a terravixens stack records "
                f"from its creation), or set them on the element (element.add_override).",
            )
        others = [
            element
            for element in view.of_class(TerraformElement)
            if not isinstance(element, (*LITERAL_ELEMENTS, TerraformResource, TerraformDataSource))
        ]
        for element in [*others, *self._without_block(view)]:
            # Its own configuration read once (one round trip), resolved only when it holds a token.
            raw = element.to_terraform()
            self._check(view, view.resolved(raw), functools.partial(_as_read, element, raw), None)

    def _check_validation_messages(self, view: StackView) -> None:
        """A variable is read literally (its default, its description), except its validations' error_message: a
        template Terraform evaluates when the condition fails. Each variable's raw configuration is read only when
        a message in the JSON holds a sequence (the project's own messages hold none)."""

        def messages(document: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], str]]:
            for logical, body in (document.get("variable") or {}).items():
                for index, validation in enumerate((body or {}).get("validation") or []):
                    if isinstance(validation, dict) and isinstance(validation.get("error_message"), str):
                        yield ("variable", logical, "validation", index, "error_message"), validation["error_message"]

        resolved = dict(messages(view.document))
        if not any("${" in text or "%{" in text for text in resolved.values()):
            return
        for element in view.of_class(TerraformVariable):
            for path, value in messages(element.to_terraform()):
                found = _text_sequences(value)
                if not found and "%{" in unescaped(resolved.get(path, "")):
                    value, found = resolved[path], ("%{",)
                if found:
                    self._fail(element, None, path, value, found[0])

    @staticmethod
    def _without_block(view: StackView) -> list[Any]:
        """Resource and data elements that do not write a block of their own (moved ones, or two under one address,
        which cdktf merges into one block): judged by their own resolved configuration, as every other element.
        Only when the counts of elements and of the blocks they wrote differ, so rarely, is each element's address
        asked for. Pathless blocks (a remote state, a block a stack-level override added) are not counted: no
        resource or data element wrote them, and one would hide a merged pair from the count."""
        written_blocks = [block for block in view.blocks if not block.pathless and view.python_block(block) is None]
        elements = view.current_block_elements  # a block written from Python has no element: judged by its block
        if len(elements) == len(written_blocks):
            return []
        written = {(block.kind, block.type, block.logical_id) for block in written_blocks}
        addresses = [
            (
                "resource" if isinstance(element, TerraformResource) else "data",
                element.terraform_resource_type,
                element.friendly_unique_id,
            )
            for element in elements
        ]
        shared = Counter(addresses)
        return [
            element
            for element, address in zip(elements, addresses, strict=True)
            if address not in written or shared[address] > 1
        ]

    def _check(
        self,
        view: StackView,
        body: dict[str, Any],
        raw_configuration: Callable[[], tuple[Any, Any]],
        block: Block | None,
    ) -> None:
        text = json.dumps(body)
        if "${" not in text and "%{" not in text:
            return
        writer, raw = raw_configuration()
        found_in_raw = [
            (path, value, found[0])
            for path, value in _strings(raw)
            if not _cdktf_workspace(path, value) and (found := _text_sequences(value))
        ]
        found_in_body = (
            [(p, v, "%{") for p, v in _strings(body) if "%{" in v and "%{" in unescaped(v)]
            if "%{" in text and not found_in_raw
            else []
        )
        if not (found_in_raw or found_in_body):
            return
        # An error is attached to an element: a block written from Python gets its element now.
        element = view.element_of(block)[0] if block is not None and isinstance(writer, PythonBlock) else writer
        for path, value, sequence in found_in_raw + found_in_body:
            self._fail(element, block, path, value, sequence)

    def _fail(
        self, element: TerraformElement, block: Block | None, path: tuple[Any, ...], value: str, sequence: str
    ) -> None:
        self.fail(
            element,
            f"{_label(element, block)} {_where(path, element)}: {shown_at(path, value)} holds "
            f"{sequence!r}, which Terraform would evaluate as a template; text is copied into the "
            f"JSON unchanged. Remove it, or write a literal as '$${{' / '%%{{'.",
        )
