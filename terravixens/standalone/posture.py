"""A posture: how far a standalone node is trusted, and so how it authenticates to the spec server (ADR 0019).

    auth: network      no token: the network boundary is the trust (a lab, a host-only bridge)
    auth: site_token   one token shared by the site's nodes: any node (or operator) holding it reads any spec
    auth: node_token   one token per node identity: a node reads only its own spec

The shipped postures are `dev`, `local`, `stage` and `prod`; `<specs_dir>/postures/<name>.yaml`
overrides one of them or adds another.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from terravixens.config.model import Strict

AuthMethod = Literal["network", "site_token", "node_token"]
MaintenanceStop = Literal["shutdown", "shutdown_then_stop"]


class SshPolicy(Strict):
    password_authentication: bool = False
    permit_root_login: bool = False


class Posture(Strict):
    schema_version: Literal[1]
    auth: AuthMethod
    description: str = Field("", max_length=500)
    ssh: SshPolicy = Field(default_factory=SshPolicy)
    automatic_updates: bool = Field(True, description="Unattended security updates on the node.")
    maintenance_stop: MaintenanceStop = Field(
        "shutdown",
        description="How `terravixens maintain` stops the node when its hypervisor goes into maintenance (ADR 0055): "
        "`shutdown`, a clean shutdown through Proxmox (a node still running at its end stops the run: nothing is "
        "forced), or `shutdown_then_stop`, then a hard stop (a node whose state does not matter).",
    )


SHIPPED_POSTURES: dict[str, Posture] = {
    "dev": Posture(
        schema_version=1,
        auth="network",
        automatic_updates=False,
        maintenance_stop="shutdown_then_stop",
        description="Development: the network boundary is the trust; no token.",
    ),
    "local": Posture(
        schema_version=1,
        auth="network",
        automatic_updates=False,
        maintenance_stop="shutdown_then_stop",
        description="One machine or a host-only bridge: no token.",
    ),
    "stage": Posture(schema_version=1, auth="site_token", description="Staging: one token shared by the site's nodes."),
    "prod": Posture(
        schema_version=1,
        auth="node_token",
        description="Production: one token per node; a node reads only its own spec.",
    ),
}
