"""TV007 NoTemplateSequences: no text reaches the JSON that Terraform would evaluate as a template.

Terraform evaluates `${…}` and `%{…}` in every string of a resource, data source, provider, output or local; cdktf
copies strings into the JSON unchanged. The site model refuses both sequences in site text (docs/adr/0016); this
rule is the second net, for library users who build constructs from props directly.

How text is told from terravixens' own expressions: before resolution, cdktf encodes every token (a reference or a
function call) as `${TfToken[TOKEN.n]}`. So in an element's raw configuration, a `${` outside those encodings is
text. Inside a token, cdktf escapes `${` in a function's string arguments (`$${`) but not `%{`, and cdktf itself
never writes a directive: an unescaped `%{` anywhere in the resolved JSON is text too. `$${` and `%%{` are escapes
(Terraform reads them as a literal `${` and `%{`) and pass. Variable defaults and the `terraform` block (backend)
are read literally by Terraform, so they are not checked.
"""
from __future__ import annotations

import json
import re

from cdktf import TerraformBackend, TerraformDataSource, TerraformElement, TerraformResource, TerraformStack, \
    TerraformVariable
from constructs import IConstruct

from terravixens.inputs import shown_at
from terravixens.rules.base import Rule, logical_id, resolved

# Left to right, as Terraform scans a template: an escape is consumed whole, so `$$${` is an escape too.
SEQUENCE = re.compile(r"\$\$\{|%%\{|([$%]\{)")
TOKEN = re.compile(r"\$\{TfToken\[TOKEN\.\d+\]\}")
LITERAL_ELEMENTS = (TerraformVariable, TerraformBackend)


def unescaped(text: str) -> list[str]:
    """The template sequences Terraform would evaluate in `text`, in order."""
    return [match.group(1) for match in SEQUENCE.finditer(text) if match.group(1)]


def _strings(value, path: tuple = ()):
    """(path, text) of every string in a JSON-like value, keys of maps included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield (*path, key), key
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _label(element: TerraformElement) -> str:
    if isinstance(element, TerraformResource):
        return f"{element.terraform_resource_type}.{logical_id(element)}"
    if isinstance(element, TerraformDataSource):
        return f"data.{element.terraform_resource_type}.{logical_id(element)}"
    return element.node.path


def _where(path: tuple, element: TerraformElement) -> str:
    """The attribute path inside the element's block (resource/data blocks start with kind, type and id)."""
    if isinstance(element, (TerraformResource, TerraformDataSource)) and len(path) > 3:
        path = path[3:]
    return ".".join(str(part) for part in path) or "(block)"


class NoTemplateSequences(Rule):
    code = "TV007"
    name = "NoTemplateSequences"
    why = ("Terraform evaluates ${…} and %{…} in every JSON string: text from a site file or from props that carries "
           "one would run at plan or apply time (read files, or the environment that holds the Proxmox token and S3 "
           "keys during a deploy).")

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, TerraformStack):
            return
        document = node.to_terraform()  # resolved once: most elements carry no sequence at all and are skipped
        for element in node.node.find_all():
            if isinstance(element, TerraformElement) and not isinstance(element, LITERAL_ELEMENTS):
                self._check(element, self._resolved_body(document, element))

    @staticmethod
    def _resolved_body(document: dict, element: TerraformElement) -> dict:
        """The element's resolved block, taken from the stack's document when it is a resource or data source."""
        if isinstance(element, (TerraformResource, TerraformDataSource)):
            kind = "resource" if isinstance(element, TerraformResource) else "data"
            kind_type = element.terraform_resource_type
            found = document.get(kind, {}).get(kind_type, {}).get(logical_id(element))
            if found is not None:
                return {kind: {kind_type: {logical_id(element): found}}}
        return resolved(element)

    def _check(self, element: TerraformElement, body: dict) -> None:
        text = json.dumps(body)
        if "${" not in text and "%{" not in text:
            return
        reported = False
        for path, value in _strings(element.to_terraform()):
            found = unescaped(TOKEN.sub("", value))
            if found:
                reported = True
                self._fail(element, path, value, found[0])
        if reported:
            return
        for path, value in _strings(body):
            if "%{" in unescaped(value):
                self._fail(element, path, value, "%{")

    def _fail(self, element: TerraformElement, path: tuple, value: str, sequence: str) -> None:
        self.fail(element, f"{_label(element)} {_where(path, element)}: {shown_at(path, value)} holds {sequence!r}, which Terraform "
                           f"would evaluate as a template; text is copied into the JSON unchanged. Remove it, or write "
                           f"a literal as '$${{' / '%%{{'.")
