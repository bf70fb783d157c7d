"""A site's standalone nodes resolved against their specs, postures and (at serve/apply time) the secrets file.

    load_standalone(site_path, secrets_path=None) -> ResolvedStandalone   every check, every problem in its file
    ResolvedStandalone.documents[identity]                                the resolved spec the server returns

The rules across files are references.py; the site-only ones config/site_rules/standalone.py; a spec's unknown posture
is found when the specs folder is read (catalog.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terravixens.config.loader import SITE_LIMIT, SiteError, parse_site
from terravixens.config.loader import WHAT as SITE
from terravixens.config.model import Site
from terravixens.inputs import InputError, Lines, Problem, load_yaml, read_text
from terravixens.inputs.problems import field_path
from terravixens.standalone.catalog import Catalog, CatalogError, load_catalog
from terravixens.standalone.posture import Posture
from terravixens.standalone.references import Found, SecretsFile, SiteFile, secret_references, site_references
from terravixens.standalone.secrets import Secrets, load_secrets
from terravixens.standalone.spec import CtConfig, PveConfig, Spec, VmConfig
from terravixens.standalone.topology import PlacedGuest, placement
from terravixens.standalone.vocabulary import SCHEMA_VERSION


def _raise_if_any(found: list[Found], earlier: list[InputError]) -> None:
    """One CatalogError: the files that failed to load, then every problem grouped by file, in the order found."""
    by_file: dict[tuple[str, str], list[Problem]] = defaultdict(list)
    for item in found:
        by_file[(str(item.path), item.what)].append(
            Problem(field_path(item.location), item.message, item.lines.of(item.location) if item.lines else None)
        )
    errors = earlier + [InputError(path, problems, what) for (path, what), problems in by_file.items()]
    if errors:
        raise CatalogError(errors)


@dataclass(frozen=True)
class NodeSpec:
    """One node with everything its spec resolves to."""

    placed: PlacedGuest
    spec: Spec
    posture_name: str
    posture: Posture

    @property
    def auth(self) -> str:
        return self.posture.auth


@dataclass(frozen=True)
class ResolvedStandalone:
    """The site's standalone nodes resolved (not the site file's `standalone:` section, config.standalone.Standalone):
    the specs folder read, each node's spec and posture, and with the secrets file the documents the server serves."""

    site: Site
    site_path: Path
    catalog: Catalog
    nodes: dict[str, NodeSpec]
    secrets: Secrets | None
    documents: dict[str, dict[str, Any]]  # identity -> resolved spec (only with secrets: it holds the ssh public keys)


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


def _document(identity: str, node: NodeSpec, keys: dict[str, str]) -> dict[str, Any]:
    spec, placed, posture = node.spec, node.placed, node.posture
    hostname = spec.hostname_for(identity)
    first = placed.nics[0]
    config_type = placed.type
    type_config = getattr(spec.config, config_type)
    if type_config is None:
        type_config = {"pve": PveConfig, "vm": VmConfig, "ct": CtConfig}[config_type]()
    return {
        "schema_version": SCHEMA_VERSION,
        "identity": {
            "name": identity,
            "hostname": hostname,
            "domain": spec.identity.domain,
            "fqdn": spec.fqdn_for(identity),
        },
        "node": {"type": placed.type, "parent": placed.parent, "tier": placed.tier},
        "spec": placed.spec,
        "network": {
            "ip": spec.network.ip or first.address,
            "gateway": spec.network.gateway if spec.network.ip else first.gateway,
            "dns": list(spec.network.dns),
            "search": list(spec.network.search),
            "routes": [{"to": route.to, "via": route.via} for route in spec.network.routes],
            # Every NIC in the order Proxmox attaches them (the first as above): what the agent configures (ADR 0059).
            "interfaces": [
                {
                    "address": spec.network.ip or first.address,
                    "gateway": spec.network.gateway if spec.network.ip else first.gateway,
                },
                *({"address": nic.address, "gateway": nic.gateway} for nic in placed.nics[1:]),
            ],
        },
        "access": {
            "posture": node.posture_name,
            "auth": posture.auth,
            "ssh": posture.ssh.model_dump(),
            "automatic_updates": posture.automatic_updates,
            "users": {
                user: {
                    "sudo": settings.sudo,
                    "shell": settings.shell,
                    "groups": list(settings.groups),
                    "ssh_authorized_keys": [keys[key] for key in settings.ssh_keys],
                }
                for user, settings in sorted(spec.access.users.items())
            },
        },
        "platform": {
            "packages": list(spec.platform.packages),
            "services": {
                "enable": list(spec.platform.services.enable),
                "disable": list(spec.platform.services.disable),
            },
        },
        "config": {config_type: type_config.model_dump()},
        "run": {"trigger": spec.run.trigger, "interval": spec.run.every},
    }


def load_standalone(site_path: Path | str, secrets_path: Path | str | None = None) -> ResolvedStandalone:
    """The site, its specs folder and (optionally) the secrets file, every cross-file reference checked.

    Raises SiteError for a bad site file, CatalogError listing every problem of every other file."""
    site_path = Path(site_path)
    site, site_lines = load_site_lines(site_path)
    catalog = load_catalog(specs_folder(site, site_path))
    found = list(site_references(SiteFile(site, site_path, site_lines), catalog))
    earlier: list[InputError] = []
    secrets = None
    if secrets_path is not None:
        try:
            secrets, secrets_lines = load_secrets(secrets_path)
            found += secret_references(site, catalog, SecretsFile(secrets, Path(secrets_path), secrets_lines))
        except InputError as error:
            earlier.append(error)
    _raise_if_any(found, earlier)
    nodes = {}
    for name, placed in placement(site).items():
        spec = catalog.specs[placed.spec]
        nodes[name] = NodeSpec(placed, spec, spec.access.posture, catalog.postures[spec.access.posture])
    documents = {name: _document(name, node, secrets.ssh_keys) for name, node in nodes.items()} if secrets else {}
    return ResolvedStandalone(site, site_path, catalog, nodes, secrets, documents)
