"""The typed site model: one YAML site file is the single source of truth for every layer.

Every model forbids unknown keys, so a typo is an error that names the key instead of a silently ignored setting.
Every string of every model (keys of maps included) is site text: it may not hold a Terraform template sequence
(`${`, `%{`) or a control character, checked once for all fields on the base class (docs/adr/0016).
Per-field rules live next to the field they check; rules that need the whole site (references, uniqueness,
subnets) are `terravixens.config.site_rules`, run by the loader once the model is valid (docs/adr/0017).
Every message says what is wrong, with the bad value (`terravixens.inputs.shown`: truncated, never a secret), and
how to fix it; the loader adds the file, the line and the field path.

Every field has a description: docs/site-file.md is generated from them (terravixens.config.reference).
"""
from __future__ import annotations

import functools
import ipaddress
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator,
)
from pydantic_core import PydanticCustomError

from terravixens.inputs import looks_secret, shown
from terravixens.roles import Role
from terravixens.talos import versions

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$")
SHA256 = re.compile(r"^[0-9A-Fa-f]{64}$")
MAC = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}$")  # one separator throughout
# etcd needs a majority of members: an even count adds a member without adding fault tolerance (4 tolerates one
# failure, like 3), and more than 7 members slows every write. See docs/adr/0005-synth-time-safety-rules.md.
ALLOWED_CONTROL_PLANE_COUNTS = (1, 3, 5, 7)
DEFAULT_MANAGEMENT_VLAN = 111

# Upper bounds of a VM (docs/adr/0017). Proxmox starts no VM with more vCPUs than its host has threads; 512 is above
# the largest two-socket hosts of today. qemu-server caps a VM's memory at 4 TiB ($MAX_MEM = 4194304 MiB). A Talos
# system disk holds the OS and /var: 16 TiB is the largest file on ext4, the file system under Proxmox' `local`.
MAX_CORES = 512
MAX_MEMORY_MIB = 4_194_304
MAX_DISK_GIB = 16_384

# Terraform evaluates these in every JSON string it reads: `${expr}` interpolates, `%{directive}` loops and branches.
TEMPLATE_SEQUENCE = re.compile(r"[$%]\{")
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


# Addresses are parsed by the field validators and again by every site rule: parse each text once (the ipaddress
# module takes ~20 µs per interface; a 1,000-node site holds thousands).
parse_interface = functools.lru_cache(maxsize=65_536)(ipaddress.ip_interface)
parse_address = functools.lru_cache(maxsize=65_536)(ipaddress.ip_address)


# ---------------------------------------------------------------------------------------------------------- text
def text_problem(value: object, field: str, inside: tuple = ()) -> tuple[tuple, str] | None:
    """The first string in `value` (a string, or strings nested in lists and maps, keys included) that is not
    site text, as (its path under the field, what is wrong with it); None when all is well."""
    if isinstance(value, str):
        found = TEMPLATE_SEQUENCE.search(value) or CONTROL_CHARACTER.search(value)
        if found is None:
            return None
        secret = looks_secret(field) or any(looks_secret(part) for part in inside)
        what = "(value hidden: the key looks like it holds a secret)" if secret else shown(value)
        if found.group().endswith("{"):
            return inside, (f"{what} holds {found.group()!r}: Terraform would evaluate it as a template (reading "
                            f"files or the environment at apply time), so terravixens refuses '${{' and '%{{' in site "
                            f"text (docs/adr/0016-no-templates-from-site-text.md); remove it")
        return inside, f"{what} holds a control character ({found.group()!r}): remove it"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        problem = (text_problem(key, field, (*inside, key)) if isinstance(value, dict) else None) \
            or text_problem(item, field, (*inside, key))
        if problem:
            return problem
    return None


class Strict(BaseModel):
    """The base of every site model: unknown keys refused, frozen, and every string checked as site text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _site_text(cls, value: object, info: ValidationInfo) -> object:
        # Nested models checked their own fields already; this sees strings, and strings in lists and maps.
        if isinstance(value, (str, list, tuple, dict)):
            problem = text_problem(value, info.field_name or "")
            if problem:
                inside, message = problem
                where = f"at {'.'.join(map(str, inside))}: " if inside else ""
                # The loader reads `inside` to name the exact key or item (and its line); others read `where`.
                raise PydanticCustomError("site_text", f"{where}{message}", {"inside": inside, "bare": message})
        return value


# ---------------------------------------------------------------------------------------------------------- fields
def dns_name(value: str) -> str:
    if not DNS_LABEL.match(value):
        raise ValueError(
            f"{shown(value)} is not a DNS-safe name: use 1-63 lowercase letters, digits and '-', starting with a "
            f"letter and not ending with '-' (e.g. {_dns_suggestion(value)!r})"
        )
    return value


def _dns_suggestion(value: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", value.lower())
    cleaned = re.sub(r"^[^a-z]+", "", cleaned)[:63].rstrip("-")
    return cleaned or "node-a"


def semver(value: str) -> str:
    if not VERSION.match(value):
        raise ValueError(f"{shown(value)} is not a version like v1.11.5 or 1.34.2: write MAJOR.MINOR.PATCH, "
                         f"optionally with a leading 'v'")
    return value if value.startswith("v") else f"v{value}"


def vlan_id(value: int) -> int:
    if not 1 <= value <= 4094:
        raise ValueError(f"VLAN id {shown(value)} is out of range: 802.1Q VLAN ids are 1-4094")
    return value


def interface_address(value: str) -> str:
    """An address with its prefix length, as Talos configures it on an interface (10.0.111.11/24)."""
    if "/" not in value:
        try:
            parse_address(value)
        except ValueError:
            raise ValueError(f"{shown(value)} is not a valid address/prefix (CIDR), e.g. 10.0.111.11/24") from None
        raise ValueError(f"{shown(value)} has no prefix length: write the address with its network size, "
                         f"e.g. {value}/24")
    try:
        parse_interface(value)
    except ValueError:
        raise ValueError(f"{shown(value)} is not a valid address/prefix (CIDR), e.g. 10.0.111.11/24") from None
    return value


def plain_address(value: str) -> str:
    try:
        parse_address(value)
    except ValueError:
        raise ValueError(f"{shown(value)} is not a valid IP address, e.g. 10.0.0.51 (no prefix length here)") from None
    return value


def network(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"{shown(value)} is not a valid CIDR network ({shown(str(error), 60).strip(chr(39))}); "
                         f"write the network address, e.g. 10.0.120.0/28") from None
    return value


def unicast_mac(value: str) -> str:
    """A unicast MAC, normalized to what Proxmox writes (BC:24:11:4F:2A:01): bpg/proxmox compares the text, so
    another spelling of the same MAC would show a change on every plan (docs/adr/0024)."""
    if not MAC.match(value):
        raise ValueError(f"{shown(value)} is not a MAC address: write six hexadecimal pairs separated by ':', "
                         f"e.g. 02:00:0A:0B:01:0B (locally administered) or BC:24:11:4F:2A:01 (Proxmox' own prefix)")
    normalized = value.replace("-", ":").upper()
    if int(normalized[:2], 16) & 1:
        raise ValueError(f"{shown(value)} is a multicast address (the first byte is odd): a network card needs a "
                         f"unicast MAC, e.g. 02:00:0A:0B:01:0B")
    if normalized == "00:00:00:00:00:00":
        raise ValueError(f"{shown(value)} is the null MAC: give the VM its own, e.g. 02:00:0A:0B:01:0B")
    return normalized


def at_most(limit: int, unit: str, why: str):
    def check(value: int) -> int:
        if value > limit:
            raise ValueError(f"{shown(value)} {unit} is more than {limit:,} {unit}: {why}")
        return value
    return check


def safe_relative_path(value: str) -> str:
    """A folder under the project root: nothing that climbs out of it or depends on who runs the command."""
    parts = value.replace("\\", "/").split("/")
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{shown(value)} is absolute: give a folder relative to the project root, e.g. 'state'")
    if value.startswith("~"):
        raise ValueError(f"{shown(value)} starts with '~' (a home folder): give a folder relative to the project "
                         f"root, e.g. 'state'")
    if ".." in parts:
        raise ValueError(f"{shown(value)} climbs out of the project root with '..': give a folder inside it, "
                         f"e.g. 'state'")
    if not value.strip() or all(part in ("", ".") for part in parts):
        raise ValueError(f"{shown(value)} names no folder: give one relative to the project root, e.g. 'state'")
    return value


def insecure_http_reason(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("is empty: say why plain http is acceptable here (e.g. 'MinIO on the storage VLAN, no "
                         "TLS'), or remove allow_insecure_http and use https")
    return value


def checked_url(value: str, info: ValidationInfo, *, others: tuple[str, ...] = (), example: str) -> str:
    """An https URL (or one of `others`), or http when the model's allow_insecure_http says why."""
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    schemes = ("https", "http", *others)
    if parts is None or parts.scheme not in schemes or not host:
        raise ValueError(f"{shown(value)} is not a URL like {example}")
    if parts.scheme == "http" and not info.data.get("allow_insecure_http"):
        raise ValueError(
            f"{shown(value)} is plain http: credentials and content would cross the network unencrypted and "
            f"unauthenticated; use https ({example}), or keep http and say why next to it in allow_insecure_http")
    return value


def unused_insecure_http(model: BaseModel, url_field: str) -> None:
    if model.allow_insecure_http is not None and not getattr(model, url_field).startswith("http://"):
        raise ValueError(f"allow_insecure_http is set but {url_field} is not an http:// URL: remove "
                         f"allow_insecure_http (it only permits plain http)")


DnsName = Annotated[str, AfterValidator(dns_name)]
Version = Annotated[str, AfterValidator(semver)]
VlanId = Annotated[int, AfterValidator(vlan_id)]
InterfaceAddress = Annotated[str, AfterValidator(interface_address)]
PlainAddress = Annotated[str, AfterValidator(plain_address)]
Network = Annotated[str, AfterValidator(network)]
InsecureHttpReason = Annotated[str | None, AfterValidator(insecure_http_reason)]

INSECURE_HTTP = ("Why plain http is acceptable for the URL next to it (a non-empty reason); without it, http URLs "
                 "are refused.")


# ---------------------------------------------------------------------------------------------------------- state
class S3State(Strict):
    """S3-compatible state (MinIO, Ceph RGW, AWS): one key per layer, locking with a lock file in the bucket.

    Credentials come from the environment at apply time (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
    """

    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    endpoint: str = Field(description="S3-compatible endpoint, e.g. `https://minio.lab.internal:9000`.")
    bucket: str = Field(description="Bucket holding one state key per layer.")
    key_prefix: str = Field("terravixens", description="Keys are `<key_prefix>/<site>/<stack>.tfstate`.")
    region: str = Field("us-east-1", description="Region (MinIO accepts any).")
    use_lockfile: bool = Field(True, description="S3-native state locking (Terraform >= 1.10).")
    use_path_style: bool = Field(True, description="Path-style URLs (MinIO).")
    # State holds every secret of a layer: encrypted at rest by default (SSE-S3, or SSE-KMS with kms_key_id).
    encrypt: bool = Field(True, description="Server-side encryption of the state objects (SSE-S3, or SSE-KMS with `kms_key_id`).")
    kms_key_id: str | None = Field(None, description="KMS key for SSE-KMS; needs `encrypt: true`.")

    @field_validator("endpoint")
    @classmethod
    def _https(cls, value: str, info: ValidationInfo) -> str:
        return checked_url(value, info, example="https://minio.lab.internal:9000")

    @model_validator(mode="after")
    def _reason_used(self) -> S3State:
        unused_insecure_http(self, "endpoint")
        if self.kms_key_id is not None and not self.encrypt:
            raise ValueError("kms_key_id is set but encrypt is false: set encrypt: true to use the KMS key")
        return self


class StateConfig(Strict):
    backend: Literal["local", "s3"] = Field("local", description="`local` or `s3`.")
    local_dir: Annotated[str, AfterValidator(safe_relative_path)] = Field(
        "state", description="Folder for local state, relative to the project root (no `..`, no `~`, not "
                             "absolute); state files are `<local_dir>/<stack>.tfstate`.")
    s3: S3State | None = Field(None, description="S3 settings; required when `backend` is `s3`.")

    @model_validator(mode="after")
    def _s3_needs_settings(self) -> StateConfig:
        if self.backend == "s3" and self.s3 is None:
            raise ValueError("backend is 's3' but no 's3' settings are given: add state.s3.endpoint and state.s3.bucket")
        return self


class ProxmoxConfig(Strict):
    """The Proxmox VE API. The API token is read at apply time from PROXMOX_VE_API_TOKEN, never from this file."""

    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    endpoint: str = Field(description="The Proxmox VE API, e.g. `https://pve1.lab.internal:8006/`.")
    insecure: bool = Field(False, description="Skip TLS certificate verification (self-signed lab certificates).")

    @field_validator("endpoint")
    @classmethod
    def _https(cls, value: str, info: ValidationInfo) -> str:
        return checked_url(value, info, example="https://HOST:8006/")

    @model_validator(mode="after")
    def _reason_used(self) -> ProxmoxConfig:
        unused_insecure_http(self, "endpoint")
        return self


# ---------------------------------------------------------------------------------------------------------- L0
class Bridge(Strict):
    ports: list[str] = Field(default_factory=list, description="Physical ports of the bridge.")
    vlan_aware: bool = Field(True, description="VLAN-aware bridge (VM NICs are trunks; VLANs are configured in Talos).")
    vlans: list[VlanId] = Field(default_factory=list, description="VLANs allowed on this VLAN-aware bridge (1-4094); "
                                                                  "node VLANs must be in it when set.")
    comment: str = Field("managed by terravixens", description="Comment Proxmox shows for the bridge.")


class TalosImage(Strict):
    """What the Talos Image Factory builds for this hypervisor (the schematic) and in which form."""

    extensions: list[str] = Field(
        default_factory=lambda: ["siderolabs/qemu-guest-agent"],
        description="Image Factory system extensions (the schematic; its id is computed locally — a schematic other "
                    "than the default must be registered once with the factory: `curl -X POST --data-binary "
                    "@schematic.yaml https://factory.talos.dev/schematics`).")
    extra_kernel_args: list[str] = Field(default_factory=list, description="Extra kernel arguments of the schematic.")
    platform: Literal["nocloud", "metal"] = Field("nocloud", description="`nocloud` or `metal`.")
    architecture: Literal["amd64", "arm64"] = Field("amd64", description="`amd64` or `arm64`.")
    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    factory_url: str = Field("https://factory.talos.dev",
                             description="The Image Factory, `https://HOST[:PORT]` without a path.")
    sha256: dict[str, str] = Field(
        default_factory=dict,
        description="Talos version (`v1.11.5`) -> SHA-256 of this schematic's disk image for it, 64 hex digits: "
                    "Proxmox checks the download against it. The public Image Factory publishes no checksum; an Enterprise "
                    "Image Factory serves one at the image URL + `.sha256`, or take it once from a download you "
                    "trust (`curl -fsSL URL | sha256sum`). A version without one is downloaded over verified TLS "
                    "only (ADR 0028). Adding or changing one downloads the image again; VMs keep the disk they "
                    "imported.")

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, value: dict[str, str]) -> dict[str, str]:
        for version, digest in value.items():
            if not isinstance(version, str) or not re.fullmatch(r"v\d+\.\d+\.\d+", version):
                raise ValueError(f"{shown(version)} is not a Talos version like v1.11.5: write it exactly as "
                                 f"talos_version is written, with the leading 'v'")
            if not isinstance(digest, str) or not SHA256.match(digest):
                raise ValueError(f"the checksum of {version}, {shown(digest)}, is not a SHA-256: give its 64 "
                                 f"hexadecimal digits, as `sha256sum` prints them (no `sha256:` prefix)")
        return {version: digest.lower() for version, digest in value.items()}

    @field_validator("factory_url")
    @classmethod
    def _factory(cls, value: str, info: ValidationInfo) -> str:
        checked_url(value, info, example="https://factory.talos.dev")
        if urlsplit(value).path or urlsplit(value).query or urlsplit(value).fragment:
            raise ValueError(f"{shown(value)} has a path: give the factory's scheme and host only, e.g. "
                             f"https://factory.talos.dev (images and installers are found under it)")
        return value

    @model_validator(mode="after")
    def _reason_used(self) -> TalosImage:
        unused_insecure_http(self, "factory_url")
        return self


class Datastores(Strict):
    vm: str = Field("local-lvm", description="Datastore of the VM disks.")
    images: str = Field("local", description="Datastore with the `import` content type, for downloaded Talos disk "
                                             "images.")


class ApiUser(Strict):
    """An API user, role and token for automation; the token value is an output, never a literal."""

    user_id: str = Field("terravixens@pve", description="The user, `NAME@REALM`.")
    role_id: str = Field("TerravixensProvisioner", description="The role created for the user, holding `privileges`.")
    token_name: str = Field("terravixens", description="Name of the API token; its value is a sensitive output of "
                                                       "the hypervisors stack.")
    privileges: list[str] = Field(default_factory=lambda: [
        "Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit", "SDN.Use", "Sys.Audit",
        "Sys.Modify", "VM.Allocate", "VM.Audit", "VM.Config.CDROM", "VM.Config.CPU", "VM.Config.Cloudinit",
        "VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options",
        "VM.Monitor", "VM.PowerMgmt",
    ], description="Proxmox privileges of the role (default: what terravixens needs to manage VMs and images).")

    @field_validator("user_id")
    @classmethod
    def _realm(cls, value: str) -> str:
        if "@" not in value:
            raise ValueError(f"{shown(value)} has no realm: Proxmox user ids are NAME@REALM, e.g. terravixens@pve")
        return value


class Hypervisor(Strict):
    node_name: str = Field(description="The Proxmox node name (as in the cluster), e.g. `pve1`.")
    bridges: dict[str, Bridge] = Field(default_factory=dict, description="Bridges by name, e.g. `vmbr1`.")
    datastores: Datastores = Field(default_factory=Datastores, description="Where disks and images live.")
    talos_image: TalosImage = Field(default_factory=TalosImage, description="The Talos image VMs on it boot from.")
    api_user: ApiUser | None = Field(
        None, description="Create a role, user and API token for automation (the token is a sensitive output). Users "
                          "and roles are Proxmox-cluster-wide: declare it on one hypervisor per Proxmox cluster.")


# ---------------------------------------------------------------------------------------------------------- L1
class VlanInterface(Strict):
    address: InterfaceAddress = Field(description="Address with prefix, e.g. `10.11.1.11/24`.")
    gateway: PlainAddress | None = Field(None, description="Default gateway on this VLAN, inside `address`' subnet.")


class RoutableAddress(Strict):
    vlan: VlanId = Field(description="The VLAN of the routable address.")
    address: InterfaceAddress = Field(description="Address with prefix, e.g. `192.0.2.11/24`.")
    gateway: PlainAddress | None = Field(None, description="Default gateway, inside `address`' subnet.")


class NodeNetworks(Strict):
    maintenance_ip: PlainAddress | None = Field(
        None, description="Where the fresh VM answers in maintenance mode (DHCP reservation on the untagged network)."
    )
    vlans: dict[VlanId, VlanInterface] = Field(
        default_factory=dict, description="One interface per VLAN id, e.g. `111: {address: 10.11.1.11/24, gateway: "
                                          "10.11.1.1}`.")
    routable: RoutableAddress | None = Field(None, description="The preferred management address, `{vlan, address, "
                                                               "gateway}`.")


class Taint(Strict):
    key: str = Field(description="Taint key.")
    value: str = Field("", description="Taint value (may be empty).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field("NoSchedule", description="Taint effect.")


class Node(Strict):
    hypervisor: str = Field(description="A key of `hypervisors`: where the VM runs (a new one migrates the VM).")
    vm_id: int = Field(ge=100, le=999_999_999, description="Proxmox VM id, unique in the site (a new one replaces "
                                                           "the VM).")
    hostname: DnsName | None = Field(None, description="Hostname and VM name; defaults to the node's key. Unique in "
                                                       "the cluster, and VM names unique per hypervisor.")
    cpu: Annotated[int, AfterValidator(at_most(
        MAX_CORES, "cores", "Proxmox starts no VM with more vCPUs than its host has threads; give fewer cores"))] = Field(
        2, ge=1, description=f"vCPU cores, 1-{MAX_CORES}.")
    memory_mib: Annotated[int, AfterValidator(at_most(
        MAX_MEMORY_MIB, "MiB", "Proxmox gives a VM at most 4 TiB; write the memory in MiB, e.g. 16384 for 16 GiB"))] = Field(
        4096, ge=1024, description=f"Memory in MiB, 1024-{MAX_MEMORY_MIB} (4 TiB, Proxmox' maximum).")
    disk_gib: Annotated[int, AfterValidator(at_most(
        MAX_DISK_GIB, "GiB", "a Talos system disk holds the OS and /var; write the size in GiB, e.g. 100"))] = Field(
        32, ge=10, description=f"System disk in GiB, 10-{MAX_DISK_GIB} (16 TiB).")
    bridge: str | None = Field(None, description="Bridge of the VM NIC; defaults to the cluster's `bridge`.")
    mac_address: Annotated[str | None, AfterValidator(unicast_mac)] = Field(
        None, description="MAC of the VM NIC, e.g. `02:00:0A:0B:01:0B` (unicast; locally administered or a vendor's, "
                          "e.g. Proxmox' `BC:24:11`), stored uppercase with ':' as Proxmox writes it. The maintenance "
                          "IP's DHCP reservation can then exist before the VM and outlive a VM replacement. Unique in "
                          "the site; a change re-plugs the NIC in place (no new VM); removing it keeps the VM's "
                          "current MAC (ADR 0024).")
    labels: dict[str, str] = Field(default_factory=dict, description="Kubernetes node labels.")
    taints: list[Taint] = Field(default_factory=list, description="Kubernetes node taints, one per key.")
    tags: list[str] = Field(default_factory=list, description="Extra Proxmox tags (stored lowercased and sorted).")
    networks: NodeNetworks = Field(default_factory=NodeNetworks, description="The node's addresses.")

    @field_validator("taints")
    @classmethod
    def _one_taint_per_key(cls, value: list[Taint]) -> list[Taint]:
        keys = [taint.key for taint in value]
        duplicates = sorted({key for key in keys if keys.count(key) > 1})
        if duplicates:
            raise ValueError(f"taint key {shown(duplicates[0])} appears twice: Talos nodeTaints is a map, one taint "
                             f"per key")
        return value


class CiliumConfig(Strict):
    chart_version: Version = Field("v1.18.4", description="Cilium chart version.")
    l2_interfaces: list[str] = Field(default_factory=lambda: ["^eth[0-9]+"],
                                     description="Interfaces (regular expressions) that answer ARP for LoadBalancer IPs.")
    pools: dict[DnsName, list[Network]] = Field(
        default_factory=dict, description="LoadBalancer IP pools by name (CIDRs); may not contain node addresses or "
                                          "overlap.")


class FluxConfig(Strict):
    chart_version: Version = Field("v2.17.1", description="fluxcd-community `flux2` chart version.")
    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    url: str = Field(description="Git URL: `https://…` or `ssh://git@host/org/repo.git`.")
    branch: str = Field("main", description="Branch Flux follows.")
    path: str = Field("./", description="Path in the repository Flux applies.")
    interval: str = Field("10m", description="How often Flux looks for changes.")
    git_secret: str | None = Field(
        None, description="Secret in flux-system holding the git credentials (e.g. an ssh deploy key), created "
                          "outside terravixens; required for `ssh://` URLs, none for public https."
    )
    sops_age_key_file: str = Field(
        "~/.config/sops/age/keys.txt", description="Read at apply time into the `sops-age` secret; its content never "
                                                   "enters the synthesized JSON."
    )
    sops_age_key_revision: int = Field(
        1, ge=1, description="Bump after rotating the key: the secret is written through a write-only attribute "
                             "(kept out of state and plans), so Terraform re-sends it only when this number changes."
    )

    @field_validator("url")
    @classmethod
    def _git_url(cls, value: str, info: ValidationInfo) -> str:
        if not re.match(r"^(https://|ssh://|http://)", value):
            raise ValueError(f"{shown(value)} is not a git URL Flux accepts: use https://… or "
                             f"ssh://git@host/org/repo.git")
        return checked_url(value, info, others=("ssh",), example="https://git.example.org/org/repo.git")

    @model_validator(mode="after")
    def _ssh_needs_credentials(self) -> FluxConfig:
        if self.url.startswith("ssh://") and not self.git_secret:
            raise ValueError(
                f"url {shown(self.url)} is ssh but git_secret is not set: Flux needs a Secret in flux-system holding "
                f"the deploy key (flux create secret git NAME --url=…); name it in git_secret"
            )
        unused_insecure_http(self, "url")
        return self


NEWEST_SUPPORTED_TALOS = versions.NEWEST_SUPPORTED_TALOS


def supported_talos(value: str) -> str:
    """A Talos version terravixens writes configurations for (docs/adr/0023)."""
    found = versions.minor_of(value)
    if found > versions.NEWEST_SUPPORTED_TALOS:
        raise ValueError(
            f"Talos {shown(value)} is newer than terravixens supports (up to "
            f"{versions.text(versions.NEWEST_SUPPORTED_TALOS)}.x): its configuration documents and Kubernetes range "
            f"are not checked yet; stay on {versions.text(versions.NEWEST_SUPPORTED_TALOS)}.x")
    if found < versions.OLDEST_SUPPORTED_TALOS:
        raise ValueError(
            f"Talos {shown(value)} is older than terravixens supports ({versions.supported_range()}): upgrade the "
            f"cluster to {versions.text(versions.OLDEST_SUPPORTED_TALOS)}.x with talosctl first")
    return value


def contract_version(value: str) -> str:
    """`v1.11` (also written 1.11 or v1.11.5): only the minor names a contract."""
    try:
        found = versions.minor_of(value)
    except ValueError:
        raise ValueError(f"{shown(value)} is not a configuration contract like v1.11: write the Talos minor the "
                         f"machine configurations are generated for") from None
    if not versions.OLDEST_SUPPORTED_TALOS <= found <= versions.NEWEST_SUPPORTED_TALOS:
        raise ValueError(f"contract {shown(value)} is not one terravixens writes ({versions.supported_range()}): use "
                         f"one of {', '.join(versions.text(minor) for minor in versions.KUBERNETES)}")
    return versions.text(found)


class Cluster(Strict):
    endpoint_vip: PlainAddress = Field(
        description="The shared Kubernetes API address: a Talos VIP on the control planes' management VLAN, inside "
                    "their subnet on it.")
    talos_version: Annotated[Version, AfterValidator(supported_talos)] = Field(
        description="What the nodes run (images, installer): e.g. `v1.13.0` (`1.13.0` is accepted); v1.11.x to "
                    "v1.13.x (ADR 0023). Across minors: one minor at a time, `terravixens upgrade` first.")
    kubernetes_version: Version = Field(
        description="e.g. `v1.36.0`; inside what the Talos minor runs: 1.29-1.34 on Talos 1.11, 1.30-1.35 on 1.12, "
                    "1.31-1.36 on 1.13.")
    config_contract: Annotated[str | None, AfterValidator(contract_version)] = Field(
        None, description="The Talos minor the machine configurations are generated for (the provider's contract), "
                          "e.g. `v1.11`; defaults to `talos_version`'s minor. An existing cluster keeps the one it "
                          "was created with: set it before bumping `talos_version` to a new minor, move it "
                          "deliberately, never ahead of `talos_version` (ADR 0023).")
    install_disk: str = Field("/dev/sda", description="Disk Talos installs to.")
    management_vlan: VlanId = Field(
        DEFAULT_MANAGEMENT_VLAN, description="The VLAN preferred to reach nodes and carrying the VIP; every control "
                                             "plane needs an address on it.")
    bridge: str = Field("vmbr0", description="Bridge of the VM NICs (per node override: `bridge`).")
    bootstrap_node: DnsName | None = Field(
        None, description="The control plane that bootstraps etcd, once. Defaults to the first control plane by name; "
                          "changing it later does nothing."
    )
    control_planes: dict[DnsName, Node] = Field(description="Map of stable node name → node; 1, 3, 5 or 7 of them.")
    workers: dict[DnsName, Node] = Field(default_factory=dict, description="Map of stable node name → node.")
    cilium: CiliumConfig = Field(default_factory=CiliumConfig, description="The CNI and LoadBalancer pools.")
    flux: FluxConfig | None = Field(None, description="GitOps with Flux; none: no Flux.")

    @field_validator("kubernetes_version")
    @classmethod
    def _kubernetes_runs_on_talos(cls, value: str, info: ValidationInfo) -> str:
        talos = info.data.get("talos_version")
        if talos is None:  # refused already: one problem is enough
            return value
        talos_minor = versions.minor_of(talos)
        oldest, newest = versions.kubernetes_range(talos_minor)
        if not versions.kubernetes_supported(talos_minor, versions.minor_of(value)):
            raise ValueError(
                f"Kubernetes {shown(value)} does not run on Talos {talos}: Talos {versions.text(talos_minor)} runs "
                f"Kubernetes {versions.text(oldest)}.0 to {versions.text(newest)}.x (Talos' compatibility table); "
                f"pick a version in that range")
        return value

    @field_validator("config_contract")
    @classmethod
    def _contract_not_ahead(cls, value: str | None, info: ValidationInfo) -> str | None:
        talos = info.data.get("talos_version")
        if value is None or talos is None:
            return value
        if versions.minor_of(value) > versions.minor_of(talos):
            raise ValueError(
                f"contract {value} is ahead of talos_version {talos}: nodes cannot read configuration documents of "
                f"a newer Talos (1.11 does not know HostnameConfig); bump talos_version to {value}.x and run "
                f"`terravixens upgrade` first, or keep the contract at {versions.text(versions.minor_of(talos))} or "
                f"below")
        return value

    @field_validator("control_planes")
    @classmethod
    def _odd_quorum(cls, value: dict[str, Node]) -> dict[str, Node]:
        if len(value) not in ALLOWED_CONTROL_PLANE_COUNTS:
            names = ", ".join(sorted(value)[:9]) + (", …" if len(value) > 9 else "")
            raise ValueError(
                f"{len(value)} control planes ({names or 'none'}): use 1, 3, 5 or 7. etcd needs a "
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
    def contract(self) -> str:
        """The configuration contract, `v1.NN`: config_contract, else talos_version's minor."""
        return self.config_contract or versions.text(versions.minor_of(self.talos_version))

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_node or sorted(self.control_planes)[0]

    def nodes(self) -> dict[str, tuple[Role, Node]]:
        """Every node by its stable name, with its role. Sorted by name: never by position in the file."""
        merged = {name: (Role.CONTROLPLANE, node) for name, node in self.control_planes.items()}
        merged.update({name: (Role.WORKER, node) for name, node in self.workers.items()})
        return dict(sorted(merged.items()))


class Site(Strict):
    """The whole site. Rules across sections run in the loader (terravixens.config.site_rules), after this validates."""

    site: DnsName = Field(description="Name of the site (S3 state keys: `<key_prefix>/<site>/<stack>.tfstate`).")
    state: StateConfig = Field(default_factory=StateConfig, description="Where each layer keeps its state.")
    proxmox: ProxmoxConfig = Field(description="The Proxmox VE API.")
    hypervisors: dict[DnsName, Hypervisor] = Field(description="The Proxmox hosts by name (L0).")
    clusters: dict[DnsName, Cluster] = Field(default_factory=dict, description="The Talos clusters by name (L1).")
    standalone: Standalone = Field(
        default_factory=lambda: Standalone(),
        description="Standalone VMs, containers and nested Proxmox hosts (L2), their presets and the spec server.")


# At the end: the standalone section (config/standalone.py) builds on the field types above.
from terravixens.config.standalone import Standalone  # noqa: E402

Site.model_rebuild()
