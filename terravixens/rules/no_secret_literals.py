"""TV006 NoSecretLiterals: no key, token or certificate is written into the synthesized JSON."""

from __future__ import annotations

import json
import re

from terravixens.expressions import strings_in
from terravixens.rules.base import Rule
from terravixens.rules.view import StackView

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
# Attributes that hold secrets: any literal (anything but a reference or an expression) is a leak.
SECRET_ATTRIBUTES = re.compile(r"^(password|token|api_token|client_key|private_key|secret|secret_key|access_key)$")


def _literal_secrets(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and SECRET_ATTRIBUTES.match(key) and item and not item.startswith("${"):
                yield ".".join(map(str, (*path, key)))
            else:
                yield from _literal_secrets(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _literal_secrets(item, (*path, index))


class NoSecretLiterals(Rule):
    code = "TV006"
    name = "NoSecretLiterals"
    why = (
        "synthesized JSON is committed, reviewed and snapshotted: secrets are read at apply time from files, "
        "variables or the environment."
    )

    def check(self, view: StackView) -> None:
        document = view.document
        for text in strings_in(document):
            if not ANY_PATTERN.search(text):
                continue
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
