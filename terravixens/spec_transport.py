"""How a node reaches its spec server: one rule for plain http and one reader of a private CA, shared by the site
(what the L2 stacks write into node.env) and the node client (what `terravixens spec get` accepts), so a node.env the
stacks render is never refused by the client that reads it (docs/adr/0046-spec-transport-hardening.md).

Pure and standard library only: the node client runs on bare guests.

- Plain http: accepted when the server is on loopback (nothing crosses a network) or when the operator said why
  (`standalone.spec_server.allow_insecure_http` in the site, carried into node.env as
  `TERRAVIXENS_ALLOW_INSECURE_HTTP=yes`). The site applies the rule to every spec server (any node may use a token);
  the client applies it when it would send a token.
- A private CA: `standalone.spec_server.ca_data` in the site, base64 of a PEM bundle of CA certificates (as
  kubeconfig's `certificate-authority-data`), carried into node.env as `TERRAVIXENS_CA_DATA`; the client trusts
  exactly those certificates for the spec server. Never a private key.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import ssl
from urllib.parse import urlsplit

ALLOW_INSECURE_HTTP_KEY = "TERRAVIXENS_ALLOW_INSECURE_HTTP"
CA_DATA_KEY = "TERRAVIXENS_CA_DATA"
# A bundle of a few CA certificates; node.env is read with a 16 KiB bound.
MAX_CA_DATA = 12 * 1024
PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----")
BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


def is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def plain_http_refusal(url: str, *, allowed: bool) -> str | None:
    """Why `url` may not carry a token, or None. The one rule both sides apply."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None  # not a URL at all: the caller's URL check says so
    if parts.scheme != "http" or allowed or is_loopback(host):
        return None
    return (
        f"{url[:80]!r} is plain http: tokens would cross the network in clear text; use https (with "
        f"spec_server.ca_data for a private CA), or keep http and say why in spec_server.allow_insecure_http"
    )


def ca_pem(data: str) -> str:
    """The PEM bundle that `data` (base64 of it) holds; ValueError with the fix when it is not one."""
    if len(data) > MAX_CA_DATA:
        raise ValueError(f"is {len(data):,} characters, more than {MAX_CA_DATA:,}: give only the CA certificates")
    if not BASE64.match(data):
        raise ValueError("is not base64 (one line): write the output of `base64 -w0 ca.pem`")
    try:
        text = base64.b64decode(data, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("is not base64 of a PEM file: write the output of `base64 -w0 ca.pem`") from None
    kinds = set(PEM_BLOCK.findall(text))
    if any("PRIVATE" in kind for kind in kinds):
        # The value is never echoed: it holds a private key, which must not reach Terraform or a node.
        raise ValueError(
            "holds a PRIVATE KEY: give only the CA's certificate (never a key); remove the value and rotate that key"
        )
    if kinds != {"CERTIFICATE"}:
        raise ValueError(
            "is not a PEM bundle of CERTIFICATE blocks: give the CA certificate(s) that signed the server's"
        )
    try:
        ssl.create_default_context(cadata=text)
    except (ssl.SSLError, ValueError) as error:
        raise ValueError(f"holds a certificate that cannot be read ({error}): give the CA's PEM certificate") from None
    return text
