"""The site file's `standalone` section (L2): standalone VMs, containers and nested Proxmox hosts, and their presets.

    standalone:
      specs_dir: specs                      # where the specs live, relative to the site file (ADR 0018)
      spec_server: {url: https://specs.lab.internal:8443}
      presets: {vm-small: {cores: 2}}       # overrides of the shipped presets, or new ones
      nodes:
        nest1: {type: pve, parent: pve1, spec: nested-pve, image: …, preset: vm-large, vm_id: 3001, …}
        dns1:  {type: ct,  parent: nest1, spec: dns, template: …, vm_id: 3101, …}

Each node is keyed by its stable name, which is also its identity on the spec server. Field rules live here; rules
that need the whole site live in `site_rules/`: parents, cycles and presets in `standalone.py`, duplicates, bridges
and addresses in the rules shared with cluster nodes (`walk.machines`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from terravixens.config.fields import (
    INSECURE_HTTP,
    DnsName,
    InsecureHttpReason,
    InterfaceAddress,
    PlainAddress,
    Strict,
    VlanId,
    unused_insecure_http,
)
from terravixens.config.network import Bridge
from terravixens.config.storage import StorageId
from terravixens.inputs import shown
from terravixens.spec_transport import ca_pem, plain_http_refusal

# A Proxmox volume id: <storage>:<content>/<file>, e.g. local:import/debian-12-genericcloud-amd64.qcow2
VOLUME_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*:(iso|import|vztmpl)/[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def _volume(content: tuple[str, ...], example: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        match = VOLUME_ID.match(value)
        if not match or match.group(1) not in content:
            raise ValueError(
                f"{shown(value)} is not a Proxmox volume id of content {' or '.join(content)}: write "
                f"STORAGE:{content[0]}/FILE, e.g. {example!r}"
            )
        return value

    return check


ImageVolume = Annotated[
    str, AfterValidator(_volume(("import", "iso"), "local:import/debian-12-genericcloud-amd64.qcow2"))
]
TemplateVolume = Annotated[
    str, AfterValidator(_volume(("vztmpl",), "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"))
]


class Preset(Strict):
    """A size. Shipped presets are complete; a site's preset of the same name overrides only the fields it gives."""

    cores: int | None = Field(None, ge=1, le=512, description="vCPU cores (1-512).")
    memory_mib: int | None = Field(None, ge=128, le=4 * 1024 * 1024, description="Memory in MiB (128 to 4 TiB).")
    disk_gib: int | None = Field(None, ge=2, le=64 * 1024, description="Root disk in GiB (2 to 64 TiB).")


# Shipped defaults (ADR 0018). Chosen for Debian-class guests: xsmall is the floor for a DNS or NTP appliance
# (1 core, 1 GiB, 10 GiB), each step doubles memory, and vm-large is the smallest size that runs a nested Proxmox VE
# host with a few guests (4 cores, 8 GiB, 64 GiB). Containers use the same names: the sizes are limits there.
DEFAULT_PRESETS: dict[str, Preset] = {
    "vm-xsmall": Preset(cores=1, memory_mib=1024, disk_gib=10),
    "vm-small": Preset(cores=1, memory_mib=2048, disk_gib=20),
    "vm-medium": Preset(cores=2, memory_mib=4096, disk_gib=32),
    "vm-large": Preset(cores=4, memory_mib=8192, disk_gib=64),
    "vm-xlarge": Preset(cores=8, memory_mib=16384, disk_gib=128),
}
DEFAULT_PRESET = "vm-small"


class Interface(Strict):
    address: InterfaceAddress = Field(description="Address with prefix length, e.g. `10.20.0.11/24`.")
    gateway: PlainAddress | None = Field(None, description="Default gateway through this interface (one per node).")


class StandaloneNetworks(Strict):
    """One NIC per entry on the node's bridge: `untagged` first, then each VLAN by id (the order cloud-init sees)."""

    untagged: Interface | None = Field(None, description="The NIC on the bridge without a VLAN tag.")
    vlans: dict[VlanId, Interface] = Field(
        default_factory=dict, description="One NIC per VLAN id, tagged on the bridge."
    )

    def interfaces(self) -> list[tuple[int | None, Interface]]:
        ordered: list[tuple[int | None, Interface]] = [(None, self.untagged)] if self.untagged else []
        return ordered + sorted(self.vlans.items())


class StandaloneNode(Strict):
    type: Literal["pve", "vm", "ct", "k3s"] = Field(
        description="pve: a nested Proxmox VE host (a VM); vm: a VM; ct: an LXC container. k3s is reserved."
    )
    parent: DnsName = Field(description="A hypervisor of the site, or a standalone node of type pve.")
    spec: DnsName = Field(description="The spec the node converges to: <specs_dir>/<spec>.yaml.")
    vm_id: int = Field(ge=100, le=999_999_999, description="Proxmox VM/CT id, unique on its Proxmox cluster.")
    image: ImageVolume | None = Field(None, description="Cloud image a vm or pve node boots from (required for both).")
    template: TemplateVolume | None = Field(None, description="Container template of a ct node (required for ct).")
    unprivileged: bool | None = Field(None, description="ct only: run the container unprivileged (default true).")
    preset: DnsName = Field(DEFAULT_PRESET, description="Size preset (`vm-xsmall` … `vm-xlarge`, or the site's own).")
    cores: int | None = Field(None, ge=1, le=512, description="Overrides the preset's cores.")
    memory_mib: int | None = Field(None, ge=128, le=4 * 1024 * 1024, description="Overrides the preset's memory (MiB).")
    disk_gib: int | None = Field(None, ge=2, le=64 * 1024, description="Overrides the preset's disk (GiB).")
    storage: StorageId | None = Field(
        None,
        description="Storage of the root disk, for a guest of a hypervisor of the site: a storage of that "
        "hypervisor's `storage` (holding `images` for vm and pve, `rootdir` for ct), or its `datastores.vm`; "
        "defaults to `datastores.vm`.",
    )
    bridge: str = Field("vmbr0", description="Bridge on the parent the node's NICs attach to.")
    networks: StandaloneNetworks = Field(
        default_factory=StandaloneNetworks, description="The node's addresses on the parent's bridge and VLANs."
    )
    bridges: dict[str, Bridge] = Field(
        default_factory=dict, description="pve only: the nested host's bridges, which its children attach to."
    )
    tags: list[str] = Field(default_factory=list, description="Extra Proxmox tags (stored lowercased and sorted).")

    @field_validator("type")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value == "k3s":
            raise ValueError(
                "type 'k3s' is reserved and not supported yet: use 'vm' with a spec that installs k3s, "
                "or a Talos cluster under 'clusters'"
            )
        return value


class SpecServer(Strict):
    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    url: str = Field(description="The URL nodes fetch their spec from (written into each node's environment file).")
    ca_data: str | None = Field(
        None,
        description=(
            "Base64 of the PEM CA certificate(s) that signed the server's certificate, as kubeconfig's "
            "certificate-authority-data (`base64 -w0 ca.pem`): written into each node's environment file, and the "
            "only CAs the node trusts for its spec. Certificates only, never a key."
        ),
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str, info: ValidationInfo) -> str:
        if not re.match(r"^https?://[A-Za-z0-9.\-\[\]:]+(:\d+)?/?$", value):
            raise ValueError(f"{shown(value)} is not a spec server URL: write https://HOST[:PORT] (no path)")
        # Node tokens travel to this URL: the rule the node client applies too (terravixens.spec_transport),
        # so every node.env the stacks write is one the client accepts.
        refusal = plain_http_refusal(value, allowed=bool(info.data.get("allow_insecure_http")))
        if refusal is not None:
            raise ValueError(refusal)
        return value.rstrip("/")

    @field_validator("ca_data")
    @classmethod
    def _ca(cls, value: str | None) -> str | None:
        if value is not None:
            ca_pem(value)
        return value

    @model_validator(mode="after")
    def _reason_used(self) -> SpecServer:
        unused_insecure_http(self, "url")
        if self.ca_data is not None and self.url.startswith("http://"):
            raise ValueError(
                "ca_data is set but url is plain http: use https (the CA verifies the server's certificate)"
            )
        return self


class Standalone(Strict):
    specs_dir: str = Field(
        "specs", description="Folder of the specs (one YAML file per spec), relative to the site file."
    )
    spec_server: SpecServer | None = Field(
        None, description="Where pull-mode nodes fetch their spec (`terravixens spec serve`)."
    )
    presets: dict[DnsName, Preset] = Field(
        default_factory=dict, description="Overrides of the shipped presets, or new ones."
    )
    nodes: dict[DnsName, StandaloneNode] = Field(
        default_factory=dict, description="Standalone nodes by stable name (their identity)."
    )

    @field_validator("specs_dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith(("/", "~")) or ".." in value.split("/"):
            raise ValueError(
                f"{value!r} leaves the site's folder: give a folder relative to the site file, e.g. 'specs'"
            )
        return value

    def effective_presets(self) -> dict[str, Preset]:
        """The shipped presets with the site's overrides applied field by field, plus the site's own presets."""
        merged = dict(DEFAULT_PRESETS)
        for name, preset in self.presets.items():
            base = merged.get(name)
            given = preset.model_dump(exclude_none=True)
            merged[name] = base.model_copy(update=given) if base else preset
        return merged
