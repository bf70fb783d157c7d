"""TV006 NoSecretLiterals: no key, token or certificate is written into the synthesized JSON.

One exception, by value: the private CA a NodeEnvSnippet writes into node.env on purpose (the site's
`standalone.spec_server.ca_data`, docs/adr/0046-spec-transport-hardening.md) — public certificates that nodes must
trust. Exactly that value is let through, and only when it holds certificates and nothing else; any other
certificate, and any key, still stops synth."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from terravixens.expressions import strings_in
from terravixens.rules.base import Rule
from terravixens.rules.view import StackView, imported_class
from terravixens.spec_transport import ca_pem

PATTERNS = {
    "a PEM private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "a PEM certificate": re.compile(r"-----BEGIN CERTIFICATE-----"),
    "an age secret key": re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{20,}"),
    "a Proxmox API token": re.compile(
        r"[\w.-]+@[\w.-]+![\w.-]+[=:]"
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    ),
    "a base64-encoded PEM block": re.compile(r"LS0tLS1CRUdJTi"),
    "a Kubernetes bootstrap token": re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b"),
}
# One pass over each string finds whether any pattern is there; only those strings are searched pattern by pattern.
ANY_PATTERN = re.compile("|".join(f"(?:{pattern.pattern})" for pattern in PATTERNS.values()))
# What each pattern cannot match without: a literal, or (the bootstrap token) a dot followed by 16 of its characters,
# which the regex engine finds by scanning for the dot. Tried before ANY_PATTERN, which is slow on long text.
_NEEDLES = ("-----BEGIN", "AGE-SECRET-KEY-1", "LS0tLS1CRUdJTi")
_TOKEN_TAIL = re.compile(r"\.[a-z0-9]{16}\b")


def might_hold_a_secret(text: str) -> bool:
    """False only when no pattern can match `text` (a cheap test first; ANY_PATTERN decides the rest)."""
    if not (any(needle in text for needle in _NEEDLES) or ("@" in text and "!" in text) or _TOKEN_TAIL.search(text)):
        return False
    return ANY_PATTERN.search(text) is not None


# Attributes that hold secrets: any literal (anything but a reference or an expression) is a leak.
SECRET_ATTRIBUTES = re.compile(r"^(password|token|api_token|client_key|private_key|secret|secret_key|access_key)$")


def _literal_secrets(value: object, path: tuple[str | int, ...] = ()) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and SECRET_ATTRIBUTES.match(key) and item and not item.startswith("${"):
                yield ".".join(map(str, (*path, key)))
            else:
                yield from _literal_secrets(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _literal_secrets(item, (*path, index))


def _public(ca: str | None) -> bool:
    """Base64 of PEM certificates only (what the site model checked; checked again for a library user's value)."""
    if not ca:
        return False
    try:
        ca_pem(ca)
    except ValueError:
        return False
    return True


def _public_ca_strings(view: StackView) -> dict[str, str]:
    """Each string of a NodeEnvSnippet's own blocks -> the public CA that snippet writes on purpose: the exception is
    that value, in those strings only (the same certificate anywhere else is still a finding)."""
    snippet = imported_class("terravixens.constructs.node_env_snippet", "NodeEnvSnippet")
    if snippet is None or not view.of_class(snippet):
        return {}
    exempt: dict[str, str] = {}
    for block in view.blocks:
        owner = view.owner(block, snippet)
        if owner is not None and owner.public_ca and _public(owner.public_ca):
            exempt.update((text, owner.public_ca) for text in strings_in(block.body))
    return exempt


class NoSecretLiterals(Rule):
    code = "TV006"
    name = "NoSecretLiterals"
    why = (
        "synthesized JSON is committed, reviewed and snapshotted: secrets are read at apply time from files, "
        "variables or the environment."
    )

    def check(self, view: StackView) -> None:
        document = view.document
        exempt = _public_ca_strings(view)
        texts = strings_in(document)
        suspects = {text for text in set(texts) if might_hold_a_secret(text)}  # each distinct string tested once
        for text in texts:
            if text not in suspects:
                continue
            if text in exempt:
                text = text.replace(exempt[text], "")
            for what, pattern in PATTERNS.items():
                if pattern.search(text):
                    self.fail(
                        view.stack,
                        f"stack {view.name!r} contains {what} in {json.dumps(text[:60])}…: read it "
                        f"at apply time (file(), a variable or an environment variable) instead.",
                    )
        for path in _literal_secrets(document):
            self.fail(
                view.stack,
                f"stack {view.name!r} sets secret attribute {path} to a literal: pass a reference "
                f"or a variable instead.",
            )
