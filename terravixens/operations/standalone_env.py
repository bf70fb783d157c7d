"""The L2 layers' apply-time environment for the operations: each layer's node tokens (ADR 0026).

Only when the operation touches an L2 layer: a deploy of `hypervisors` alone needs no secrets file. Problems in the
site's specs or in the secrets file are an input error (exit 2) listing every problem, before Terraform runs.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from terravixens.config.loader import DEFAULT_SITE, SITE_ENV, SiteError
from terravixens.config.model import Site
from terravixens.operations.outcome import ExitCode, OperationError
from terravixens.standalone.secrets import SECRETS_ENV


def standalone_layer_env(site: Site, site_path: str | None, secrets: str | None,
                         selected: Sequence[str] | None) -> Mapping[str, Mapping[str, str]]:
    """Layer -> environment for the L2 layers among `selected` (None: all layers); {} when none is selected."""
    from terravixens.standalone.catalog import CatalogError
    from terravixens.standalone.layout import standalone_layers
    from terravixens.standalone.tokens import TokensUnavailable, layer_variables

    layers = standalone_layers(site)
    if not layers or (selected is not None and not set(selected) & set(layers)):
        return {}
    path = site_path or os.environ.get(SITE_ENV) or str(DEFAULT_SITE)
    try:
        return layer_variables(path, secrets or os.environ.get(SECRETS_ENV) or None)
    except (SiteError, CatalogError, TokensUnavailable) as error:
        raise OperationError(f"standalone layers: {error}", ExitCode.BAD_INPUT) from None
