"""The resolved spec (what `spec serve` answers, what `spec push` sends) read into what each section wants.

The server checked the spec against the site, the posture and the secrets file; the agent still refuses a document
it cannot apply whole — a wrong shape, a name that would reach a shell or a path — naming the field, the value and
the fix, before changing anything. What the node type and the posture add (a package, a service) is folded in here,
so each section sees one list.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from terravixens.inputs import shown
from terravixens.standalone import vocabulary as words
from terravixens.standalone.vocabulary import SCHEMA_VERSION

# The agent's patterns are the spec's vocabulary (terravixens/standalone/vocabulary.py), the server's too: one
# table, matched whole (tests/test_spec_vocabulary.py names each of them and refuses the same values on both sides).
NAME, FQDN, USERNAME, GROUP = words.LABEL, words.DOMAIN, words.USERNAME, words.GROUP
PACKAGE, SERVICE, SHELL, KEY = words.PACKAGE, words.SERVICE, words.SHELL, words.PUBLIC_KEY
TRIGGERS, NODE_TYPES = words.TRIGGERS, words.NODE_TYPES
__all__ = ["SCHEMA_VERSION", "BadSpec", "Desired", "Interface", "Network", "Route", "User", "read"]


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
class Interface:
    address: str  # with its prefix: 10.11.1.61/24
    gateway: str | None


@dataclass(frozen=True)
class Route:
    to: str
    via: str


@dataclass(frozen=True)
class Network:
    """The node's addresses (one per NIC, in Proxmox's order), static routes and DNS (ADR 0059)."""

    interfaces: tuple[Interface, ...]
    routes: tuple[Route, ...]
    dns: tuple[str, ...]
    search: tuple[str, ...]


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
    network: Network | None = None


def _get(document: dict[str, Any], path: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
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


def _names(values: list[Any], path: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    for value in values:
        if not words.matches(pattern, value):
            raise BadSpec(f"spec field {path}: {str(value)[:64]!r} is not a {what}: fix the spec and fetch it again")
    return tuple(values)


def _user(name: object, settings: object) -> User:
    problem = words.user_problem(name)
    if problem:
        raise BadSpec(f"spec field access.users: {problem}")
    where = f"access.users.{name}"
    if not isinstance(settings, dict):
        raise BadSpec(f"spec field {where}: is not a mapping: fetch the spec from the server")
    groups = _get(settings, "groups", list, [])
    keys = _get(settings, "ssh_authorized_keys", list, [])
    return User(
        str(name),
        _get(settings, "sudo", bool, False) if "sudo" in settings else False,
        _names([_get(settings, "shell", str, "/bin/bash")], f"{where}.shell", SHELL, "shell path")[0],
        _names(groups, f"{where}.groups", GROUP, "group name"),
        _names(keys, f"{where}.ssh_authorized_keys", KEY, "public key (TYPE BASE64 [comment])"),
    )


def _type_config(document: dict[str, Any], node_type: str) -> dict[str, Any]:
    config: dict[str, Any] = _get(document, f"config.{node_type}", dict, {})
    for key in ("guest_agent", "regenerate_host_keys"):
        if key in config:
            _get(config, key, bool)
    repository = config.get("repository", words.PVE_REPOSITORIES[0])
    if repository not in words.PVE_REPOSITORIES:
        raise BadSpec(
            f"spec field config.{node_type}.repository: {str(repository)[:32]!r} is not one of "
            f"{', '.join(words.PVE_REPOSITORIES)}: fix the spec"
        )
    return config


def _address(value: object, where: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(value) if isinstance(value, str) else ipaddress.ip_address("invalid")
    except ValueError:
        raise BadSpec(f"spec field {where}: {str(value)[:64]!r} is not an IP address: fix the spec") from None


def _network(document: dict[str, Any]) -> Network | None:
    """network.interfaces (or ip/gateway, the first NIC only, from a server before ADR 0059), routes, dns, search."""
    section = document.get("network")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise BadSpec("spec field network: is not a mapping: fetch the spec from the server")
    listed = section.get("interfaces")
    if listed is None:
        listed = [{"address": section.get("ip"), "gateway": section.get("gateway")}]
    if not isinstance(listed, list) or not listed or len(listed) > 16:
        raise BadSpec("spec field network.interfaces: is not a list of 1 to 16 addresses: fetch the spec again")
    interfaces = []
    for index, item in enumerate(listed):
        where = f"network.interfaces[{index}]"
        if not isinstance(item, dict):
            raise BadSpec(f"spec field {where}: is not a mapping: fetch the spec from the server")
        address = item.get("address")
        try:
            interface = ipaddress.ip_interface(address) if isinstance(address, str) and "/" in address else None
        except ValueError:
            interface = None
        if interface is None:
            raise BadSpec(f"spec field {where}.address: {str(address)[:64]!r} is not an address with its prefix")
        gateway = item.get("gateway")
        if gateway is not None:
            gateway_ip = _address(gateway, f"{where}.gateway")
            if gateway_ip not in interface.network:
                raise BadSpec(f"spec field {where}.gateway: {gateway} is outside {interface.network}: fix the site")
        interfaces.append(Interface(str(address), gateway))
    routes = []
    for index, item in enumerate(_get(document, "network.routes", list, [])):
        if not isinstance(item, dict):
            raise BadSpec(f"spec field network.routes[{index}]: is not a mapping: fetch the spec from the server")
        problem = words.route_problem(item.get("to"), item.get("via"))
        if problem:
            raise BadSpec(f"spec field network.routes[{index}]: {problem}")
        via = ipaddress.ip_address(item["via"])
        if not any(via in ipaddress.ip_interface(i.address).network for i in interfaces):
            raise BadSpec(f"spec field network.routes[{index}].via: {via} is on no subnet of this node: fix the spec")
        routes.append(Route(item["to"], item["via"]))
    dns = _get(document, "network.dns", list, [])
    search = _get(document, "network.search", list, [])
    for index, server in enumerate(dns):
        _address(server, f"network.dns[{index}]")
    _names(search, "network.search", FQDN, "DNS domain")
    if len(routes) > words.MAX_ROUTES or len(dns) > words.MAX_DNS or len(search) > words.MAX_SEARCH:
        raise BadSpec(
            f"spec field network: more than {words.MAX_ROUTES} routes, {words.MAX_DNS} DNS servers or "
            f"{words.MAX_SEARCH} search domains: fix the spec"
        )
    return Network(tuple(interfaces), tuple(routes), tuple(dns), tuple(search))


def read(document: Any) -> Desired:
    if not isinstance(document, dict):
        raise BadSpec("the spec is not a JSON object: give the document `spec get` wrote or `spec serve` answers")
    if document.get("schema_version") != SCHEMA_VERSION or isinstance(document.get("schema_version"), bool):
        raise BadSpec(
            f"spec field schema_version: {shown(document.get('schema_version'), 16)} is not {SCHEMA_VERSION}: "
            f"update terravixens on the node or the driver"
        )
    identity = _get(document, "identity.name", str)
    hostname = _get(document, "identity.hostname", str)
    fqdn = _get(document, "identity.fqdn", str)
    _names([identity, hostname], "identity", NAME, "DNS label")
    _names([fqdn], "identity.fqdn", FQDN, "DNS name")
    node_type = _get(document, "node.type", str)
    if node_type not in NODE_TYPES:
        raise BadSpec(
            f"spec field node.type: {node_type[:16]!r} is not {', '.join(NODE_TYPES)}: fetch the spec from the server"
        )
    users = [_user(name, settings) for name, settings in sorted(_get(document, "access.users", dict, {}).items())]
    ssh = _get(document, "access.ssh", dict, {})
    packages = list(_names(_get(document, "platform.packages", list, []), "platform.packages", PACKAGE, "package name"))
    enable = list(
        _names(_get(document, "platform.services.enable", list, []), "platform.services.enable", SERVICE, "unit")
    )
    disable = _names(
        _get(document, "platform.services.disable", list, []), "platform.services.disable", SERVICE, "unit"
    )
    config = _type_config(document, node_type)
    if node_type == "vm" and config.get("guest_agent", True):
        packages.append("qemu-guest-agent")  # Proxmox reads the guest's addresses from it
        enable.append("qemu-guest-agent")
    if _get(document, "access", dict).get("automatic_updates") is True:
        packages.append("unattended-upgrades")
        enable.append("unattended-upgrades")
    trigger = _get(document, "run.trigger", str, "interval")
    if trigger not in TRIGGERS:
        raise BadSpec(f"spec field run.trigger: {trigger[:16]!r} is not one of {', '.join(TRIGGERS)}: fix the spec")
    interval = _get(document, "run", dict).get("interval") if trigger == "interval" else None
    problem = words.interval_problem(interval) if trigger == "interval" else None
    if problem:
        raise BadSpec(f"spec field run.interval: {problem}: fix the spec")
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
        interval=interval,
        network=_network(document),
    )
