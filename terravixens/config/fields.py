"""Field types of the site model: what one value may hold, checked where it is read, with the fix in the message.

A field type is a scalar with its check (`DnsName`, `VlanId`, `InterfaceAddress`, a URL that must be https unless a
reason is given...) or the base every site model derives from (`Strict`: unknown keys refused, frozen, every string
checked as site text, docs/adr/0016). The models of the site's sections (terravixens.config.model, .network,
.standalone) are built from these; nothing here knows a section. Every message says what is wrong, with the bad
value (`terravixens.inputs.shown`: truncated, never a secret), and how to fix it.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Any, Protocol
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from terravixens import talos_versions as versions
from terravixens.inputs import looks_secret, shown

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$")
MAC = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}$")  # one separator throughout

# Terraform evaluates these in every JSON string it reads: `${expr}` interpolates, `%{directive}` loops and branches.
TEMPLATE_SEQUENCE = re.compile(r"[$%]\{")
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


# Addresses are parsed by the field validators and again by every site rule: parse each text once (the ipaddress
# module takes ~20 µs per interface; a 1,000-node site holds thousands).
parse_interface = functools.lru_cache(maxsize=65_536)(ipaddress.ip_interface)
parse_address = functools.lru_cache(maxsize=65_536)(ipaddress.ip_address)


# ---------------------------------------------------------------------------------------------------------- text
def text_problem(value: object, field: str, inside: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], str] | None:
    """The first string in `value` (a string, or strings nested in lists and maps, keys included) that is not
    site text, as (its path under the field, what is wrong with it); None when all is well."""
    if isinstance(value, str):
        found = TEMPLATE_SEQUENCE.search(value) or CONTROL_CHARACTER.search(value)
        if found is None:
            return None
        secret = looks_secret(field) or any(looks_secret(part) for part in inside)
        what = "(value hidden: the key looks like it holds a secret)" if secret else shown(value)
        if found.group().endswith("{"):
            return inside, (
                f"{what} holds {found.group()!r}: Terraform would evaluate it as a template (reading "
                f"files or the environment at apply time), so terravixens refuses '${{' and '%{{' in site "
                f"text (docs/adr/0016-no-templates-from-site-text.md); remove it"
            )
        return inside, f"{what} holds a control character ({found.group()!r}): remove it"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        problem = (text_problem(key, field, (*inside, key)) if isinstance(value, dict) else None) or text_problem(
            item, field, (*inside, key)
        )
        if problem:
            return problem
    return None


class Strict(BaseModel):
    """The base of every site model: unknown keys refused, frozen, and every string checked as site text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _site_text(cls, value: object, info: ValidationInfo) -> object:
        # Nested models checked their own fields already; this sees strings, and strings in lists and maps.
        if isinstance(value, (str, list, tuple, dict)):
            problem = text_problem(value, info.field_name or "")
            if problem:
                inside, message = problem
                where = f"at {'.'.join(map(str, inside))}: " if inside else ""
                # The loader reads `inside` to name the exact key or item (and its line); others read `where`.
                raise PydanticCustomError("site_text", f"{where}{message}", {"inside": inside, "bare": message})
        return value


# ---------------------------------------------------------------------------------------------------------- fields
def dns_name(value: str) -> str:
    if not DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{shown(value)} is not a DNS-safe name: use 1-63 lowercase letters, digits and '-', starting with a "
            f"letter and not ending with '-' (e.g. {_dns_suggestion(value)!r})"
        )
    return value


def _dns_suggestion(value: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", value.lower())
    cleaned = re.sub(r"^[^a-z]+", "", cleaned)[:63].rstrip("-")
    return cleaned or "node-a"


def semver(value: str) -> str:
    if not VERSION.match(value):
        raise ValueError(
            f"{shown(value)} is not a version like v1.11.5 or 1.34.2: write MAJOR.MINOR.PATCH, "
            f"optionally with a leading 'v'"
        )
    return value if value.startswith("v") else f"v{value}"


def vlan_id(value: int) -> int:
    if not 1 <= value <= 4094:
        raise ValueError(f"VLAN id {shown(value)} is out of range: 802.1Q VLAN ids are 1-4094")
    return value


def interface_address(value: str) -> str:
    """An address with its prefix length, as Talos configures it on an interface (10.0.111.11/24)."""
    if "/" not in value:
        try:
            parse_address(value)
        except ValueError:
            raise ValueError(f"{shown(value)} is not a valid address/prefix (CIDR), e.g. 10.0.111.11/24") from None
        raise ValueError(
            f"{shown(value)} has no prefix length: write the address with its network size, e.g. {value}/24"
        )
    try:
        parse_interface(value)
    except ValueError:
        raise ValueError(f"{shown(value)} is not a valid address/prefix (CIDR), e.g. 10.0.111.11/24") from None
    return value


def plain_address(value: str) -> str:
    try:
        parse_address(value)
    except ValueError:
        raise ValueError(f"{shown(value)} is not a valid IP address, e.g. 10.0.0.51 (no prefix length here)") from None
    return value


def network(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise ValueError(
            f"{shown(value)} is not a valid CIDR network ({shown(str(error), 60).strip(chr(39))}); "
            f"write the network address, e.g. 10.0.120.0/28"
        ) from None
    return value


def unicast_mac(value: str) -> str:
    """A unicast MAC, normalized to what Proxmox writes (BC:24:11:4F:2A:01): bpg/proxmox compares the text, so
    another spelling of the same MAC would show a change on every plan (docs/adr/0024)."""
    if not MAC.match(value):
        raise ValueError(
            f"{shown(value)} is not a MAC address: write six hexadecimal pairs separated by ':', "
            f"e.g. 02:00:0A:0B:01:0B (locally administered) or BC:24:11:4F:2A:01 (Proxmox' own prefix)"
        )
    normalized = value.replace("-", ":").upper()
    if int(normalized[:2], 16) & 1:
        raise ValueError(
            f"{shown(value)} is a multicast address (the first byte is odd): a network card needs a "
            f"unicast MAC, e.g. 02:00:0A:0B:01:0B"
        )
    if normalized == "00:00:00:00:00:00":
        raise ValueError(f"{shown(value)} is the null MAC: give the VM its own, e.g. 02:00:0A:0B:01:0B")
    return normalized


def at_most(limit: int, unit: str, why: str) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value > limit:
            raise ValueError(f"{shown(value)} {unit} is more than {limit:,} {unit}: {why}")
        return value

    return check


def safe_relative_path(value: str) -> str:
    """A folder under the project root: nothing that climbs out of it or depends on who runs the command."""
    parts = value.replace("\\", "/").split("/")
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{shown(value)} is absolute: give a folder relative to the project root, e.g. 'state'")
    if value.startswith("~"):
        raise ValueError(
            f"{shown(value)} starts with '~' (a home folder): give a folder relative to the project root, e.g. 'state'"
        )
    if ".." in parts:
        raise ValueError(
            f"{shown(value)} climbs out of the project root with '..': give a folder inside it, e.g. 'state'"
        )
    if not value.strip() or all(part in ("", ".") for part in parts):
        raise ValueError(f"{shown(value)} names no folder: give one relative to the project root, e.g. 'state'")
    return value


def insecure_http_reason(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError(
            "is empty: say why plain http is acceptable here (e.g. 'MinIO on the storage VLAN, no "
            "TLS'), or remove allow_insecure_http and use https"
        )
    return value


def checked_url(value: str, info: ValidationInfo, *, others: tuple[str, ...] = (), example: str) -> str:
    """An https URL (or one of `others`), or http when the model's allow_insecure_http says why."""
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    schemes = ("https", "http", *others)
    if parts is None or parts.scheme not in schemes or not host:
        raise ValueError(f"{shown(value)} is not a URL like {example}")
    if parts.scheme == "http" and not info.data.get("allow_insecure_http"):
        raise ValueError(
            f"{shown(value)} is plain http: credentials and content would cross the network unencrypted and "
            f"unauthenticated; use https ({example}), or keep http and say why next to it in allow_insecure_http"
        )
    return value


class _AllowsInsecureHttp(Protocol):
    @property
    def allow_insecure_http(self) -> str | None: ...


def unused_insecure_http(model: _AllowsInsecureHttp, url_field: str) -> None:
    if model.allow_insecure_http is not None and not getattr(model, url_field).startswith("http://"):
        raise ValueError(
            f"allow_insecure_http is set but {url_field} is not an http:// URL: remove "
            f"allow_insecure_http (it only permits plain http)"
        )


DnsName = Annotated[str, AfterValidator(dns_name)]
Version = Annotated[str, AfterValidator(semver)]
VlanId = Annotated[int, AfterValidator(vlan_id)]
InterfaceAddress = Annotated[str, AfterValidator(interface_address)]
PlainAddress = Annotated[str, AfterValidator(plain_address)]
Network = Annotated[str, AfterValidator(network)]
InsecureHttpReason = Annotated[str | None, AfterValidator(insecure_http_reason)]

INSECURE_HTTP = (
    "Why plain http is acceptable for the URL next to it (a non-empty reason); without it, http URLs are refused."
)


# ---------------------------------------------------------------------------------------------------------- Talos
NEWEST_SUPPORTED_TALOS = versions.NEWEST_SUPPORTED_TALOS


def supported_talos(value: str) -> str:
    """A Talos version terravixens writes configurations for (docs/adr/0023)."""
    found = versions.minor_of(value)
    if found > versions.NEWEST_SUPPORTED_TALOS:
        raise ValueError(
            f"Talos {shown(value)} is newer than terravixens supports (up to "
            f"{versions.text(versions.NEWEST_SUPPORTED_TALOS)}.x): its configuration documents and Kubernetes range "
            f"are not checked yet; stay on {versions.text(versions.NEWEST_SUPPORTED_TALOS)}.x"
        )
    if found < versions.OLDEST_SUPPORTED_TALOS:
        raise ValueError(
            f"Talos {shown(value)} is older than terravixens supports ({versions.supported_range()}): upgrade the "
            f"cluster to {versions.text(versions.OLDEST_SUPPORTED_TALOS)}.x with talosctl first"
        )
    return value


def contract_version(value: str) -> str:
    """`v1.11` (also written 1.11 or v1.11.5): only the minor names a contract."""
    try:
        found = versions.minor_of(value)
    except ValueError:
        raise ValueError(
            f"{shown(value)} is not a configuration contract like v1.11: write the Talos minor the "
            f"machine configurations are generated for"
        ) from None
    if not versions.OLDEST_SUPPORTED_TALOS <= found <= versions.NEWEST_SUPPORTED_TALOS:
        raise ValueError(
            f"contract {shown(value)} is not one terravixens writes ({versions.supported_range()}): use "
            f"one of {', '.join(versions.text(minor) for minor in versions.KUBERNETES)}"
        )
    return versions.text(found)
