"""Flux's git credentials: one entry per cluster in the secrets file, checked here, handed to that cluster's gitops
layer only, at apply time, and written into the cluster through a write-only attribute (ADR 0034).

    flux:
      prod:                          # a cluster of the site whose flux.url is ssh://…: a deploy key
        ssh:
          identity: |                # the private key, every line, as a YAML block (OpenSSH or PEM)
            -----BEGIN OPENSSH PRIVATE KEY-----
            …
            -----END OPENSSH PRIVATE KEY-----
          known_hosts: "git.lab.internal ssh-ed25519 AAAA…"   # the server's host key: ssh-keyscan git.lab.internal
          password: "…"              # only for a key protected by a passphrase
      staging:                       # flux.url https://…: a token
        https: {username: git, password: "<token>"}        # or: {bearer_token: "<token>"}

The Secret's keys are Flux's own (source-controller, GitRepository `spec.secretRef`): `identity`, `known_hosts` and
`password` for ssh; `username` and `password`, or `bearerToken`, for https. Flux reads ssh credentials only with an
`ssh://` URL, and basic or bearer credentials only with an http(s) one: the kind must match the site's URL.

No message ever shows a value of this section: a private key, a passphrase or a token must not reach a CI log (the
lines of known_hosts are public, but they are named by their number all the same).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Iterator
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from terravixens.catalogue import FLUX_CREDENTIALS_VARIABLE as CREDENTIALS_VARIABLE
from terravixens.config.model import FluxConfig, Site

CREDENTIALS_ENV = f"TF_VAR_{CREDENTIALS_VARIABLE}"
SSH_KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
PUBLIC_KEY = re.compile(r"^(ssh-|ecdsa-|sk-)[a-z0-9@.-]+ [A-Za-z0-9+/]+={0,3}")
PRIVATE_KEY = re.compile(
    r"^-----BEGIN (?P<kind>(?:OPENSSH |RSA |EC |DSA |ENCRYPTED )?)PRIVATE KEY-----\n"
    r"(?P<body>.*?)\n?-----END (?P=kind)PRIVATE KEY-----$",
    re.S,
)
OPENSSH_MAGIC = b"openssh-key-v1\x00"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
AS_BLOCK = "in YAML: `identity: |` and every line of the key file indented under it"


# ---------------------------------------------------------------------------------------------------- values
def _ssh_string(blob: bytes, offset: int) -> tuple[bytes, int]:
    """One SSH wire-format string (RFC 4251: uint32 length, then the bytes) and the offset after it."""
    if offset + 4 > len(blob):
        raise ValueError
    length = int.from_bytes(blob[offset : offset + 4], "big")
    if offset + 4 + length > len(blob):
        raise ValueError
    return blob[offset + 4 : offset + 4 + length], offset + 4 + length


def private_key(text: str) -> tuple[str, bool]:
    """The key as Flux gets it (one final newline) and whether a passphrase protects it; ValueError saying what is
    wrong, never what the text holds."""
    value = text.strip().replace("\r\n", "\n")
    if "PRIVATE KEY-----" not in value:
        if PUBLIC_KEY.match(value):
            raise ValueError(
                "is a public key: Flux needs the deploy key's private key (the key file without .pub, "
                "'-----BEGIN OPENSSH PRIVATE KEY-----' …); the public key goes to the git server"
            )
        raise ValueError(
            f"is not a private key: give the whole key file, from its '-----BEGIN … PRIVATE KEY-----' "
            f"line to its '-----END … PRIVATE KEY-----' line ({AS_BLOCK})"
        )
    found = PRIVATE_KEY.match(value)
    if found is None:
        raise ValueError(
            f"does not hold one whole private key: keep every line from '-----BEGIN … PRIVATE "
            f"KEY-----' to the matching '-----END … PRIVATE KEY-----' line, and nothing else ({AS_BLOCK})"
        )
    lines = [line.strip() for line in found["body"].split("\n")]
    headers = [line for line in lines if ":" in line]  # legacy PEM: Proc-Type, DEK-Info
    try:
        blob = base64.b64decode("".join(line for line in lines if line and ":" not in line), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            f"is damaged: its base64 lines do not decode (a line lost, joined or re-wrapped on the way); "
            f"paste the key file again ({AS_BLOCK})"
        ) from None
    encrypted = found["kind"] == "ENCRYPTED " or any(
        line.startswith("Proc-Type:") and "ENCRYPTED" in line for line in headers
    )
    if found["kind"] == "OPENSSH ":
        # PROTOCOL.key of OpenSSH: the magic, then the cipher name ("none" when no passphrase protects the key).
        try:
            if not blob.startswith(OPENSSH_MAGIC):
                raise ValueError
            cipher, _ = _ssh_string(blob, len(OPENSSH_MAGIC))
        except ValueError:
            raise ValueError(
                "is not an OpenSSH private key although its first line says so (its content is not "
                "'openssh-key-v1'): paste the key file again, or make a new deploy key with "
                "ssh-keygen -t ed25519"
            ) from None
        encrypted = cipher != b"none"
    return value + "\n", encrypted


def _identity(text: str) -> str:
    return private_key(text)[0]


def host_keys(text: str) -> list[tuple[str | None, str]]:
    """(marker, host patterns) of each line of a known_hosts text; ValueError naming the first bad line by its
    number (in this value, from 1)."""
    entries = []
    for number, raw in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if marker not in (None, "@cert-authority", "@revoked"):
            raise ValueError(f"line {number} starts with an unknown marker: ssh knows @cert-authority and @revoked")
        if len(fields) < 3:
            raise ValueError(
                f"line {number} is not a known_hosts line: give 'HOST KEY-TYPE BASE64-KEY' lines, "
                f"e.g. the output of ssh-keyscan HOST"
            )
        patterns, key_type, key = fields[:3]
        if key_type not in SSH_KEY_TYPES:
            raise ValueError(
                f"line {number} has a key type ssh does not use for host keys: use one of "
                f"{', '.join(sorted(SSH_KEY_TYPES))} (ssh-keyscan prints them)"
            )
        try:
            named, _ = _ssh_string(base64.b64decode(key, validate=True), 0)
        except (binascii.Error, ValueError):
            named = None
        if named != key_type.encode():
            raise ValueError(
                f"line {number} holds a damaged key: its base64 part is not a {key_type} key (cut or "
                f"re-wrapped on the way); copy the line again from ssh-keyscan"
            )
        entries.append((marker, patterns))
    if not entries:
        raise ValueError(
            "has no host key: add the git server's, one line 'HOST KEY-TYPE BASE64-KEY' (ssh-keyscan HOST prints them)"
        )
    return entries


def _known_hosts(text: str) -> str:
    host_keys(text)
    return text.strip().replace("\r\n", "\n") + "\n"


def _one_line(text: str) -> str:
    if not text:
        raise ValueError("is empty: give the value, or remove the key")
    if CONTROL.search(text):
        raise ValueError(
            "holds a line break or another control character: Flux would send it as it is; give it on "
            "one line, in quotes (not as a `|` block)"
        )
    return text


def _username(text: str) -> str:
    _one_line(text)
    if ":" in text:
        raise ValueError("holds ':': http basic authentication cannot carry it in a user name")
    return text


def known_host(text: str, host: str, port: int | None) -> bool:
    """Whether a known_hosts text has a line (not @revoked) for `host` on `port`, as ssh looks it up: `host` on
    port 22, `[host]:port` otherwise; plain, wildcard (* ?) and negated patterns, and hashed names (|1|salt|hash)."""
    name = (host if port in (None, 22) else f"[{host}]:{port}").lower()
    for marker, patterns in host_keys(text):
        if marker == "@revoked":
            continue
        if patterns.startswith("|1|"):
            try:
                _, _, salt, digest = patterns.split("|")
                wanted = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
                if hmac.compare_digest(wanted, base64.b64decode(digest)):
                    return True
            except (binascii.Error, ValueError):
                pass
            continue
        parts = patterns.lower().split(",")
        if any(part.startswith("!") and _wildcard(part[1:]).fullmatch(name) for part in parts):
            continue
        if any(not part.startswith("!") and _wildcard(part).fullmatch(name) for part in parts):
            return True
    return False


def _wildcard(pattern: str) -> re.Pattern[str]:
    """ssh's host pattern: '*' any run of characters, '?' one; everything else literal ('[host]:port' included)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


Identity = Annotated[str, AfterValidator(_identity)]
KnownHosts = Annotated[str, AfterValidator(_known_hosts)]
OneLine = Annotated[str, AfterValidator(_one_line)]
Username = Annotated[str, AfterValidator(_username)]


# ---------------------------------------------------------------------------------------------------- models
class _Credentials(BaseModel):
    """Unknown keys refused, frozen. Not the site's `Strict`: a private key spans lines, and a token may hold '${'
    (these values never reach the synthesized JSON, so no template can come from them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SshCredentials(_Credentials):
    identity: Identity
    known_hosts: KnownHosts
    password: OneLine | None = None

    @model_validator(mode="after")
    def _passphrase(self) -> SshCredentials:
        # A password with a key that has no passphrase is left alone: go-git, under Flux, uses it only when the
        # key asks for one.
        if private_key(self.identity)[1] and self.password is None:
            raise ValueError(
                "identity is protected by a passphrase and no password is given: add password (the "
                "passphrase), or give the key without one (ssh-keygen -p -N '' -f KEYFILE)"
            )
        return self

    def secret_data(self) -> dict[str, str]:
        data = {"identity": self.identity, "known_hosts": self.known_hosts}
        if self.password is not None:
            data["password"] = self.password
        return data


class HttpsCredentials(_Credentials):
    username: Username | None = None
    password: OneLine | None = None
    bearer_token: OneLine | None = None

    @model_validator(mode="after")
    def _one_scheme(self) -> HttpsCredentials:
        basic = self.username is not None or self.password is not None
        if self.bearer_token is not None and basic:
            raise ValueError("give username and password, or bearer_token, not both")
        if self.bearer_token is None and self.username is None and self.password is None:
            raise ValueError(
                "give username and password (for a GitHub, GitLab or Bitbucket token: username git and "
                "the token as password), or bearer_token"
            )
        if self.username is not None and self.password is None:
            raise ValueError("username needs password: for a token, the token is the password")
        if self.password is not None and self.username is None:
            raise ValueError(
                "password needs username (Flux refuses a password alone): for a GitHub, GitLab or "
                "Bitbucket token, username git"
            )
        return self

    def secret_data(self) -> dict[str, str]:
        if self.bearer_token is not None:
            return {"bearerToken": self.bearer_token}
        return {"username": self.username or "", "password": self.password or ""}


class FluxCredentials(_Credentials):
    ssh: SshCredentials | None = None
    https: HttpsCredentials | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> FluxCredentials:
        if self.ssh is not None and self.https is not None:
            raise ValueError("give ssh or https, not both: Flux uses the one the site's flux.url asks for")
        if self.ssh is None and self.https is None:
            raise ValueError(
                "give ssh (a deploy key: identity and known_hosts) or https (username and password, or bearer_token)"
            )
        return self

    @property
    def kind(self) -> str:
        return "ssh" if self.ssh is not None else "https"

    def secret_data(self) -> dict[str, str]:
        """The Secret's keys, as Flux reads them."""
        return (self.ssh or self.https).secret_data()  # type: ignore[union-attr]  # one is set: _one_kind


# ---------------------------------------------------------------------------------------------------- the site
def clusters_with_credentials(site: Site) -> list[str]:
    """The clusters whose Flux takes its git credentials from the secrets file, sorted."""
    return sorted(
        name
        for name, cluster in site.clusters.items()
        if cluster.flux is not None and cluster.flux.git_auth == "secrets_file"
    )


def url_kind(flux: FluxConfig) -> str:
    """The credentials Flux reads for this URL: ssh for ssh://, https (basic or bearer) for http(s)://."""
    return "ssh" if flux.url.startswith("ssh://") else "https"


def what_to_add(name: str, flux: FluxConfig) -> str:
    """The entry a cluster needs, said as the secrets file spells it."""
    if url_kind(flux) == "ssh":
        return (
            f"flux.{name}.ssh with identity (the deploy key's private key, a `|` block) and known_hosts (the "
            f"output of {_scan(flux)})"
        )
    return (
        f"flux.{name}.https with username and password (for a token: username git, the token as password), or "
        f"with bearer_token"
    )


def _scan(flux: FluxConfig) -> str:
    parts = urlsplit(flux.url)
    port = f"-p {parts.port} " if parts.port not in (None, 22) else ""
    return f"ssh-keyscan {port}{parts.hostname}"


def cross_problems(
    site: Site, entries: dict[str, FluxCredentials], needed: Iterable[str]
) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(location in the secrets file, message) of each disagreement between the site and the secrets file's flux
    section: every entry is checked against its cluster; each cluster in `needed` must have one."""
    for name in sorted(entries):
        cluster = site.clusters.get(name)
        flux = cluster.flux if cluster is not None else None
        if cluster is None or flux is None:
            yield (
                ("flux", name),
                (
                    f"no cluster {name!r} with flux in the site: remove the entry or fix the name (clusters with flux: "
                    f"{', '.join(sorted(n for n, c in site.clusters.items() if c.flux)) or 'none'})"
                ),
            )
            continue
        if flux.git_auth == "none":
            yield (
                ("flux", name),
                (
                    f"clusters.{name}.flux.git_auth is none in the site: these credentials would never be used; remove "
                    f"them, or remove git_auth: none"
                ),
            )
            continue
        given, wanted = entries[name].kind, url_kind(flux)
        if given != wanted:
            url = f"clusters.{name}.flux.url ({flux.url.split('://')[0]}://)"
            fix = (
                "use the repository's ssh://git@HOST/ORG/REPO.git URL"
                if given == "ssh"
                else "use the repository's https:// URL"
            )
            yield (
                ("flux", name, given),
                (
                    f"are {given} credentials but {url} needs {wanted} ones: Flux reads a deploy key only with an "
                    f"ssh:// URL and a token only with an http(s) one; give {what_to_add(name, flux)}, or {fix}"
                ),
            )
            continue
        ssh = entries[name].ssh
        if ssh is not None:
            parts = urlsplit(flux.url)
            if not known_host(ssh.known_hosts, parts.hostname or "", parts.port):
                where = parts.hostname if parts.port in (None, 22) else f"[{parts.hostname}]:{parts.port}"
                yield (
                    ("flux", name, "ssh", "known_hosts"),
                    (
                        f"has no line for {where}, the host of clusters.{name}.flux.url: Flux would refuse the "
                        f"server's key; add it ({_scan(flux)})"
                    ),
                )
    for name, flux in _fluxes(site, needed):
        if name not in entries:
            yield (
                ("flux", name),
                (
                    f"is required: clusters.{name}.flux takes its git credentials from the secrets file (git_auth: "
                    f"secrets_file, the default); add {what_to_add(name, flux)}, or set clusters.{name}.flux.git_auth: "
                    f"none for a public https repository"
                ),
            )


def _fluxes(site: Site, names: Iterable[str]) -> Iterator[tuple[str, FluxConfig]]:
    for name in names:
        flux = site.clusters[name].flux
        if flux is not None:
            yield name, flux


def no_secrets_file(site: Site, needed: Iterable[str]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(site location, message) for each cluster in `needed` when no secrets file was given at all."""
    for name, flux in _fluxes(site, needed):
        yield (
            ("clusters", name, "flux"),
            (
                f"takes Flux's git credentials from the secrets file (git_auth: secrets_file, the default) and no "
                f"secrets file was given: give --secrets FILE (or $TERRAVIXENS_SECRETS) holding "
                f"{what_to_add(name, flux)}; or set git_auth: none for a public https repository"
            ),
        )


def credentials_variable(entry: FluxCredentials) -> str:
    """The value of the gitops layer's `flux_git_credentials` variable: the Secret's keys as one JSON object.
    A string variable (not a map): Terraform reads a string from the environment as it is, where it would parse
    a map as HCL, templates ('${') included."""
    return json.dumps(entry.secret_data(), sort_keys=True)
