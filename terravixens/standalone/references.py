"""Rules across files: the site's standalone nodes against the specs folder, and everything against the secrets
file. Each rule yields `Found` problems, located in the file the user has to edit (site, spec or secrets file);
the site-only rules are config/site_rules/standalone.py."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terravixens.config.loader import WHAT as SITE
from terravixens.config.model import Site
from terravixens.inputs import Lines, shown
from terravixens.standalone import vocabulary as words
from terravixens.standalone.catalog import SPEC, Catalog
from terravixens.standalone.secrets import WHAT as SECRETS
from terravixens.standalone.secrets import Secrets

MAKE_TOKEN = "openssl rand -base64 32"


@dataclass(frozen=True)
class Found:
    path: Path
    what: str
    location: tuple[Any, ...]
    message: str
    lines: Lines | None


@dataclass(frozen=True)
class SiteFile:
    site: Site
    path: Path
    lines: Lines

    def problem(self, location: tuple[Any, ...], message: str) -> Found:
        return Found(self.path, SITE, location, message, self.lines)


def _spec_problem(catalog: Catalog, spec_name: str, location: tuple[Any, ...], message: str) -> Found:
    loaded = catalog.spec_file(spec_name)
    return Found(loaded.path, SPEC, location, message, loaded.lines)


def _users_of_specs(site: Site, catalog: Catalog) -> dict[str, list[str]]:
    users: dict[str, list[str]] = defaultdict(list)
    for name in sorted(site.standalone.nodes):
        if site.standalone.nodes[name].spec in catalog.specs:
            users[site.standalone.nodes[name].spec].append(name)
    return dict(sorted(users.items()))


# ---------------------------------------------------------------------------------------------------- site -> specs
def site_references(site_file: SiteFile, catalog: Catalog) -> Iterator[Found]:
    yield from known_specs(site_file, catalog)
    yield from specs_for_their_type(site_file, catalog)
    yield from shared_specs_stay_generic(site_file.site, catalog)
    yield from spec_address_is_the_nodes(site_file.site, catalog)
    yield from routes_leave_from_the_nodes_subnets(site_file.site, catalog)
    yield from unique_names(site_file, catalog)


def known_specs(site_file: SiteFile, catalog: Catalog) -> Iterator[Found]:
    standalone = site_file.site.standalone
    for name, node in standalone.nodes.items():
        if node.spec not in catalog.specs:
            known = ", ".join(sorted(catalog.specs)) or f"none: {catalog.folder} has no spec files"
            yield site_file.problem(
                ("standalone", "nodes", name, "spec"),
                (
                    f"unknown spec {shown(node.spec)}: no {standalone.specs_dir}/{node.spec}.yaml next to the site "
                    f"file; use one of {known}"
                ),
            )


def specs_for_their_type(site_file: SiteFile, catalog: Catalog) -> Iterator[Found]:
    for name, node in site_file.site.standalone.nodes.items():
        spec = catalog.specs.get(node.spec)
        types = spec.config.types() if spec else []
        if types and node.type not in types:
            yield site_file.problem(
                ("standalone", "nodes", name, "spec"),
                (
                    f"spec {shown(node.spec)} configures {' and '.join(types)} nodes (config.{types[0]}), not a "
                    f"{node.type}: use a spec for {node.type} nodes or add config.{node.type} to it"
                ),
            )


def shared_specs_stay_generic(site: Site, catalog: Catalog) -> Iterator[Found]:
    for spec_name, names in _users_of_specs(site, catalog).items():
        spec = catalog.specs[spec_name]
        if len(names) > 1 and spec.identity.hostname:
            yield _spec_problem(
                catalog,
                spec_name,
                ("identity", "hostname"),
                (
                    f"is set ({shown(spec.identity.hostname)}) but nodes {', '.join(names)} use this spec: they would "
                    f"share a hostname; remove it (each node is named after its key) or give each node its own spec"
                ),
            )
        if len(names) > 1 and spec.network.ip:
            yield _spec_problem(
                catalog,
                spec_name,
                ("network", "ip"),
                (
                    f"is set ({spec.network.ip}) but nodes {', '.join(names)} use this spec: they would share an "
                    f"address; remove it (each node takes its address from the site file)"
                ),
            )


def spec_address_is_the_nodes(site: Site, catalog: Catalog) -> Iterator[Found]:
    for spec_name, names in _users_of_specs(site, catalog).items():
        spec = catalog.specs[spec_name]
        if len(names) != 1 or spec.network.ip is None:
            continue
        node = site.standalone.nodes[names[0]]
        own = [str(ipaddress.ip_interface(i.address).ip) for _, i in node.networks.interfaces()]
        if own and str(ipaddress.ip_interface(spec.network.ip).ip) not in own:
            yield _spec_problem(
                catalog,
                spec_name,
                ("network", "ip"),
                (
                    f"{spec.network.ip} is not an address node {shown(names[0])} has in the site file "
                    f"({', '.join(own)}): Proxmox configures the site's address; remove network.ip or make them agree"
                ),
            )


def routes_leave_from_the_nodes_subnets(site: Site, catalog: Catalog) -> Iterator[Found]:
    """Each route's router is on a subnet of every node that uses the spec: the agent cannot reach it otherwise."""
    for spec_name, names in _users_of_specs(site, catalog).items():
        spec = catalog.specs[spec_name]
        for index, route in enumerate(spec.network.routes):
            via = ipaddress.ip_address(route.via)
            for name in names:
                subnets = [
                    ipaddress.ip_interface(i.address).network
                    for _, i in site.standalone.nodes[name].networks.interfaces()
                ]
                if not any(via in subnet for subnet in subnets):
                    yield _spec_problem(
                        catalog,
                        spec_name,
                        ("network", "routes", index, "via"),
                        (
                            f"{route.via} is on no subnet of node {shown(name)} "
                            f"({', '.join(str(subnet) for subnet in subnets)}): route via a router the node reaches "
                            f"directly"
                        ),
                    )


def unique_names(site_file: SiteFile, catalog: Catalog) -> Iterator[Found]:
    seen: dict[str, str] = {}
    nodes = site_file.site.standalone.nodes
    for name in sorted(nodes):
        spec = catalog.specs.get(nodes[name].spec)
        if spec is None:
            continue
        fqdn = spec.fqdn_for(name)
        if not words.matches(words.DOMAIN, fqdn):  # a hostname and a domain each valid, too long together
            yield site_file.problem(
                ("standalone", "nodes", name, "spec"),
                (
                    f"the node would be named {shown(fqdn)} ({len(fqdn)} characters), longer than a DNS name (253): "
                    f"shorten its spec's identity.domain or hostname"
                ),
            )
            continue
        owner = seen.setdefault(fqdn, name)
        if owner != name:
            yield site_file.problem(
                ("standalone", "nodes", name, "spec"),
                (
                    f"the node would be named {spec.fqdn_for(name)!r}, like node {owner!r}: give one of them another "
                    f"identity.hostname or domain"
                ),
            )


# ---------------------------------------------------------------------------------------------------- secrets
@dataclass(frozen=True)
class SecretsFile:
    secrets: Secrets
    path: Path
    lines: Lines

    def problem(self, location: tuple[Any, ...], message: str) -> Found:
        return Found(self.path, SECRETS, location, message, self.lines)


def secret_references(site: Site, catalog: Catalog, secrets_file: SecretsFile) -> Iterator[Found]:
    yield from known_ssh_keys(catalog, secrets_file)
    yield from required_tokens(site, catalog, secrets_file)
    yield from no_stray_tokens(site, secrets_file)
    yield from one_holder_per_token(secrets_file)


def known_ssh_keys(catalog: Catalog, secrets_file: SecretsFile) -> Iterator[Found]:
    keys = secrets_file.secrets.ssh_keys
    for spec_name, spec in catalog.specs.items():
        for user, settings in spec.access.users.items():
            for index, key in enumerate(settings.ssh_keys):
                if key not in keys:
                    yield _spec_problem(
                        catalog,
                        spec_name,
                        ("access", "users", user, "ssh_keys", index),
                        (
                            f"unknown ssh key {shown(key)}: add it under ssh_keys in the secrets file "
                            f"({secrets_file.path}) or use one of {', '.join(sorted(keys)) or 'none declared'}"
                        ),
                    )


def required_tokens(site: Site, catalog: Catalog, secrets_file: SecretsFile) -> Iterator[Found]:
    by_auth: dict[str, list[str]] = defaultdict(list)
    for name, node in sorted(site.standalone.nodes.items()):
        spec = catalog.specs.get(node.spec)
        posture = catalog.postures.get(spec.access.posture) if spec else None
        if posture is not None:
            by_auth[posture.auth].append(name)
    secrets = secrets_file.secrets
    if by_auth["site_token"] and secrets.site_token is None:
        names = by_auth["site_token"]
        yield secrets_file.problem(
            ("site_token",),
            (
                f"is required: node{'s' if len(names) > 1 else ''} {', '.join(names)} use a site_token posture; add "
                f"site_token (make one: {MAKE_TOKEN})"
            ),
        )
    for name in by_auth["node_token"]:
        if name not in secrets.node_tokens:
            yield secrets_file.problem(
                ("node_tokens", name),
                (
                    f"is required: node {name!r} uses a node_token posture; add node_tokens.{name} (make one: "
                    f"{MAKE_TOKEN})"
                ),
            )


def no_stray_tokens(site: Site, secrets_file: SecretsFile) -> Iterator[Found]:
    for name in sorted(secrets_file.secrets.node_tokens):
        if name not in site.standalone.nodes:
            yield secrets_file.problem(
                ("node_tokens", name), (f"no standalone node {name!r} in the site: remove the token or fix the name")
            )


def one_holder_per_token(secrets_file: SecretsFile) -> Iterator[Found]:
    secrets = secrets_file.secrets
    owners: dict[str, str] = {secrets.site_token: "site_token"} if secrets.site_token is not None else {}
    for name in sorted(secrets.node_tokens):
        owner = owners.setdefault(secrets.node_tokens[name], f"node_tokens.{name}")
        if owner != f"node_tokens.{name}":
            yield secrets_file.problem(
                ("node_tokens", name),
                (f"holds the same token as {owner}: a token names one holder; make another ({MAKE_TOKEN})"),
            )
