"""One immutable snapshot of what the server serves: each identity's auth method and resolved spec (as bytes),
and the tokens. Built whole from the site file, its specs folder and the secrets file; a reload builds a new one
and swaps it in only when every file is valid, so a broken edit never takes the served set down."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from terravixens.inputs import InputError
from terravixens.specserver.auth import Tokens
from terravixens.standalone.resolve import load_standalone, specs_folder
from terravixens.standalone.secrets import load_secrets

# How much an auth method protects: a reload that moves an identity down this scale is logged as a warning.
STRENGTH = {"network": 0, "site_token": 1, "node_token": 2}


@dataclass(frozen=True)
class Entry:
    auth: str
    body: bytes


@dataclass(frozen=True)
class SpecSet:
    entries: dict[str, Entry]
    tokens: Tokens
    generation: int
    loaded_at: float = field(default_factory=time.time)
    # Set when the last reload failed: what is served is the last good set, less every revoked token.
    stale: str | None = None

    def lowered(self, newer: SpecSet) -> list[dict[str, str]]:
        """The identities whose protection `newer` lowers (e.g. node_token → network): each one as a log record."""
        return [
            {"identity": name, "from": entry.auth, "to": newer.entries[name].auth}
            for name, entry in sorted(self.entries.items())
            if name in newer.entries and STRENGTH[newer.entries[name].auth] < STRENGTH[entry.auth]
        ]


@dataclass(frozen=True)
class Sources:
    site: Path
    secrets: Path

    def fingerprint(self, specs_dir: Path | None) -> tuple[tuple[object, ...], ...]:
        """What a file-change reload watches: the site, secrets, and every file of the specs and postures folders."""
        paths = [self.site, self.secrets]
        if specs_dir is not None:
            for folder in (specs_dir, specs_dir / "postures"):
                try:
                    paths += sorted(Path(entry.path) for entry in os.scandir(folder))
                except OSError:
                    paths.append(folder)
        marks: list[tuple[object, ...]] = []
        for path in paths:
            try:
                info = os.stat(path)
                marks.append((str(path), info.st_mtime_ns, info.st_size, info.st_ino, info.st_mode))
            except OSError:
                marks.append((str(path), None))
        return tuple(marks)


def fail_closed(current: SpecSet, sources: Sources, failure: str) -> SpecSet:
    """What to serve after a failed reload: the last good specs, but only the tokens the secrets file still holds
    unchanged (none when it cannot be read at all), and marked stale so /healthz says so."""
    try:
        secrets, _ = load_secrets(sources.secrets)
        newer: Tokens | None = Tokens(secrets.site_token, secrets.node_tokens)
    except InputError:
        newer = None
    return SpecSet(current.entries, current.tokens.kept_in(newer), current.generation, current.loaded_at, failure)


def build(sources: Sources, generation: int) -> tuple[SpecSet, Path]:
    """A snapshot of the sources; raises SiteError or CatalogError (every problem, secret-safe) when one is bad."""
    standalone = load_standalone(sources.site, sources.secrets)
    secrets = standalone.secrets
    if secrets is None:  # Sources always names a secrets file, and load_standalone read it
        raise ValueError(f"{sources.secrets}: no secrets loaded")
    entries = {
        identity: Entry(standalone.nodes[identity].auth, json.dumps(document, separators=(",", ":")).encode())
        for identity, document in standalone.documents.items()
    }
    tokens = Tokens(secrets.site_token, secrets.node_tokens)
    return SpecSet(entries, tokens, generation), specs_folder(standalone.site, sources.site)
