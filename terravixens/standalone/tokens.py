"""The apply-time input of the L2 stacks: each node's token, by its posture, from the secrets file (ADR 0026).

    site_token posture  -> the secrets file's site_token
    node_token posture  -> the secrets file's node_tokens[<node>]
    network posture     -> no entry (the node's env file gets TERRAVIXENS_TOKEN='')

`layer_variables()` gives, per L2 layer, the environment `terraform` needs: TF_VAR_node_tokens holding that
layer's nodes only. (The other apply-time input of a layer with VMs, TF_VAR_agent_bundle_sha256, is the installed
terravixens' and is added by terravixens.operations.standalone_env: ADR 0059.) The posture lives in the specs
folder, not in the synthesized JSON: this is the one place where it decides what a node receives.
"""

from __future__ import annotations

import json
from pathlib import Path

from terravixens.standalone.layout import standalone_layers
from terravixens.standalone.resolve import ResolvedStandalone, load_standalone

TOKENS_ENV = "TF_VAR_node_tokens"


class TokensUnavailable(ValueError):
    """Some node's posture asks for a token and no secrets file was given."""


def node_tokens(standalone: ResolvedStandalone) -> dict[str, str]:
    """node -> the token its posture asks for; nodes with a `network` posture are absent."""
    secrets = standalone.secrets
    needing = sorted(name for name, node in standalone.nodes.items() if node.auth != "network")
    if not needing:
        return {}
    if secrets is None:
        raise TokensUnavailable(
            f"standalone nodes {', '.join(needing)} have a posture that uses a token: give the secrets file "
            f"(--secrets FILE or $TERRAVIXENS_SECRETS)"
        )
    tokens: dict[str, str] = {}
    for name in needing:
        if standalone.nodes[name].auth != "site_token":
            tokens[name] = secrets.node_tokens[name]
        elif secrets.site_token is not None:
            tokens[name] = secrets.site_token
        else:  # the secrets file's references check refuses this: the site_token is required
            raise TokensUnavailable(
                f"standalone node {name} has a site_token posture and the secrets file has no site_token"
            )
    return tokens


def layer_variables(site_path: Path | str, secrets_path: Path | str | None) -> dict[str, dict[str, str]]:
    """L2 layer -> {TF_VAR_node_tokens: JSON of that layer's tokens}. Raises SiteError, CatalogError (the site, its
    specs or the secrets file, every problem located) or TokensUnavailable."""
    standalone = load_standalone(site_path, secrets_path)
    tokens = node_tokens(standalone)
    return {
        name: {
            TOKENS_ENV: json.dumps(
                {node.name: tokens[node.name] for node in layer.nodes if node.name in tokens}, sort_keys=True
            )
        }
        for name, layer in standalone_layers(standalone.site).items()
    }
