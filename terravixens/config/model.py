"""The typed site model: one YAML site file is the single source of truth for every layer.

Every model forbids unknown keys, so a typo is an error that names the key instead of a silently ignored setting.
Every string of every model (keys of maps included) is site text: it may not hold a Terraform template sequence
(`${`, `%{`) or a control character, checked once for all fields on the base class (docs/adr/0016).
Per-field rules live next to the field they check; rules that need the whole site (references, uniqueness,
subnets) are `terravixens.config.site_rules`, run by the loader once the model is valid (docs/adr/0017).
Every message says what is wrong, with the bad value (`terravixens.inputs.shown`: truncated, never a secret), and
how to fix it; the loader adds the file, the line and the field path.

Every field has a description: docs/site-file.md is generated from them (terravixens.config.reference).

The model is built in three modules below this one, and every name they define stays importable from here:
field types (terravixens.config.fields), the network parts shared by L0, L1 and L2 (terravixens.config.network) and
the standalone section (terravixens.config.standalone). This module holds the L0 and L1 sections and the Site.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from terravixens import talos_versions as versions
from terravixens.config.etcd_backup import EtcdBackup
from terravixens.config.fields import (
    CONTROL_CHARACTER,
    DNS_LABEL,
    INSECURE_HTTP,
    MAC,
    NEWEST_SUPPORTED_TALOS,
    TEMPLATE_SEQUENCE,
    VERSION,
    DnsName,
    InsecureHttpReason,
    InterfaceAddress,
    Network,
    PlainAddress,
    Strict,
    Version,
    VlanId,
    at_most,
    checked_url,
    contract_version,
    dns_name,
    insecure_http_reason,
    interface_address,
    network,
    parse_address,
    parse_interface,
    plain_address,
    safe_relative_path,
    semver,
    supported_talos,
    text_problem,
    unicast_mac,
    unused_insecure_http,
    vlan_id,
)
from terravixens.config.network import DEFAULT_MANAGEMENT_VLAN, Bridge, NodeNetworks, RoutableAddress, VlanInterface
from terravixens.config.standalone import Standalone
from terravixens.config.storage import CsiSecret, Storage, StorageId
from terravixens.inputs import shown
from terravixens.roles import Role

SHA256 = re.compile(r"^[0-9A-Fa-f]{64}$")
# etcd needs a majority of members: an even count adds a member without adding fault tolerance (4 tolerates one
# failure, like 3), and more than 7 members slows every write. See docs/adr/0005-synth-time-safety-rules.md.
ALLOWED_CONTROL_PLANE_COUNTS = (1, 3, 5, 7)

# Upper bounds of a VM (docs/adr/0017). Proxmox starts no VM with more vCPUs than its host has threads; 512 is above
# the largest two-socket hosts of today. qemu-server caps a VM's memory at 4 TiB ($MAX_MEM = 4194304 MiB). A Talos
# system disk holds the OS and /var: 16 TiB is the largest file on ext4, the file system under Proxmox' `local`.
MAX_CORES = 512
MAX_MEMORY_MIB = 4_194_304
MAX_DISK_GIB = 16_384


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
    encrypt: bool = Field(
        True, description="Server-side encryption of the state objects (SSE-S3, or SSE-KMS with `kms_key_id`)."
    )
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
        "state",
        description="Folder for local state, relative to the project root (no `..`, no `~`, not "
        "absolute); state files are `<local_dir>/<stack>.tfstate`.",
    )
    s3: S3State | None = Field(None, description="S3 settings; required when `backend` is `s3`.")

    @model_validator(mode="after")
    def _s3_needs_settings(self) -> StateConfig:
        if self.backend == "s3" and self.s3 is None:
            raise ValueError(
                "backend is 's3' but no 's3' settings are given: add state.s3.endpoint and state.s3.bucket"
            )
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
class TalosImage(Strict):
    """What the Talos Image Factory builds for this hypervisor (the schematic) and in which form."""

    extensions: list[str] = Field(
        default_factory=lambda: ["siderolabs/qemu-guest-agent"],
        description="Image Factory system extensions (the schematic; its id is computed locally — a schematic other "
        "than the default must be registered once with the factory: `curl -X POST --data-binary "
        "@schematic.yaml https://factory.talos.dev/schematics`).",
    )
    extra_kernel_args: list[str] = Field(default_factory=list, description="Extra kernel arguments of the schematic.")
    platform: Literal["nocloud", "metal"] = Field("nocloud", description="`nocloud` or `metal`.")
    architecture: Literal["amd64", "arm64"] = Field("amd64", description="`amd64` or `arm64`.")
    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    factory_url: str = Field(
        "https://factory.talos.dev", description="The Image Factory, `https://HOST[:PORT]` without a path."
    )
    sha256: dict[str, str] = Field(
        default_factory=dict,
        description="Talos version (`v1.11.5`) -> SHA-256 of this schematic's disk image for it, 64 hex digits: "
        "Proxmox checks the download against it. The public Image Factory publishes no checksum; an "
        "Enterprise Image Factory serves one at the image URL + `.sha256`, or take it once from a "
        "download you trust (`curl -fsSL URL | sha256sum`). A version without one is downloaded over "
        "verified TLS only (ADR 0031). Adding or changing one downloads the image again; VMs keep the "
        "disk they imported.",
    )

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, value: dict[str, str]) -> dict[str, str]:
        for version, digest in value.items():
            if not re.fullmatch(r"v\d+\.\d+\.\d+", version):
                raise ValueError(
                    f"{shown(version)} is not a Talos version like v1.11.5: write it exactly as "
                    f"talos_version is written, with the leading 'v'"
                )
            if not SHA256.match(digest):
                raise ValueError(
                    f"the checksum of {version}, {shown(digest)}, is not a SHA-256: give its 64 "
                    f"hexadecimal digits, as `sha256sum` prints them (no `sha256:` prefix)"
                )
        return {version: digest.lower() for version, digest in value.items()}

    @field_validator("factory_url")
    @classmethod
    def _factory(cls, value: str, info: ValidationInfo) -> str:
        checked_url(value, info, example="https://factory.talos.dev")
        if urlsplit(value).path or urlsplit(value).query or urlsplit(value).fragment:
            raise ValueError(
                f"{shown(value)} has a path: give the factory's scheme and host only, e.g. "
                f"https://factory.talos.dev (images and installers are found under it)"
            )
        return value

    @model_validator(mode="after")
    def _reason_used(self) -> TalosImage:
        unused_insecure_http(self, "factory_url")
        return self


class Datastores(Strict):
    vm: str = Field("local-lvm", description="Datastore of the VM disks.")
    images: str = Field(
        "local", description="Datastore with the `import` content type, for downloaded Talos disk images."
    )


class ApiUser(Strict):
    """An API user, role and token for automation; the token value is an output, never a literal."""

    user_id: str = Field("terravixens@pve", description="The user, `NAME@REALM`.")
    role_id: str = Field("TerravixensProvisioner", description="The role created for the user, holding `privileges`.")
    token_name: str = Field(
        "terravixens", description="Name of the API token; its value is a sensitive output of the hypervisors stack."
    )
    privileges: list[str] = Field(
        default_factory=lambda: [
            "Datastore.AllocateSpace",
            "Datastore.AllocateTemplate",
            "Datastore.Audit",
            "SDN.Use",
            "Sys.Audit",
            "Sys.Modify",
            "VM.Allocate",
            "VM.Audit",
            "VM.Config.CDROM",
            "VM.Config.CPU",
            "VM.Config.Cloudinit",
            "VM.Config.Disk",
            "VM.Config.HWType",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.Options",
            "VM.Monitor",
            "VM.PowerMgmt",
        ],
        description="Proxmox privileges of the role (default: what terravixens needs to manage VMs and images).",
    )

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
        None,
        description="Create a role, user and API token for automation (the token is a sensitive output). Users "
        "and roles are Proxmox-cluster-wide: declare it on one hypervisor per Proxmox cluster.",
    )
    storage: dict[StorageId, Storage] = Field(
        default_factory=dict,
        description="Storage by Proxmox storage id, available on this hypervisor: `type: zfspool`, `nfs`, `cifs` or "
        "`pbs` (docs/adr/0044-l0-storage.md). Ids are Proxmox-cluster-wide: each once in the site. Kept with "
        "prevent_destroy; removing one that a node still names is refused.",
    )


# ---------------------------------------------------------------------------------------------------------- L1
class Taint(Strict):
    key: str = Field(description="Taint key.")
    value: str = Field("", description="Taint value (may be empty).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field("NoSchedule", description="Taint effect.")


class Node(Strict):
    hypervisor: str = Field(description="A key of `hypervisors`: where the VM runs (a new one migrates the VM).")
    vm_id: int = Field(
        ge=100, le=999_999_999, description="Proxmox VM id, unique in the site (a new one replaces the VM)."
    )
    hostname: DnsName | None = Field(
        None,
        description="Hostname and VM name; defaults to the node's key. Unique in "
        "the cluster, and VM names unique per hypervisor.",
    )
    cpu: Annotated[
        int,
        AfterValidator(
            at_most(
                MAX_CORES,
                "cores",
                "Proxmox starts no VM with more vCPUs than its host has threads; give fewer cores",
            )
        ),
    ] = Field(2, ge=1, description=f"vCPU cores, 1-{MAX_CORES}.")
    memory_mib: Annotated[
        int,
        AfterValidator(
            at_most(
                MAX_MEMORY_MIB,
                "MiB",
                "Proxmox gives a VM at most 4 TiB; write the memory in MiB, e.g. 16384 for 16 GiB",
            )
        ),
    ] = Field(4096, ge=1024, description=f"Memory in MiB, 1024-{MAX_MEMORY_MIB} (4 TiB, Proxmox' maximum).")
    disk_gib: Annotated[
        int,
        AfterValidator(
            at_most(MAX_DISK_GIB, "GiB", "a Talos system disk holds the OS and /var; write the size in GiB, e.g. 100")
        ),
    ] = Field(32, ge=10, description=f"System disk in GiB, 10-{MAX_DISK_GIB} (16 TiB).")
    storage: StorageId | None = Field(
        None,
        description="Storage of the system disk: a storage of its hypervisor's `storage` holding `images`, or its "
        "`datastores.vm`; defaults to `datastores.vm`.",
    )
    bridge: str | None = Field(None, description="Bridge of the VM NIC; defaults to the cluster's `bridge`.")
    mac_address: Annotated[str | None, AfterValidator(unicast_mac)] = Field(
        None,
        description="MAC of the VM NIC, e.g. `02:00:0A:0B:01:0B` (unicast; locally administered or a vendor's, "
        "e.g. Proxmox' `BC:24:11`), stored uppercase with ':' as Proxmox writes it. The maintenance "
        "IP's DHCP reservation can then exist before the VM and outlive a VM replacement. Unique in "
        "the site; a change re-plugs the NIC in place (no new VM); removing it keeps the VM's "
        "current MAC (ADR 0024).",
    )
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
            raise ValueError(
                f"taint key {shown(duplicates[0])} appears twice: Talos nodeTaints is a map, one taint per key"
            )
        return value


SHA256_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def chart_archive_path(value: str) -> str:
    """A chart archive the synth can find whoever runs it: relative to the project root, or absolute."""
    parts = value.replace("\\", "/").split("/")
    if value.startswith("~"):
        raise ValueError(
            f"{shown(value)} starts with '~' (a home folder): give a path relative to the project root, e.g. "
            f"'charts/cilium-1.18.4.tgz', or an absolute one"
        )
    if ".." in parts:
        raise ValueError(
            f"{shown(value)} climbs with '..': give a path relative to the project root, e.g. "
            f"'charts/cilium-1.18.4.tgz', or an absolute one"
        )
    if not value.endswith(".tgz"):
        raise ValueError(
            f"{shown(value)} is not a chart archive: give the .tgz `helm pull` wrote, e.g. 'charts/cilium-1.18.4.tgz'"
        )
    return value


class ChartSource(Strict):
    """Where a chart comes from, pinned by the digest of its archive (ADR 0043): exactly one of `repository`,
    `oci` and `archive`. The version is the section's `chart_version`."""

    repository: str | None = Field(
        None, description="A Helm chart repository (`https://…`, e.g. a mirror of the default one); fetched at plan."
    )
    oci: str | None = Field(
        None,
        description="An OCI registry path the chart is pushed under (`oci://registry/path`, without the chart "
        "name); fetched at plan.",
    )
    archive: Annotated[str, AfterValidator(chart_archive_path)] | None = Field(
        None,
        description="A chart archive vendored with `helm pull` (air-gapped: nothing is fetched), relative to the "
        "project root or absolute; its digest and its Chart.yaml are checked when the site is loaded.",
    )
    digest: str = Field(
        description="`sha256:<64 hex>` of the chart archive (`sha256sum` of the .tgz; the `digest` of the "
        "repository index entry; the `Digest:` `helm pull oci://…` prints)."
    )

    @field_validator("digest")
    @classmethod
    def _sha256(cls, value: str) -> str:
        if not SHA256_DIGEST.match(value):
            raise ValueError(
                f"{shown(value)} is not a sha256 digest: give 'sha256:' and 64 lowercase hex digits "
                f"(`sha256sum` of the chart archive)"
            )
        return value

    @field_validator("repository")
    @classmethod
    def _repository(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).scheme != "https" or not urlsplit(value).hostname):
            raise ValueError(f"{shown(value)} is not an https URL: give e.g. 'https://helm.cilium.io'")
        return value

    @field_validator("oci")
    @classmethod
    def _oci(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("oci://") or not urlsplit(value).hostname):
            raise ValueError(f"{shown(value)} is not an OCI reference: give e.g. 'oci://registry.lab.internal/charts'")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ChartSource:
        given = [name for name in ("repository", "oci", "archive") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"{' and '.join(given) or 'none'} given: give exactly one of repository, oci and archive "
                f"(archive for an air-gapped site)"
            )
        return self


class CiliumConfig(Strict):
    chart_version: Version = Field("v1.18.4", description="Cilium chart version.")
    chart: ChartSource | None = Field(
        None, description="Where the Cilium chart comes from; default: `https://helm.cilium.io`, not pinned by digest."
    )
    l2_interfaces: list[str] = Field(
        default_factory=lambda: ["^eth[0-9]+"],
        description="Interfaces (regular expressions) that answer ARP for LoadBalancer IPs.",
    )
    pools: dict[DnsName, list[Network]] = Field(
        default_factory=dict,
        description="LoadBalancer IP pools by name (CIDRs); may not contain node addresses or overlap.",
    )


# A Kubernetes object name (RFC 1123 subdomain): what a Secret may be called.
OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SOPS_SECRET = "sops-age"


def object_name(value: str) -> str:
    if len(value) > 253 or not OBJECT_NAME.match(value):
        raise ValueError(
            f"{shown(value)} is not a Kubernetes object name: use lowercase letters, digits, '-' and "
            f"'.', starting and ending with a letter or digit (e.g. 'flux-system')"
        )
    if value == SOPS_SECRET:
        raise ValueError(
            f"{shown(value)} is the SOPS age key's Secret: name the git credentials' Secret otherwise "
            f"(e.g. 'flux-system')"
        )
    return value


class FluxConfig(Strict):
    chart_version: Version = Field("v2.17.1", description="fluxcd-community `flux2` chart version.")
    chart: ChartSource | None = Field(
        None,
        description="Where the `flux2` chart comes from; default: "
        "`https://fluxcd-community.github.io/helm-charts`, not pinned by digest.",
    )
    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    url: str = Field(
        description="Git URL: `https://…` or `ssh://git@host/org/repo.git` (Flux takes no scp-like "
        "`git@host:org/repo.git`). No password in it: credentials go in the secrets file."
    )
    branch: str = Field("main", description="Branch Flux follows.")
    path: str = Field("./", description="Path in the repository Flux applies.")
    interval: str = Field("10m", description="How often Flux looks for changes.")
    git_auth: Literal["secrets_file", "none"] = Field(
        "secrets_file",
        description="Where Flux's git credentials come from. `secrets_file`: the secrets file's "
        "`flux.<cluster>` (an ssh deploy key, or an https token), which `terravixens "
        "deploy` hands the gitops layer at apply time and terravixens writes into "
        "`git_secret` (ADR 0034); `none`: a public https repository, no Secret at all.",
    )
    git_secret: Annotated[str, AfterValidator(object_name)] = Field(
        "flux-system",
        description="Name of the Secret in flux-system that terravixens writes the git credentials "
        "into and the GitRepository reads (`secretRef`); only with `git_auth: "
        "secrets_file`.",
    )
    git_credentials_revision: int = Field(
        1,
        ge=1,
        description="Bump after changing `flux.<cluster>` in the secrets file (a rotated key or token, or "
        "another kind): the Secret is written through a write-only attribute (kept out of state "
        "and plans), so Terraform re-sends it only when this number changes.",
    )
    sops_age_key_file: str = Field(
        "~/.config/sops/age/keys.txt",
        description="Read at apply time into the `sops-age` secret; its content never enters the synthesized JSON.",
    )
    sops_age_key_revision: int = Field(
        1,
        ge=1,
        description="Bump after rotating the key: the secret is written through a write-only attribute "
        "(kept out of state and plans), so Terraform re-sends it only when this number changes.",
    )

    @field_validator("url")
    @classmethod
    def _git_url(cls, value: str, info: ValidationInfo) -> str:
        if not re.match(r"^(https://|ssh://|http://)", value):
            raise ValueError(
                f"{shown(value)} is not a git URL Flux accepts: use https://… or ssh://git@host/org/repo.git"
            )
        checked_url(value, info, others=("ssh",), example="https://git.example.org/org/repo.git")
        try:
            password = urlsplit(value).password
        except ValueError:  # checked_url parsed it already
            password = None
        if password is not None or (not value.startswith("ssh://") and urlsplit(value).username is not None):
            # Never shown: the part before '@' is a credential, and the URL reaches the synthesized JSON.
            raise ValueError(
                "holds credentials before '@': they would be written into the synthesized JSON and "
                "the cluster in clear; remove them from the URL and put them in the secrets file "
                "(flux.<cluster>.https: username and password, or bearer_token)"
            )
        return value

    @model_validator(mode="after")
    def _credentials_fit_the_url(self) -> FluxConfig:
        if self.git_auth == "none":
            if self.url.startswith("ssh://"):
                raise ValueError(
                    f"url {shown(self.url)} is ssh but git_auth is none: Flux needs a deploy key for ssh; remove "
                    f"git_auth (the default, secrets_file, takes it from the secrets file's flux.<cluster>.ssh), or "
                    f"use the repository's public https URL"
                )
            unused = sorted({"git_secret", "git_credentials_revision"} & self.model_fields_set)
            if unused:
                raise ValueError(
                    f"{' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} set but git_auth is "
                    f"none (no Secret is written): remove {'it' if len(unused) == 1 else 'them'}, or "
                    f"remove git_auth: none"
                )
        unused_insecure_http(self, "url")
        return self


# A reason an operator writes next to what they accept knowingly (a placement exemption): a sentence, not a flag.
MIN_REASON = 8


def placement_reason(value: str) -> str:
    if len(value.strip()) < MIN_REASON:
        raise ValueError(
            f"{shown(value)} is not a reason: say in a sentence why this host may hold a majority of the control "
            f"planes (at least {MIN_REASON} characters, e.g. 'one host until the second arrives in March')"
        )
    return value


class Placement(Strict):
    """Where the cluster's machines may be put against the control-plane spread rule (ADR 0054): a hypervisor
    holding a majority of the control planes takes etcd's quorum down with it."""

    allow_control_plane_majority_on: DnsName = Field(
        description="A key of `hypervisors` that may hold a majority of this cluster's control planes, knowingly: "
        "losing it stops the cluster's API until it is back. Refused when that hypervisor holds no majority (an "
        "exemption that accepts nothing would accept a later one without a word)."
    )
    reason: Annotated[str, AfterValidator(placement_reason)] = Field(
        description="Why, in a sentence (at least 8 characters): `terravixens show` prints it."
    )


class Cluster(Strict):
    endpoint_vip: PlainAddress = Field(
        description="The shared Kubernetes API address: a Talos VIP on the control planes' management VLAN, inside "
        "their subnet on it."
    )
    talos_version: Annotated[Version, AfterValidator(supported_talos)] = Field(
        description="What the nodes run (images, installer): e.g. `v1.13.0` (`1.13.0` is accepted); v1.11.x to "
        "v1.13.x (ADR 0023). Across minors: one minor at a time, `terravixens upgrade` first."
    )
    kubernetes_version: Version = Field(
        description="e.g. `v1.36.0`; inside what the Talos minor runs: 1.29-1.34 on Talos 1.11, 1.30-1.35 on 1.12, "
        "1.31-1.36 on 1.13."
    )
    config_contract: Annotated[str | None, AfterValidator(contract_version)] = Field(
        None,
        description="The Talos minor the machine configurations are generated for (the provider's contract), "
        "e.g. `v1.11`; defaults to `talos_version`'s minor. An existing cluster keeps the one it "
        "was created with: set it before bumping `talos_version` to a new minor, move it "
        "deliberately, never ahead of `talos_version` (ADR 0023).",
    )
    install_disk: str = Field("/dev/sda", description="Disk Talos installs to.")
    management_vlan: VlanId = Field(
        DEFAULT_MANAGEMENT_VLAN,
        description="The VLAN preferred to reach nodes and carrying the VIP; every control "
        "plane needs an address on it.",
    )
    bridge: str = Field("vmbr0", description="Bridge of the VM NICs (per node override: `bridge`).")
    bootstrap_node: DnsName | None = Field(
        None,
        description="The control plane that bootstraps etcd, once. Defaults to the first control plane by name; "
        "changing it later does nothing.",
    )
    control_planes: dict[DnsName, Node] = Field(description="Map of stable node name → node; 1, 3, 5 or 7 of them.")
    workers: dict[DnsName, Node] = Field(default_factory=dict, description="Map of stable node name → node.")
    cilium: CiliumConfig = Field(default_factory=CiliumConfig, description="The CNI and LoadBalancer pools.")
    flux: FluxConfig | None = Field(None, description="GitOps with Flux; none: no Flux.")
    csi: CsiSecret | None = Field(
        None,
        description="A Secret for the cluster's CSI driver, from the secrets file's `csi.<cluster>` (the Secret's "
        "keys and values), written by the gitops layer through a write-only attribute; none: no Secret.",
    )
    etcd_backup: EtcdBackup | None = Field(
        None,
        description="Scheduled offsite etcd backups: a job in the cluster writes age-encrypted snapshots to an "
        "S3-compatible bucket (ADR 0059); none: snapshots are the operator's only (`terravixens snapshot`).",
    )
    placement: Placement | None = Field(
        None,
        description="What the control-plane spread rule accepts knowingly: `{allow_control_plane_majority_on: "
        "HYPERVISOR, reason: …}` (ADR 0054). Without it, a hypervisor holding a majority of the control planes is "
        "refused when the site has enough hypervisors to avoid it, and warned about when it has not.",
    )

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
                f"pick a version in that range"
            )
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
                f"below"
            )
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
        description="Standalone VMs, containers and nested Proxmox hosts (L2), their presets and the spec server.",
    )


# the sections of this module
__all__ = [
    "ALLOWED_CONTROL_PLANE_COUNTS",
    "MAX_CORES",
    "MAX_DISK_GIB",
    "MAX_MEMORY_MIB",
    "ApiUser",
    "CiliumConfig",
    "Cluster",
    "Datastores",
    "FluxConfig",
    "Hypervisor",
    "Node",
    "Placement",
    "ProxmoxConfig",
    "S3State",
    "Site",
    "StateConfig",
    "Taint",
    "TalosImage",
    "placement_reason",
]
# re-exported: field types (terravixens.config.fields)
__all__ += [
    "CONTROL_CHARACTER",
    "DNS_LABEL",
    "INSECURE_HTTP",
    "MAC",
    "NEWEST_SUPPORTED_TALOS",
    "TEMPLATE_SEQUENCE",
    "VERSION",
    "DnsName",
    "InsecureHttpReason",
    "InterfaceAddress",
    "Network",
    "PlainAddress",
    "Strict",
    "Version",
    "VlanId",
    "at_most",
    "checked_url",
    "contract_version",
    "dns_name",
    "insecure_http_reason",
    "interface_address",
    "network",
    "parse_address",
    "parse_interface",
    "plain_address",
    "safe_relative_path",
    "semver",
    "supported_talos",
    "text_problem",
    "unicast_mac",
    "unused_insecure_http",
    "vlan_id",
]
# re-exported: network parts (terravixens.config.network) and the standalone section (terravixens.config.standalone)
__all__ += ["DEFAULT_MANAGEMENT_VLAN", "Bridge", "NodeNetworks", "RoutableAddress", "Standalone", "VlanInterface"]
