"""NodeEnvSnippet: the snippet file on a guest's Proxmox host that carries the guest's node.env (ADR 0026)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cdktf import Fn, TerraformVariable
from constructs import Construct

from terravixens._bindings.proxmox.virtual_environment_file import (
    VirtualEnvironmentFile,
    VirtualEnvironmentFileSourceRaw,
)
from terravixens.logical_ids import pin, standalone_id
from terravixens.standalone.node_env import (
    HOOKSCRIPT_FORMAT,
    NO_TRUST,
    Trust,
    cloud_config_format,
    env_format,
    snippet_name,
)

Carrier = Literal["cloud-init", "hookscript"]


@dataclass(frozen=True)
class NodeEnvSnippetProps:
    """node: the standalone node's stable name (its identity); proxmox_node / datastore: where the snippet lives
    (a datastore with the `snippets` content type); tokens: the stack's sensitive `node_tokens` variable;
    trust: the site's private CA and plain-http allowance, written after the token (node_env.Trust);
    agent_sha256: the stack's `agent_bundle_sha256` variable, which a cloud-init carrier pins in node.env for its
    first boot (ADR 0059; required for it, unused by a hookscript)."""

    node: str
    proxmox_node: str
    datastore: str
    spec_server: str
    tokens: TerraformVariable
    carrier: Carrier = "cloud-init"
    trust: Trust = NO_TRUST
    agent_sha256: TerraformVariable | None = None


class NodeEnvSnippet(Construct):
    """A `snippets` file named after the node (`terravixens-<node>.yaml` / `.sh`), so its volume id is a constant.

    The guest refers to that id as a literal string, never as a reference to this resource: a new token (rotation,
    or a posture that now asks for one) replaces this file only, and the guest's replace-forcing attribute
    (`initialization.vendor_data_file_id`) does not even become unknown. The file is 0600 (cloud-init vendor data:
    read by Proxmox as root) or 0700 (a hookscript must be executable).
    """

    def __init__(self, scope: Construct, id: str, props: NodeEnvSnippetProps):
        super().__init__(scope, id)
        self.props = props
        self.file_name = snippet_name(props.node, props.carrier)
        # A CA certificate written on purpose (public: rule TV006 lets exactly this value through, nothing else).
        self.public_ca = props.trust.ca_data
        self.volume_id = f"{props.datastore}:snippets/{self.file_name}"
        # Literal text goes through Fn.raw_string: cdktf then escapes quotes, newlines and template sequences.
        # An empty default must be a raw string: with "" cdktf drops the default and writes var.node_tokens.<node>,
        # which fails for a node without a token.
        token = Fn.lookup(props.tokens.value, props.node, Fn.raw_string(""))
        arguments = [Fn.raw_string(props.spec_server), Fn.raw_string(props.node), token]
        pinned = props.carrier == "cloud-init"
        if pinned:
            if props.agent_sha256 is None:
                raise ValueError(
                    f"standalone node {props.node!r}: a cloud-init node.env pins the agent bundle its first boot "
                    f"runs; give NodeEnvSnippetProps.agent_sha256 (the stack's agent_bundle_sha256 variable)"
                )
            arguments.append(props.agent_sha256.string_value)
        env = Fn.format(Fn.raw_string(env_format(props.trust.lines(), pinned=pinned)), arguments)
        if pinned:
            data, mode = Fn.format(Fn.raw_string(cloud_config_format()), [Fn.jsonencode(env)]), "0600"
        else:
            data, mode = Fn.format(Fn.raw_string(HOOKSCRIPT_FORMAT), [env]), "0700"
        self.file = pin(
            VirtualEnvironmentFile(
                self,
                "file",
                node_name=props.proxmox_node,
                datastore_id=props.datastore,
                content_type="snippets",
                file_mode=mode,
                source_raw=VirtualEnvironmentFileSourceRaw(data=data, file_name=self.file_name),
            ),
            standalone_id(props.node, "node_env"),
        )
