"""The resolved spec (what `spec serve` answers, what `spec push` sends) read into what each section wants.

The server checked the spec against the site, the posture and the secrets file; the agent still refuses a document
it cannot apply whole — a wrong shape, a name that would reach a shell or a path — naming the field, the value and
the fix, before changing anything. What the node type and the posture add (a package, a service) is folded in here,
so each section sees one list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,127}$")
SERVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$")
SHELL = re.compile(r"^/[A-Za-z0-9_/.-]{1,127}$")
FQDN = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")
KEY = re.compile(r"^[a-z0-9@.-]+ [A-Za-z0-9+/]+={0,3}( [^\n]{0,200})?$")
INTERVAL = re.compile(r"^[1-9][0-9]{0,5}[smh]$")
TRIGGERS = ("boot", "interval", "manual")


class BadSpec(Exception):
    """The document cannot be applied: one line with the field, the value and the fix."""


@dataclass(frozen=True)
class User:
    name: str
    sudo: bool
    shell: str
    groups: tuple[str, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Desired:
    identity: str
    node_type: str
    hostname: str
    fqdn: str
    users: tuple[User, ...]
    password_authentication: bool
    permit_root_login: bool
    packages: tuple[str, ...]
    enable: tuple[str, ...]
    disable: tuple[str, ...]
    config: dict[str, Any]
    trigger: str
    interval: str | None


def _get(document: dict, path: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value: Any = document
    for part in path.split("."):
        value = value.get(part, default) if isinstance(value, dict) else default
    if value is None and default is not None:
        value = default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadSpec(f"spec field {path}: {str(value)[:64]!r} is not a {_kind(kind)}: fetch the spec from the server")
    return value


def _kind(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(
        {dict: "mapping", list: "list", str: "text", bool: "true/false", int: "number"}[k] for k in kinds
    )


def _names(values: list, path: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    for value in values:
        if not isinstance(value, str) or not pattern.match(value):
            raise BadSpec(f"spec field {path}: {str(value)[:64]!r} is not a {what}: fix the spec and fetch it again")
    return tuple(values)


def read(document: Any) -> Desired:
    if not isinstance(document, dict):
        raise BadSpec("the spec is not a JSON object: give the document `spec get` wrote or `spec serve` answers")
    if document.get("schema_version") != SCHEMA_VERSION:
        raise BadSpec(
            f"spec field schema_version: {document.get('schema_version')!r} is not {SCHEMA_VERSION}: update "
            f"terravixens on the node or the driver"
        )
    identity = _get(document, "identity.name", str)
    hostname = _get(document, "identity.hostname", str)
    fqdn = _get(document, "identity.fqdn", str)
    _names([identity, hostname], "identity", NAME, "DNS label")
    _names([fqdn], "identity.fqdn", FQDN, "DNS name")
    node_type = _get(document, "node.type", str)
    if node_type not in ("vm", "ct", "pve"):
        raise BadSpec(f"spec field node.type: {node_type[:16]!r} is not vm, ct or pve: fetch the spec from the server")
    users = []
    for name, settings in sorted(_get(document, "access.users", dict, {}).items()):
        _names([name], "access.users", USERNAME, "user name")
        where = f"access.users.{name}"
        if not isinstance(settings, dict):
            raise BadSpec(f"spec field {where}: is not a mapping: fetch the spec from the server")
        users.append(
            User(
                name,
                _get(settings, "sudo", bool, False) if "sudo" in settings else False,
                _names([_get(settings, "shell", str, "/bin/bash")], f"{where}.shell", SHELL, "shell path")[0],
                _names(_get(settings, "groups", list, []), f"{where}.groups", USERNAME, "group name"),
                _names(
                    _get(settings, "ssh_authorized_keys", list, []), f"{where}.ssh_authorized_keys", KEY, "public key"
                ),
            )
        )
    ssh = _get(document, "access.ssh", dict, {})
    packages = list(_names(_get(document, "platform.packages", list, []), "platform.packages", PACKAGE, "package name"))
    enable = list(
        _names(_get(document, "platform.services.enable", list, []), "platform.services.enable", SERVICE, "unit")
    )
    disable = _names(
        _get(document, "platform.services.disable", list, []), "platform.services.disable", SERVICE, "unit"
    )
    config = _get(document, f"config.{node_type}", dict, {})
    if node_type == "vm" and config.get("guest_agent", True):
        packages.append("qemu-guest-agent")  # Proxmox reads the guest's addresses from it
        enable.append("qemu-guest-agent")
    if _get(document, "access", dict).get("automatic_updates") is True:
        packages.append("unattended-upgrades")
        enable.append("unattended-upgrades")
    trigger = _get(document, "run.trigger", str, "interval")
    interval = document.get("run", {}).get("interval") if isinstance(document.get("run"), dict) else None
    if trigger not in TRIGGERS:
        raise BadSpec(f"spec field run.trigger: {trigger[:16]!r} is not one of {', '.join(TRIGGERS)}: fix the spec")
    if trigger == "interval" and not (isinstance(interval, str) and INTERVAL.match(interval)):
        raise BadSpec(f"spec field run.interval: {str(interval)[:16]!r} is not a duration like 30m: fix the spec")
    return Desired(
        identity=identity,
        node_type=node_type,
        hostname=hostname,
        fqdn=fqdn,
        users=tuple(users),
        password_authentication=ssh.get("password_authentication") is True,
        permit_root_login=ssh.get("permit_root_login") is True,
        packages=tuple(dict.fromkeys(packages)),
        enable=tuple(dict.fromkeys(enable)),
        disable=disable,
        config=config,
        trigger=trigger,
        interval=interval if trigger == "interval" else None,
    )
