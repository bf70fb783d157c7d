"""Who is asking, and may they read this identity: the server's whole access policy, as pure functions.

A bearer token names a principal: the site (the site token) or one node (its node token). Tokens are compared as
SHA-256 digests with hmac.compare_digest. The decision table (ADR 0019):

    identity        principal                 status
    unknown         anonymous                 401   an unauthenticated caller cannot tell unknown from protected
    unknown         site                      404
    unknown         node X                    403   a node cannot probe for others
    network         anonymous, site, node     200
    site_token      site                      200
    node_token      node X (X = identity)     200
    site_token / node_token, anonymous        401
    any other authenticated principal         403
    any             invalid or malformed token 401  (checked first: a broken client is told so)

The agent bundle (GET /agent.pyz, ADR 0059) opens to the credentials that open a spec: any valid token (the site's,
or a node's), and no token at all while one identity is served under `network` (a node that sends none). It holds no
secret; the rule keeps an unauthenticated caller from a server whose every spec needs a token.

    principal                   some identity open (network)   none open
    site, node                  200                            200
    anonymous                   200                            401
    invalid or malformed token  401                            401
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

BEARER = re.compile(r"^[Bb][Ee][Aa][Rr][Ee][Rr] ([\x21-\x7e]{1,512})$")


@dataclass(frozen=True)
class Principal:
    kind: str  # "anonymous", "invalid", "site" or "node"
    node: str | None = None

    def __str__(self) -> str:
        return f"node:{self.node}" if self.kind == "node" else self.kind


ANONYMOUS = Principal("anonymous")
INVALID = Principal("invalid")
SITE = Principal("site")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Tokens:
    """The tokens of one snapshot, kept only as SHA-256 digests."""

    def __init__(self, site_token: str | None, node_tokens: dict[str, str]):
        self._site = _digest(site_token) if site_token is not None else None
        self._by_name = {name: _digest(token) for name, token in node_tokens.items()}
        self._by_digest = {digest: name for name, digest in self._by_name.items()}

    def kept_in(self, newer: Tokens | None) -> Tokens:
        """These tokens, less every one `newer` no longer holds with the same value (None: the secrets file could
        not be read, so no token is kept). A reload that fails still revokes: a token deleted from the secrets file,
        or the file itself, stops opening anything at once (fail closed)."""
        kept = Tokens(None, {})
        if newer is None:
            return kept
        if self._site is not None and newer._site is not None and hmac.compare_digest(self._site, newer._site):
            kept._site = self._site
        for name, digest in self._by_name.items():
            other = newer._by_name.get(name)
            if other is not None and hmac.compare_digest(digest, other):
                kept._by_name[name] = digest
                kept._by_digest[digest] = name
        return kept

    def __len__(self) -> int:
        return len(self._by_name) + (self._site is not None)

    def holder(self, authorization: list[str]) -> Principal:
        """The principal of a request for no identity in particular (the agent bundle): the site, the node whose
        token it is, anonymous, or invalid. The digest index finds a node's token; the site token is compared in
        constant time."""
        if not authorization:
            return ANONYMOUS
        match = BEARER.match(authorization[0]) if len(authorization) == 1 else None
        if match is None:
            return INVALID
        digest = _digest(match.group(1))
        if self._site is not None and hmac.compare_digest(digest, self._site):
            return SITE
        node = self._by_digest.get(digest)
        return Principal("node", node) if node is not None else INVALID

    def identify(self, authorization: list[str], identity: str) -> Principal:
        """The principal of a request for `identity`, from its Authorization header values (none: anonymous).

        The site token and the identity's own token are compared in constant time; the index only tells another
        node's token (403) from no token at all (401): a digest lookup reveals nothing about a token."""
        if not authorization:
            return ANONYMOUS
        match = BEARER.match(authorization[0]) if len(authorization) == 1 else None
        if match is None:
            return INVALID
        digest = _digest(match.group(1))
        if self._site is not None and hmac.compare_digest(digest, self._site):
            return SITE
        own = self._by_name.get(identity)
        if own is not None and hmac.compare_digest(digest, own):
            return Principal("node", identity)
        other = self._by_digest.get(digest)
        return Principal("node", other) if other is not None else INVALID


def decide(auth: str | None, identity: str, principal: Principal) -> int:
    """The HTTP status for `principal` asking for `identity`, whose posture's auth method is `auth` (None: unknown)."""
    if principal.kind == "invalid":
        return 401
    if auth is None:
        return {"anonymous": 401, "site": 404}.get(principal.kind, 403)
    if auth == "network":
        return 200
    if principal.kind == "anonymous":
        return 401
    if auth == "site_token":
        return 200 if principal.kind == "site" else 403
    return 200 if principal.kind == "node" and principal.node == identity else 403


def decide_bundle(principal: Principal, any_open: bool) -> int:
    """The HTTP status of GET /agent.pyz for `principal`; `any_open`: some identity is served under `network`."""
    if principal.kind == "invalid":
        return 401
    if principal.kind == "anonymous":
        return 200 if any_open else 401
    return 200
