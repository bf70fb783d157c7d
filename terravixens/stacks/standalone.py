"""L2: the standalone nodes of one Proxmox API — the site's hypervisors (`standalone`) or one nested pve host
(`standalone-<host>`) — see docs/adr/0025-standalone-stack-layout.md.

Every node is a construct named by its stable name, directly under the stack. The apply-time inputs are the
sensitive `node_tokens` variable (node -> token, for the nodes whose posture asks for one; `terravixens deploy`
fills it from the secrets file): a node's posture is not in the synthesized JSON at all, so changing it changes
no address (ADR 0026); and, in a layer with VMs, `agent_bundle_sha256` (the agent bundle a VM's first boot may
run, from the installed terravixens: ADR 0059). A nested host's credentials are apply-time too:
`proxmox_api_token`, else the provider's environment (PROXMOX_VE_API_TOKEN, or PROXMOX_VE_USERNAME/PASSWORD) —
never a literal.
"""

from __future__ import annotations

from cdktf import TerraformVariable, TerraformVariableValidationConfig, Token
from constructs import Construct

from terravixens._bindings.proxmox.provider import ProxmoxProvider, ProxmoxProviderSsh, ProxmoxProviderSshNode
from terravixens.config.model import Site
from terravixens.constructs.standalone_container import StandaloneContainer, StandaloneContainerProps
from terravixens.constructs.standalone_vm import StandaloneVm, StandaloneVmProps
from terravixens.logical_ids import pin
from terravixens.stacks import providers
from terravixens.stacks.base import LayerStack
from terravixens.standalone.layout import StandaloneLayer
from terravixens.standalone.node_env import AGENT_SHA256_PATTERN, NODE_TOKEN_PATTERN, Trust

TOKENS_VARIABLE = "node_tokens"
AGENT_SHA256_VARIABLE = "agent_bundle_sha256"
API_TOKEN_VARIABLE = "proxmox_api_token"


def _spec_server(site: Site) -> str:
    if site.standalone.spec_server is None:  # the site rules refuse this; a library user may build stacks directly
        raise ValueError(
            "the site has standalone nodes but no standalone.spec_server: nodes are told where to pull "
            "their spec from at create time; add standalone.spec_server.url, e.g. "
            "https://specs.lab.internal:8443"
        )
    return site.standalone.spec_server.url


def node_tokens_variable(scope: Construct) -> TerraformVariable:
    """node -> token, sensitive, required: a plan without it fails instead of creating nodes without their token."""
    return pin(
        TerraformVariable(
            scope,
            TOKENS_VARIABLE,
            type="map(string)",
            sensitive=True,
            nullable=False,
            description="Standalone node -> the token its posture asks for (site token or its node token); nodes "
            "with a `network` posture are absent. Filled by `terravixens deploy --secrets FILE`.",
            validation=[
                TerraformVariableValidationConfig(
                    # Checked before any snippet is written: a token reaches a shell heredoc on the Proxmox host.
                    condition=f"${{alltrue([for token in values(var.{TOKENS_VARIABLE}) : "
                    f'can(regex("{NODE_TOKEN_PATTERN}", token))])}}',
                    error_message="Every token is 32 to 512 letters, digits and + / = . _ ~ - "
                    "(as in the secrets file).",
                )
            ],
        ),
        TOKENS_VARIABLE,
    )


def agent_sha256_variable(scope: Construct) -> TerraformVariable:
    """The SHA-256 of the agent bundle a VM's first boot may run (ADR 0059): an apply-time input like the tokens, so
    the synthesized JSON stays the same from one terravixens version to the next; `terravixens deploy` computes it
    from the installed package (terravixens.agent.bundle), which is what `spec serve` of that version serves."""
    return pin(
        TerraformVariable(
            scope,
            AGENT_SHA256_VARIABLE,
            type="string",
            nullable=False,
            description="SHA-256 of the agent bundle (GET /agent.pyz of `terravixens spec serve`) a VM's first boot "
            "may run. Filled by `terravixens deploy` from the installed terravixens.",
            validation=[
                TerraformVariableValidationConfig(
                    condition=f'${{can(regex("{AGENT_SHA256_PATTERN}", var.{AGENT_SHA256_VARIABLE}))}}',
                    error_message="The agent bundle's SHA-256 is 64 lower-case hex digits.",
                )
            ],
        ),
        AGENT_SHA256_VARIABLE,
    )


def nested_proxmox(scope: Construct, layer: StandaloneLayer) -> ProxmoxProvider:
    """The nested host's own API, from the topology; its SSH (snippet uploads) at the host's address."""
    host, address = layer.host.host, layer.host.address
    if host is None or address is None:
        raise ValueError(f"layer {layer.name!r} creates guests of the site's hypervisors: it has no nested host's API")
    token = pin(
        TerraformVariable(
            scope,
            API_TOKEN_VARIABLE,
            type="string",
            sensitive=True,
            nullable=True,
            description=f"API token of the nested Proxmox VE host {host} (USER@REALM!NAME=SECRET); null: "
            f"the provider's environment (PROXMOX_VE_API_TOKEN, or PROXMOX_VE_USERNAME/PASSWORD).",
        ),
        API_TOKEN_VARIABLE,
    )
    token.add_override("default", Token.null_value())  # optional: cdktf drops a None default (= required)
    return ProxmoxProvider(
        scope,
        "proxmox",
        endpoint=layer.host.endpoint,
        api_token=token.string_value,
        ssh=ProxmoxProviderSsh(node_attribute=[ProxmoxProviderSshNode(name=host, address=address)]),
    )


class StandaloneStack(LayerStack):
    """One L2 layer: a StandaloneVm or StandaloneContainer per node, keyed by the node's name."""

    def build(self) -> None:
        site, layer = self.site, self.guests
        if layer.host.host is None:
            providers.proxmox(self, site.proxmox)
        else:
            nested_proxmox(self, layer)
        spec_server = _spec_server(site)
        server = site.standalone.spec_server
        trust = Trust(server.ca_data, bool(server.allow_insecure_http)) if server else Trust()
        tokens = node_tokens_variable(self)
        agent_sha256 = agent_sha256_variable(self) if any(placed.type != "ct" for placed in layer.nodes) else None
        self.nodes: dict[str, StandaloneVm | StandaloneContainer] = {}
        for placed in layer.nodes:
            proxmox_node, datastores = layer.proxmox_node_name(site, placed), layer.datastores(site, placed)
            if placed.type == "ct":
                self.nodes[placed.name] = StandaloneContainer(
                    self,
                    placed.name,
                    StandaloneContainerProps(
                        placed=placed,
                        proxmox_node=proxmox_node,
                        datastores=datastores,
                        spec_server=spec_server,
                        tokens=tokens,
                        trust=trust,
                    ),
                )
            else:
                self.nodes[placed.name] = StandaloneVm(
                    self,
                    placed.name,
                    StandaloneVmProps(
                        placed=placed,
                        proxmox_node=proxmox_node,
                        datastores=datastores,
                        spec_server=spec_server,
                        tokens=tokens,
                        trust=trust,
                        agent_sha256=agent_sha256,
                    ),
                )

    @property
    def guests(self) -> StandaloneLayer:
        """The nodes this layer creates and the Proxmox API it creates them through."""
        if self.layer.guests is None:
            raise ValueError(
                f"layer {self.layer.name!r} is not an L2 layer: StandaloneStack builds the layers of "
                f"terravixens.layers.site_layers(site) of kind 'standalone'"
            )
        return self.layer.guests
