"""A site's standalone nodes resolved against their specs, postures and (at serve/apply time) the secrets file.

    load_standalone(site_path, secrets_path=None) -> Standalone   every check, every problem located in its file
    Standalone.documents[identity]                                the resolved spec the server returns

The checks that need more than the site file live here (the site-only ones are config/standalone_rules.py):
unknown spec or posture, a spec configuring another node type, a hostname or address a shared spec would give
several nodes, duplicate names (FQDNs); with secrets: unknown ssh keys, missing or stray tokens, shared tokens.
"""
from __future__ import annotations

import ipaddress
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from terravixens.config.loader import WHAT as SITE, SITE_LIMIT, SiteError, parse_site
from terravixens.config.model import Site
from terravixens.inputs import InputError, Lines, Problem, load_yaml, read_text, shown
from terravixens.inputs.problems import field_path
from terravixens.standalone.catalog import SPEC, Catalog, CatalogError, load_catalog
from terravixens.standalone.posture import Posture
from terravixens.standalone.secrets import WHAT as SECRETS, Secrets, load_secrets
from terravixens.standalone.spec import SCHEMA_VERSION, CtConfig, PveConfig, Spec, VmConfig
from terravixens.standalone.topology import PlacedNode, placement


class _Problems:
    """Problems collected per file, in the order found; `raise_if_any` makes one CatalogError of them."""

    def __init__(self) -> None:
        self.by_file: dict[tuple[str, str], list[Problem]] = defaultdict(list)

    def add(self, path: Path | str, what: str, location: tuple, message: str, lines: Lines | None) -> None:
        self.by_file[(str(path), what)].append(Problem(field_path(location), message,
                                                       lines.of(location) if lines else None))

    def raise_if_any(self, earlier: list[InputError] | None = None) -> None:
        errors = list(earlier or []) + [InputError(path, problems, what)
                                        for (path, what), problems in self.by_file.items()]
        if errors:
            raise CatalogError(errors)


@dataclass(frozen=True)
class NodeSpec:
    """One node with everything its spec resolves to."""

    placed: PlacedNode
    spec: Spec
    posture_name: str
    posture: Posture

    @property
    def auth(self) -> str:
        return self.posture.auth


@dataclass(frozen=True)
class Standalone:
    site: Site
    site_path: Path
    catalog: Catalog
    nodes: dict[str, NodeSpec]
    secrets: Secrets | None
    documents: dict[str, dict]      # identity -> resolved spec (only with secrets: it holds the ssh public keys)


def specs_folder(site: Site, site_path: Path | str) -> Path:
    return Path(site_path).resolve().parent / site.standalone.specs_dir


def load_site_lines(path: Path | str) -> tuple[Site, Lines]:
    """The site and the line of each of its fields (problems found later in other files point back into it)."""
    try:
        text = read_text(path, limit=SITE_LIMIT, what=SITE)
        data, lines = load_yaml(text, path, what=SITE)
    except InputError as error:
        raise SiteError(path, error.problems) from None
    return parse_site(data, path, lines), lines


def _hostname(name: str, spec: Spec) -> str:
    return spec.identity.hostname or name


def _fqdn(name: str, spec: Spec) -> str:
    hostname = _hostname(name, spec)
    return f"{hostname}.{spec.identity.domain}" if spec.identity.domain else hostname


def check_references(site: Site, site_path: Path, site_lines: Lines, catalog: Catalog, found: _Problems) -> None:
    nodes = site.standalone.nodes
    users: dict[str, list[str]] = defaultdict(list)
    for name, node in nodes.items():
        location = ("standalone", "nodes", name, "spec")
        spec = catalog.specs.get(node.spec)
        if spec is None:
            known = ", ".join(sorted(catalog.specs)) or f"none: {catalog.folder} has no spec files"
            found.add(site_path, SITE, location, (
                f"unknown spec {shown(node.spec)}: no {site.standalone.specs_dir}/{node.spec}.yaml next to the site "
                f"file; use one of {known}"), site_lines)
            continue
        users[node.spec].append(name)
        types = spec.config.types()
        if types and node.type not in types:
            found.add(site_path, SITE, location, (
                f"spec {shown(node.spec)} configures {' and '.join(types)} nodes (config.{types[0]}), not a "
                f"{node.type}: use a spec for {node.type} nodes or add config.{node.type} to it"), site_lines)
    for spec_name, names in sorted(users.items()):
        spec, loaded = catalog.specs[spec_name], catalog.spec_file(spec_name)
        if len(names) > 1 and spec.identity.hostname:
            found.add(loaded.path, SPEC, ("identity", "hostname"), (
                f"is set ({shown(spec.identity.hostname)}) but nodes {', '.join(sorted(names))} use this spec: they "
                f"would share a hostname; remove it (each node is named after its key) or give each node its own "
                f"spec"), loaded.lines)
        if len(names) > 1 and spec.network.ip:
            found.add(loaded.path, SPEC, ("network", "ip"), (
                f"is set ({spec.network.ip}) but nodes {', '.join(sorted(names))} use this spec: they would share an "
                f"address; remove it (each node takes its address from the site file)"), loaded.lines)
        elif spec.network.ip:
            node = nodes[names[0]]
            own = [str(ipaddress.ip_interface(i.address).ip) for _, i in node.networks.interfaces()]
            wanted = str(ipaddress.ip_interface(spec.network.ip).ip)
            if own and wanted not in own:
                found.add(loaded.path, SPEC, ("network", "ip"), (
                    f"{spec.network.ip} is not an address node {shown(names[0])} has in the site file "
                    f"({', '.join(own)}): Proxmox configures the site's address; remove network.ip or make them "
                    f"agree"), loaded.lines)
    seen: dict[str, str] = {}
    for name in sorted(nodes):
        spec = catalog.specs.get(nodes[name].spec)
        if spec is None:
            continue
        owner = seen.setdefault(_fqdn(name, spec), name)
        if owner != name:
            found.add(site_path, SITE, ("standalone", "nodes", name, "spec"), (
                f"the node would be named {_fqdn(name, spec)!r}, like node {owner!r}: give one of them another "
                f"identity.hostname or domain"), site_lines)


def check_secrets(site: Site, catalog: Catalog, secrets: Secrets, secrets_path: Path, secrets_lines: Lines,
                  found: _Problems) -> None:
    for spec_name, spec in catalog.specs.items():
        loaded = catalog.spec_file(spec_name)
        for user, settings in spec.access.users.items():
            for index, key in enumerate(settings.ssh_keys):
                if key not in secrets.ssh_keys:
                    found.add(loaded.path, SPEC, ("access", "users", user, "ssh_keys", index), (
                        f"unknown ssh key {shown(key)}: add it under ssh_keys in the secrets file "
                        f"({secrets_path}) or use one of {', '.join(sorted(secrets.ssh_keys)) or 'none declared'}"),
                        loaded.lines)
    by_auth: dict[str, list[str]] = defaultdict(list)
    for name, node in site.standalone.nodes.items():
        spec = catalog.specs.get(node.spec)
        posture = catalog.postures.get(spec.access.posture) if spec else None
        if posture is not None:
            by_auth[posture.auth].append(name)
    if by_auth["site_token"] and secrets.site_token is None:
        found.add(secrets_path, SECRETS, ("site_token",), (
            f"is required: node{'s' if len(by_auth['site_token']) > 1 else ''} "
            f"{', '.join(sorted(by_auth['site_token']))} use a site_token posture; add site_token (make one: "
            f"openssl rand -base64 32)"), secrets_lines)
    for name in sorted(by_auth["node_token"]):
        if name not in secrets.node_tokens:
            found.add(secrets_path, SECRETS, ("node_tokens", name), (
                f"is required: node {name!r} uses a node_token posture; add node_tokens.{name} (make one: "
                f"openssl rand -base64 32)"), secrets_lines)
    for name in sorted(secrets.node_tokens):
        if name not in site.standalone.nodes:
            found.add(secrets_path, SECRETS, ("node_tokens", name), (
                f"no standalone node {name!r} in the site: remove the token or fix the name"), secrets_lines)
    owners: dict[str, str] = {}
    if secrets.site_token is not None:
        owners[secrets.site_token] = "site_token"
    for name in sorted(secrets.node_tokens):
        owner = owners.setdefault(secrets.node_tokens[name], f"node_tokens.{name}")
        if owner != f"node_tokens.{name}":
            found.add(secrets_path, SECRETS, ("node_tokens", name), (
                f"holds the same token as {owner}: a token names one holder; make another (openssl rand -base64 32)"),
                secrets_lines)


def _document(identity: str, node: NodeSpec, keys: dict[str, str]) -> dict:
    spec, placed, posture = node.spec, node.placed, node.posture
    hostname = _hostname(identity, spec)
    first = placed.nics[0]
    config_type = placed.type
    type_config = getattr(spec.config, config_type)
    if type_config is None:
        type_config = {"pve": PveConfig, "vm": VmConfig, "ct": CtConfig}[config_type]()
    return {
        "schema_version": SCHEMA_VERSION,
        "identity": {"name": identity, "hostname": hostname, "domain": spec.identity.domain,
                     "fqdn": _fqdn(identity, spec)},
        "node": {"type": placed.type, "parent": placed.parent, "tier": placed.tier},
        "spec": placed.spec,
        "network": {"ip": spec.network.ip or first.address,
                    "gateway": spec.network.gateway if spec.network.ip else first.gateway,
                    "dns": list(spec.network.dns), "search": list(spec.network.search)},
        "access": {
            "posture": node.posture_name, "auth": posture.auth, "ssh": posture.ssh.model_dump(),
            "automatic_updates": posture.automatic_updates,
            "users": {user: {"sudo": settings.sudo, "shell": settings.shell, "groups": list(settings.groups),
                             "ssh_authorized_keys": [keys[key] for key in settings.ssh_keys]}
                      for user, settings in sorted(spec.access.users.items())},
        },
        "platform": {"packages": list(spec.platform.packages),
                     "services": {"enable": list(spec.platform.services.enable),
                                  "disable": list(spec.platform.services.disable)}},
        "config": {config_type: type_config.model_dump()},
        "run": {"trigger": spec.run.trigger, "interval": spec.run.every},
    }


def load_standalone(site_path: Path | str, secrets_path: Path | str | None = None) -> Standalone:
    """The site, its specs folder and (optionally) the secrets file, every cross-file reference checked.

    Raises SiteError for a bad site file, CatalogError listing every problem of every other file."""
    site_path = Path(site_path)
    site, site_lines = load_site_lines(site_path)
    catalog = load_catalog(specs_folder(site, site_path))
    found = _Problems()
    earlier: list[InputError] = []
    secrets = None
    if secrets_path is not None:
        try:
            secrets, secrets_lines = load_secrets(secrets_path)
        except InputError as error:
            earlier.append(error)
    check_references(site, site_path, site_lines, catalog, found)
    if secrets is not None:
        check_secrets(site, catalog, secrets, Path(secrets_path), secrets_lines, found)
    found.raise_if_any(earlier)
    nodes = {}
    for name, placed in placement(site).items():
        spec = catalog.specs[placed.spec]
        nodes[name] = NodeSpec(placed, spec, spec.access.posture, catalog.postures[spec.access.posture])
    documents = {name: _document(name, node, secrets.ssh_keys) for name, node in nodes.items()} if secrets else {}
    return Standalone(site, site_path, catalog, nodes, secrets, documents)
