"""Each layer's apply-time variables from the secrets file, in one place: what `terraform` gets in its environment
for one layer only (terravixens.operations.terraform.Terraform.layer_env), never for another.

    standalone, standalone-<host>   TF_VAR_node_tokens: that layer's nodes' tokens, by posture (ADR 0026)
                                    TF_VAR_agent_bundle_sha256 (a layer with VMs): the installed terravixens'
                                    agent bundle, which a VM's first boot may run (ADR 0059; not a secret)
    gitops-<cluster>                TF_VAR_flux_git_credentials: that cluster's Flux git credentials (ADR 0034)
                                    TF_VAR_csi_credentials: that cluster's CSI Secret (ADR 0044)
                                    TF_VAR_etcd_backup_credentials: its backup job's S3 keys (ADR 0059)

Only for the layers the operation touches: a deploy of `hypervisors` alone needs no secrets file. Problems in the
site's specs, in the secrets file or between the site and the secrets file are an input error (exit 2) listing every
problem, located in the file to edit, before Terraform runs.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from terravixens.config.loader import DEFAULT_SITE, SITE_ENV, SiteError
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode
from terravixens.layers import GITOPS, SiteLayers
from terravixens.operations.outcome import OperationError
from terravixens.standalone.secrets import SECRETS_ENV, Secrets


def layer_env(
    site: Site,
    site_path: str | None,
    secrets: str | None,
    selected: Sequence[str] | None,
    layers: SiteLayers | None = None,
) -> Mapping[str, Mapping[str, str]]:
    """Layer -> the variables (TF_VAR_…) of that layer, for the layers among `selected` (None: all layers) that take
    any from the secrets file; {} when none does. `layers`: the site's, when the caller has them (its Workspace)."""
    path = site_path or os.environ.get(SITE_ENV) or str(DEFAULT_SITE)
    secrets_path = secrets or os.environ.get(SECRETS_ENV) or None
    layers = layers or SiteLayers.of(site)
    env: dict[str, dict[str, str]] = defaultdict(dict)
    gitops = {layer.cluster: layer.name for layer in layers if layer.cluster and layer.kind.name == GITOPS}
    guests = [layer.name for layer in layers if layer.guests is not None]
    for layer, variables in _standalone_env(site, path, secrets_path, selected, guests).items():
        env[layer].update(variables)
    for layer, variables in _gitops_env(site, path, secrets_path, selected, gitops).items():
        env[layer].update(variables)
    for layer, variables in _csi_env(site, path, secrets_path, selected, gitops).items():
        env[layer].update(variables)
    for layer, variables in _backup_env(site, path, secrets_path, selected, gitops).items():
        env[layer].update(variables)
    return dict(env)


AGENT_SHA256_ENV = "TF_VAR_agent_bundle_sha256"


def agent_sha256() -> str:
    """The SHA-256 of the installed terravixens' agent bundle (built once per process): what `spec serve` of this
    version serves at GET /agent.pyz."""
    from terravixens.agent.bundle import BundleError, built

    try:
        return built()[1]
    except BundleError as error:
        raise OperationError(f"standalone layers: the agent bundle: {error}", ExitCode.FAILED) from None


# The name the operations have called it by since the L2 layers (the CLI still does).
standalone_layer_env = layer_env


def _standalone_env(
    site: Site, path: str, secrets_path: str | None, selected: Sequence[str] | None, layers: list[str]
) -> Mapping[str, Mapping[str, str]]:
    """The L2 layers' (those with guests) node tokens, when any of them is selected; with the agent bundle's SHA-256
    for a layer with a VM."""
    from terravixens.standalone.catalog import CatalogError
    from terravixens.standalone.layout import standalone_layers
    from terravixens.standalone.tokens import TokensUnavailable, layer_variables

    if not layers or (selected is not None and not set(selected) & set(layers)):
        return {}
    try:
        variables = layer_variables(path, secrets_path)
    except (SiteError, CatalogError, TokensUnavailable) as error:
        raise OperationError(f"standalone layers: {error}", ExitCode.BAD_INPUT) from None
    for name, layer in standalone_layers(site).items():
        if name in variables and any(node.type != "ct" for node in layer.nodes):
            variables[name] = {**variables[name], AGENT_SHA256_ENV: agent_sha256()}
    return variables


Location = tuple[Any, ...]  # a field path, as the credential modules yield it


def _gitops_env(
    site: Site, path: str, secrets_path: str | None, selected: Sequence[str] | None, gitops: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """gitops-<cluster> -> {TF_VAR_flux_git_credentials: …} for each selected gitops layer whose Flux takes its git
    credentials from the secrets file. Every entry of the secrets file's flux section is checked against the site
    whichever layers are selected (the file is one), the missing ones only for the selected layers."""
    from terravixens.standalone import flux_credentials as flux

    needed = [name for name in flux.clusters_with_credentials(site) if _selected(gitops[name], selected)]
    return _from_secrets_file(
        path,
        secrets_path,
        {name: gitops[name] for name in needed},
        lambda: flux.no_secrets_file(site, needed),
        lambda secrets: flux.cross_problems(site, secrets.flux, needed),
        lambda secrets, name: {flux.CREDENTIALS_ENV: flux.credentials_variable(secrets.flux[name])},
    )


def _csi_env(
    site: Site, path: str, secrets_path: str | None, selected: Sequence[str] | None, gitops: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """gitops-<cluster> -> {TF_VAR_csi_credentials: …} for each selected gitops layer whose cluster has `csi:`; the
    secrets file's csi section is checked against the site whichever layers are selected, like Flux's."""
    from terravixens.standalone import csi_credentials as csi

    needed = [name for name in csi.clusters_with_csi(site) if _selected(gitops[name], selected)]
    return _from_secrets_file(
        path,
        secrets_path,
        {name: gitops[name] for name in needed},
        lambda: csi.no_secrets_file(needed),
        lambda secrets: csi.cross_problems(site, secrets.csi, needed),
        lambda secrets, name: {csi.CSI_ENV: csi.csi_variable(secrets.csi[name])},
    )


def _backup_env(
    site: Site, path: str, secrets_path: str | None, selected: Sequence[str] | None, gitops: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """gitops-<cluster> -> {TF_VAR_etcd_backup_credentials: …} for each selected gitops layer whose cluster has
    `etcd_backup:`; the secrets file's etcd_backup section is checked against the site whichever layers are selected."""
    from terravixens.standalone import etcd_backup_credentials as backup

    needed = [name for name in backup.clusters_with_backup(site) if _selected(gitops[name], selected)]
    return _from_secrets_file(
        path,
        secrets_path,
        {name: gitops[name] for name in needed},
        lambda: backup.no_secrets_file(needed),
        lambda secrets: backup.cross_problems(site, secrets.etcd_backup, needed),
        lambda secrets, name: {backup.BACKUP_ENV: backup.backup_variable(secrets.etcd_backup[name])},
    )


def _selected(layer: str, selected: Sequence[str] | None) -> bool:
    return selected is None or layer in selected


def _from_secrets_file(
    path: str,
    secrets_path: str | None,
    needed: Mapping[str, str],
    missing_file: Callable[[], Iterable[tuple[Location, str]]],
    cross: Callable[[Secrets], Iterable[tuple[Location, str]]],
    variables: Callable[[Secrets, str], dict[str, str]],
) -> dict[str, dict[str, str]]:
    """The gitops layers' variables taken from the secrets file, for the clusters that need them (`needed`: cluster
    -> its gitops layer): no secrets file
    given, an unreadable one or entries that do not match the site are one input error (exit 2), every problem
    located in the file to edit (the site's lines when the file is missing, the secrets file's otherwise)."""
    from terravixens.inputs import InputError, Problem
    from terravixens.inputs.problems import field_path
    from terravixens.standalone.resolve import load_site_lines
    from terravixens.standalone.secrets import WHAT as SECRETS
    from terravixens.standalone.secrets import load_secrets

    if not needed:
        return {}
    layers = ", ".join(needed.values())
    try:
        _, site_lines = load_site_lines(path)
        if secrets_path is None:
            problems = [
                Problem(field_path(location), message, site_lines.of(location)) for location, message in missing_file()
            ]
            raise InputError(path, problems, "site file")
        secrets, secrets_lines = load_secrets(secrets_path)
    except (SiteError, InputError) as error:
        raise OperationError(f"{layers}: {error}", ExitCode.BAD_INPUT) from None
    problems = [
        Problem(field_path(location), message, secrets_lines.of(location)) for location, message in cross(secrets)
    ]
    if problems:
        raise OperationError(f"{layers}: {InputError(Path(secrets_path), problems, SECRETS)}", ExitCode.BAD_INPUT)
    return {layer: variables(secrets, name) for name, layer in needed.items()}
