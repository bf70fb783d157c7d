"""Provider blocks. Credentials are never configured here: each provider reads them at apply time."""

from __future__ import annotations

from constructs import Construct

from terravixens._bindings.proxmox.provider import ProxmoxProvider
from terravixens._bindings.talos.provider import TalosProvider
from terravixens.config.model import ProxmoxConfig


def proxmox(scope: Construct, config: ProxmoxConfig) -> ProxmoxProvider:
    """The API token comes from PROXMOX_VE_API_TOKEN (user@realm!token=secret) in the environment at apply time."""
    return ProxmoxProvider(scope, "proxmox", endpoint=config.endpoint, insecure=config.insecure)


def talos(scope: Construct) -> TalosProvider:
    return TalosProvider(scope, "talos")
