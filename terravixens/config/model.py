"""The typed site model: one YAML site file is the single source of truth for every layer.

Every model forbids unknown keys, so a typo is an error that names the key instead of a silently ignored setting.
Cross-field rules that need the whole site (unique VM ids, unique addresses, known hypervisors, pools overlapping
node addresses) live in `Site`; the per-field rules live next to the field they check. Every message says what is
wrong, with the bad value, and how to fix it; `terravixens.config.loader` adds the file and the field path.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$")
# etcd needs a majority of members: an even count adds a member without adding fault tolerance (4 tolerates one
# failure, like 3), and more than 7 members slows every write. See docs/adr/0005-synth-time-safety-rules.md.
ALLOWED_CONTROL_PLANE_COUNTS = (1, 3, 5, 7)
DEFAULT_MANAGEMENT_VLAN = 111


def dns_name(value: str) -> str:
    if not DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS-safe name: use 1-63 lowercase letters, digits and '-', starting with a letter "
            f"and not ending with '-' (e.g. {_dns_suggestion(value)!r})"
        )
    return value


def _dns_suggestion(value: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", value.lower())
    cleaned = re.sub(r"^[^a-z]+", "", cleaned)[:63].rstrip("-")
    return cleaned or "node-a"


def semver(value: str) -> str:
    if not VERSION.match(value):
        raise ValueError(f"{value!r} is not a version like v1.11.5 or 1.34.2: write MAJOR.MINOR.PATCH, optionally with a leading 'v'")
    return value if value.startswith("v") else f"v{value}"


def vlan_id(value: int) -> int:
    if not 1 <= value <= 4094:
        raise ValueError(f"VLAN id {value} is out of range: 802.1Q VLAN ids are 1-4094")
    return value


def interface_address(value: str) -> str:
    """An address with its prefix length, as Talos configures it on an interface (10.0.111.11/24)."""
    if "/" not in value:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a valid address/prefix (CIDR), e.g. 10.0.111.11/24") from None
        raise ValueError(f"{value!r} has no prefix length: write the address with its network size, e.g. {value}/24")
    try:
        ipaddress.ip_interface(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a valid address/prefix (CIDR), e.g. 10.0.111.11/24") from None
    return value


def plain_address(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a valid IP address, e.g. 10.0.0.51 (no prefix length here)") from None
    return value


def network(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"{value!r} is not a valid CIDR network ({error}); write the network address, e.g. 10.0.120.0/28") from None
    return value


DnsName = Annotated[str, AfterValidator(dns_name)]
Version = Annotated[str, AfterValidator(semver)]
VlanId = Annotated[int, AfterValidator(vlan_id)]
InterfaceAddress = Annotated[str, AfterValidator(interface_address)]
PlainAddress = Annotated[str, AfterValidator(plain_address)]
Network = Annotated[str, AfterValidator(network)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------------------------------------- state
class S3State(Strict):
    """S3-compatible state (MinIO, Ceph RGW, AWS): one key per layer, locking with a lock file in the bucket.

    Credentials come from the environment at apply time (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
    """

    endpoint: str
    bucket: str
    key_prefix: str = "terravixens"
    region: str = "us-east-1"
    use_lockfile: bool = True
    use_path_style: bool = True


class StateConfig(Strict):
    backend: Literal["local", "s3"] = "local"
    local_dir: str = Field("state", description="Folder for local state, relative to the project root.")
    s3: S3State | None = None

    @field_validator("local_dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith("/") or value.startswith("~"):
            raise ValueError(f"{value!r} is absolute: give a folder relative to the project root, e.g. 'state'")
        return value

    @model_validator(mode="after")
    def _s3_needs_settings(self) -> StateConfig:
        if self.backend == "s3" and self.s3 is None:
            raise ValueError("backend is 's3' but no 's3' settings are given: add state.s3.endpoint and state.s3.bucket")
        return self


class ProxmoxConfig(Strict):
    """The Proxmox VE API. The API token is read at apply time from PROXMOX_VE_API_TOKEN, never from this file."""

    endpoint: str
    insecure: bool = False

    @field_validator("endpoint")
    @classmethod
    def _https(cls, value: str) -> str:
        if not value.startswith("https://"):
            raise ValueError(f"{value!r} is not an https URL: the Proxmox API listens on https://HOST:8006/")
        return value


# ---------------------------------------------------------------------------------------------------------- L0
class Bridge(Strict):
    ports: list[str] = Field(default_factory=list)
    vlan_aware: bool = True
    vlans: list[VlanId] = Field(default_factory=list, description="VLANs allowed on this VLAN-aware bridge.")
    comment: str = "managed by terravixens"


class TalosImage(Strict):
    """What the Talos Image Factory builds for this hypervisor (the schematic) and in which form."""

    extensions: list[str] = Field(default_factory=lambda: ["siderolabs/qemu-guest-agent"])
    extra_kernel_args: list[str] = Field(default_factory=list)
    platform: Literal["nocloud", "metal"] = "nocloud"
    architecture: Literal["amd64", "arm64"] = "amd64"
    factory_url: str = "https://factory.talos.dev"


class Datastores(Strict):
    vm: str = "local-lvm"
    images: str = Field("local", description="Datastore with the 'import' content type, for downloaded Talos disk images.")


class ApiUser(Strict):
    """An API user, role and token for automation; the token value is an output, never a literal."""

    user_id: str = "terravixens@pve"
    role_id: str = "TerravixensProvisioner"
    token_name: str = "terravixens"
    privileges: list[str] = Field(default_factory=lambda: [
        "Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit", "SDN.Use", "Sys.Audit",
        "Sys.Modify", "VM.Allocate", "VM.Audit", "VM.Config.CDROM", "VM.Config.CPU", "VM.Config.Cloudinit",
        "VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options",
        "VM.Monitor", "VM.PowerMgmt",
    ])

    @field_validator("user_id")
    @classmethod
    def _realm(cls, value: str) -> str:
        if "@" not in value:
            raise ValueError(f"{value!r} has no realm: Proxmox user ids are NAME@REALM, e.g. terravixens@pve")
        return value


class Hypervisor(Strict):
    node_name: str = Field(description="The Proxmox node name (as in the cluster), e.g. pve1.")
    bridges: dict[str, Bridge] = Field(default_factory=dict)
    datastores: Datastores = Field(default_factory=Datastores)
    talos_image: TalosImage = Field(default_factory=TalosImage)
    api_user: ApiUser | None = None


# ---------------------------------------------------------------------------------------------------------- L1
class VlanInterface(Strict):
    address: InterfaceAddress
    gateway: PlainAddress | None = None


class RoutableAddress(Strict):
    vlan: VlanId
    address: InterfaceAddress
    gateway: PlainAddress | None = None


class NodeNetworks(Strict):
    maintenance_ip: PlainAddress | None = Field(
        None, description="Where the fresh VM answers in maintenance mode (DHCP reservation on the untagged network)."
    )
    vlans: dict[VlanId, VlanInterface] = Field(default_factory=dict)
    routable: RoutableAddress | None = None


class Taint(Strict):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Node(Strict):
    hypervisor: str
    vm_id: int = Field(ge=100, le=999_999_999)
    hostname: DnsName | None = None
    cpu: int = Field(2, ge=1, le=512)
    memory_mib: int = Field(4096, ge=1024)
    disk_gib: int = Field(32, ge=10)
    bridge: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    networks: NodeNetworks = Field(default_factory=NodeNetworks)

    @field_validator("taints")
    @classmethod
    def _one_taint_per_key(cls, value: list[Taint]) -> list[Taint]:
        keys = [taint.key for taint in value]
        duplicates = sorted({key for key in keys if keys.count(key) > 1})
        if duplicates:
            raise ValueError(f"taint key {duplicates[0]!r} appears twice: Talos nodeTaints is a map, one taint per key")
        return value


class CiliumConfig(Strict):
    chart_version: Version = "v1.18.4"
    l2_interfaces: list[str] = Field(default_factory=lambda: ["^eth[0-9]+"])
    pools: dict[DnsName, list[Network]] = Field(default_factory=dict)


class FluxConfig(Strict):
    chart_version: Version = "v2.17.1"
    url: str
    branch: str = "main"
    path: str = "./"
    interval: str = "10m"
    git_secret: str | None = Field(
        None, description="Secret in flux-system holding the git credentials (e.g. an ssh deploy key); none for public https."
    )
    sops_age_key_file: str = Field(
        "~/.config/sops/age/keys.txt", description="Read at apply time; its content never enters the synthesized JSON."
    )

    @field_validator("url")
    @classmethod
    def _git_url(cls, value: str) -> str:
        if not re.match(r"^(https://|ssh://|http://)", value):
            raise ValueError(f"{value!r} is not a git URL Flux accepts: use https://…, http://… or ssh://git@host/org/repo.git")
        return value

    @model_validator(mode="after")
    def _ssh_needs_credentials(self) -> FluxConfig:
        if self.url.startswith("ssh://") and not self.git_secret:
            raise ValueError(
                f"url {self.url!r} is ssh but git_secret is not set: Flux needs a Secret in flux-system holding the "
                f"deploy key (flux create secret git NAME --url=…); name it in git_secret"
            )
        return self


# terravixens' node patches write machine.network.hostname; Talos 1.12 configurations move it to a HostnameConfig
# document and refuse the old key. Until patches are emitted per contract, newer versions are refused here.
NEWEST_SUPPORTED_TALOS = (1, 11)


def supported_talos(value: str) -> str:
    major, minor = (int(part) for part in VERSION.match(value).groups()[:2])
    if (major, minor) > NEWEST_SUPPORTED_TALOS:
        raise ValueError(
            f"Talos {value} is newer than terravixens supports (up to v1.11.x): its configuration moves the hostname "
            f"to a HostnameConfig document that terravixens does not write yet; stay on v1.11.x"
        )
    return value


class Cluster(Strict):
    endpoint_vip: PlainAddress = Field(description="The shared Kubernetes API address (Talos VIP on the control planes).")
    talos_version: Annotated[Version, AfterValidator(supported_talos)]
    kubernetes_version: Version
    install_disk: str = "/dev/sda"
    management_vlan: VlanId = DEFAULT_MANAGEMENT_VLAN
    bridge: str = "vmbr0"
    bootstrap_node: DnsName | None = Field(
        None, description="The control plane that bootstraps etcd, once. Defaults to the first control plane by name."
    )
    control_planes: dict[DnsName, Node]
    workers: dict[DnsName, Node] = Field(default_factory=dict)
    cilium: CiliumConfig = Field(default_factory=CiliumConfig)
    flux: FluxConfig | None = None

    @field_validator("control_planes")
    @classmethod
    def _odd_quorum(cls, value: dict[str, Node]) -> dict[str, Node]:
        if len(value) not in ALLOWED_CONTROL_PLANE_COUNTS:
            raise ValueError(
                f"{len(value)} control planes ({', '.join(sorted(value)) or 'none'}): use 1, 3, 5 or 7. etcd needs a "
                f"majority of members, so an even count adds no fault tolerance (4 survives one failure, like 3) "
                f"and more than 7 slows every write"
            )
        return value

    @model_validator(mode="after")
    def _roles_and_bootstrap(self) -> Cluster:
        both = sorted(set(self.control_planes) & set(self.workers))
        if both:
            raise ValueError(
                f"node {both[0]!r} is both a control plane and a worker: keep it in one map (moving it from workers "
                f"to control_planes keeps its VM)"
            )
        if self.bootstrap_node is not None and self.bootstrap_node not in self.control_planes:
            raise ValueError(
                f"bootstrap_node {self.bootstrap_node!r} is not a control plane: name one of "
                f"{', '.join(sorted(self.control_planes))} (bootstrap runs once; changing it later does nothing)"
            )
        return self

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_node or sorted(self.control_planes)[0]

    def nodes(self) -> dict[str, tuple[str, Node]]:
        """Every node by its stable name, with its role. Sorted by name: never by position in the file."""
        merged = {name: ("controlplane", node) for name, node in self.control_planes.items()}
        merged.update({name: ("worker", node) for name, node in self.workers.items()})
        return dict(sorted(merged.items()))


class Site(Strict):
    site: DnsName
    state: StateConfig = Field(default_factory=StateConfig)
    proxmox: ProxmoxConfig
    hypervisors: dict[DnsName, Hypervisor]
    clusters: dict[DnsName, Cluster] = Field(default_factory=dict)
    standalone: Standalone = Field(default_factory=lambda: Standalone())

    @model_validator(mode="after")
    def _cross_references(self) -> Site:
        from terravixens.config import site_rules

        site_rules.check(self)
        return self


# At the end: the standalone section (config/standalone.py) builds on the field types above.
from terravixens.config.standalone import Standalone  # noqa: E402

Site.model_rebuild()
