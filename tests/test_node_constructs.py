"""The node-level constructs one at a time, in a small stack of a user's own (as tests/test_library_use.py imports
them): what a construct prop or a site field becomes in the JSON a user reviews, and the errors a construct raises.

Cheap on purpose (no site file, no app): scripts/mutation.py runs this file first among the constructs' judges, so
a mutant of a construct is told from the original here before the whole example is synthesized.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import yaml
from cdktf import App, TerraformStack, TerraformVariable
from cdktf import Testing as CdktfTesting

from terravixens._bindings.proxmox.provider import ProxmoxProvider
from terravixens._bindings.talos.provider import TalosProvider
from terravixens.config.etcd_backup import EtcdBackup
from terravixens.config.model import CiliumConfig, Cluster, FluxConfig, Node, NodeNetworks, TalosImage, VlanInterface
from terravixens.config.model import Hypervisor as HypervisorSpec
from terravixens.config.network import Bridge
from terravixens.config.placement import place
from terravixens.config.storage import CifsShare, NfsShare, PbsDatastore, ZfsPool
from terravixens.constructs import (
    Cilium,
    CiliumProps,
    ClusterConfig,
    ClusterConfigProps,
    ControlPlane,
    ControlPlaneProps,
    FluxBootstrap,
    FluxBootstrapProps,
    Hypervisor,
    HypervisorProps,
    TalosNode,
    TalosNodeProps,
    python_blocks,
)

FINGERPRINT = ":".join(["AB"] * 32)


def stack() -> TerraformStack:
    made = TerraformStack(App(), "small")
    ProxmoxProvider(made, "proxmox", endpoint="https://127.0.0.1:8006/")
    TalosProvider(made, "talos")
    return made


def node(vm_id: int, address: str) -> Node:
    return Node(hypervisor="pve1", vm_id=vm_id, networks=NodeNetworks(vlans={111: VlanInterface(address=address)}))


def cluster(control_planes: dict[str, Node], workers: dict[str, Node] | None = None) -> Cluster:
    return Cluster(
        endpoint_vip="127.0.11.1",
        talos_version="v1.11.5",
        kubernetes_version="1.34.2",
        control_planes=control_planes,
        workers=workers or {},
    )


def talos_nodes(scope: TerraformStack, spec: Cluster, config: ClusterConfig) -> dict[str, TalosNode]:
    hypervisor = HypervisorSpec(node_name="pve1")
    placed = [("controlplane", name, item) for name, item in spec.control_planes.items()]
    placed += [("worker", name, item) for name, item in spec.workers.items()]
    return {
        name: TalosNode(
            scope,
            name,
            TalosNodeProps(placed=place(name, role, item, spec, hypervisor), cluster=spec, cluster_config=config),
        )
        for role, name, item in placed
    }


# ------------------------------------------------------------------------------------------------- ControlPlane
def test_a_bootstrap_node_that_is_not_a_control_plane_is_refused_with_the_ones_to_pick():
    spec = cluster(
        {"cp-c": node(910, "127.0.11.2/24"), "cp-a": node(911, "127.0.11.3/24"), "cp-b": node(912, "127.0.11.4/24")},
        {"wk1": node(920, "127.0.11.20/24")},
    )
    scope = stack()
    config = ClusterConfig(scope, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec))
    nodes = talos_nodes(scope, spec, config)
    control_planes = {name: nodes[name] for name in spec.control_planes}
    with pytest.raises(ValueError) as caught:
        ControlPlane(
            scope,
            "control_plane",
            ControlPlaneProps(
                cluster_name="fleet",
                cluster_config=config,
                control_planes=control_planes,
                workers={"wk1": nodes["wk1"]},
                bootstrap_node="wk1",
            ),
        )
    assert str(caught.value) == "bootstrap node 'wk1' is not a control plane of 'fleet': pick one of cp-a, cp-b, cp-c"


def test_a_control_plane_writes_from_python_the_bytes_its_elements_write(tmp_path):
    """In a stack whose nodes are written from Python, the member list is a block too and the health gate names
    every apply and the member list by address: the file is the one the elements write (an id holding a "/" is
    written "--" in the path, as the constructs library writes it)."""
    written = {}
    for accepts in (True, False):
        app = App(outdir=str(tmp_path / str(accepts)))
        scope = TerraformStack(app, "nodes")
        if accepts:
            python_blocks.accept(scope)
        ProxmoxProvider(scope, "proxmox", endpoint="https://127.0.0.1:8006/")
        TalosProvider(scope, "talos")
        spec = cluster({"cp1": node(910, "127.0.11.2/24")}, {"wk1": node(920, "127.0.11.20/24")})
        config = ClusterConfig(scope, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec))
        nodes = talos_nodes(scope, spec, config)
        plane = ControlPlane(
            scope,
            "fleet/control_plane",
            ControlPlaneProps(
                cluster_name="fleet",
                cluster_config=config,
                control_planes={"cp1": nodes["cp1"]},
                workers={"wk1": nodes["wk1"]},
                bootstrap_node="cp1",
            ),
        )
        if accepts:  # blocks until something reads an element: its address, not an element's reference (a token)
            assert [block.address for block in python_blocks.pending_blocks(scope)][-1] == (
                "terraform_data.cluster_membership"
            )
            assert plane.membership_reference() == "terraform_data.cluster_membership"
        app.synth()
        written[accepts] = (tmp_path / str(accepts) / "stacks" / "nodes" / "cdk.tf.json").read_text()
    resources = json.loads(written[True])["resource"]
    membership = resources["terraform_data"]["cluster_membership"]
    assert membership["input"] == {"control_planes": {"cp1": "127.0.11.2"}, "workers": {"wk1": "127.0.11.20"}}
    assert membership["//"]["metadata"]["path"] == "nodes/fleet--control_plane/membership"
    health = json.loads(written[True])["data"]["talos_cluster_health"]["cluster_health"]
    assert health["depends_on"] == [
        "talos_cluster_kubeconfig.cluster_kubeconfig",
        "terraform_data.cluster_membership",
        "talos_machine_configuration_apply.node_cp1_apply",
        "talos_machine_configuration_apply.node_wk1_apply",
    ]
    assert written[True] == written[False]


# --------------------------------------------------------------------------------------------------- Hypervisor
def smb_share(**optional: Any) -> CifsShare:
    """The SMB share the storage tests use (user pve), with the optional fields a test sets."""
    return CifsShare(type="cifs", server="nas.lab.internal", share="vms", username="pve", **optional)


def pbs_datastore(**optional: Any) -> PbsDatastore:
    """The Proxmox Backup Server datastore the storage tests use (an API token of backup@pbs), with optional fields."""
    return PbsDatastore(
        type="pbs",
        server="pbs.lab.internal",
        datastore="main",
        username="backup@pbs!pve",
        fingerprint=FINGERPRINT,
        **optional,
    )


def test_storage_passwords_are_sensitive_string_variables_saying_whose_and_where_they_come_from():
    """A CIFS or PBS storage's password is a variable the deploy's environment fills: the operator reads in `terraform
    plan` whose password it is (the SMB user, the PBS user or token) and the TF_VAR_ to set; never a value."""
    scope = stack()
    spec = HypervisorSpec(
        node_name="pve1",
        storage={
            "share": smb_share(),
            "backups": pbs_datastore(),
        },
    )
    Hypervisor(scope, "pve1", HypervisorProps(name="pve1", spec=spec))
    synthesized = json.loads(CdktfTesting.synth(scope))
    assert synthesized["variable"] == {
        "storage_password_share": {
            "type": "string",
            "sensitive": True,
            "nullable": False,
            "description": "Password of storage share's SMB user pve: TF_VAR_storage_password_share in the deploy's "
            "environment, never in the site file or the synthesized JSON.",
        },
        "storage_password_backups": {
            "type": "string",
            "sensitive": True,
            "nullable": False,
            "description": "Password of storage backups's Proxmox Backup Server user or API token backup@pbs!pve: "
            "TF_VAR_storage_password_backups in the deploy's environment, never in the site file or the synthesized "
            "JSON.",
        },
    }
    resources = synthesized["resource"]
    assert resources["proxmox_storage_cifs"]["hv_pve1_storage_share"]["password"] == "${var.storage_password_share}"
    assert resources["proxmox_storage_pbs"]["hv_pve1_storage_backups"]["password"] == "${var.storage_password_backups}"


# ------------------------------------------------------------------------------------------------ ClusterConfig
@pytest.mark.parametrize("release", [False, True])
def test_the_machine_secrets_are_kept_until_decommission_releases_them(release):
    """prevent_destroy holds the cluster's certificates; only `terravixens decommission --destroy-secrets` lifts it
    (release_secrets), and a Talos upgrade never mints new ones (talos_version is ignored)."""
    scope = stack()
    spec = cluster({"cp1": node(910, "127.0.11.2/24")})
    ClusterConfig(
        scope, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec, release_secrets=release)
    )
    secrets = json.loads(CdktfTesting.synth(scope))["resource"]["talos_machine_secrets"]
    assert secrets == {
        "cluster_secrets": {"lifecycle": {"ignore_changes": ["talos_version"], "prevent_destroy": not release}}
    }


def test_bridges_list_their_vlans_numerically_and_images_carry_only_the_checksums_the_site_pins():
    """vids is Proxmox' space-separated VLAN list, in numeric order (a string sort would put 111 before 5), and left
    out for a bridge without VLANs; an image is checked against the SHA-256 the site pins for its version, and a
    version without one is downloaded with no checksum at all (Proxmox still verifies the factory's TLS)."""
    scope = stack()
    digest = "a" * 64
    spec = HypervisorSpec(
        node_name="pve1",
        bridges={
            "vmbr1": Bridge(ports=["enp2s0"], vlans=[120, 5, 111]),
            "vmbr0": Bridge(ports=["enp1s0"], vlan_aware=False, comment="uplink"),
        },
        talos_image=TalosImage(sha256={"v1.11.5": digest}),
    )
    Hypervisor(scope, "pve1", HypervisorProps(name="pve1", spec=spec, talos_versions=frozenset({"v1.12.0", "v1.11.5"})))
    resources = json.loads(CdktfTesting.synth(scope))["resource"]
    bridges = resources["proxmox_network_linux_bridge"]
    assert bridges["hv_pve1_bridge_vmbr1"]["vids"] == "5 111 120"
    assert bridges["hv_pve1_bridge_vmbr1"]["vlan_aware"] is True
    assert "vids" not in bridges["hv_pve1_bridge_vmbr0"]
    assert (bridges["hv_pve1_bridge_vmbr0"]["comment"], bridges["hv_pve1_bridge_vmbr0"]["vlan_aware"]) == (
        "uplink",
        False,
    )
    images = list(resources["proxmox_download_file"].values())
    pinned = [body for body in images if "-v1.11.5-" in body["file_name"]]
    unpinned = [body for body in images if "-v1.12.0-" in body["file_name"]]
    assert len(pinned) == len(unpinned) == 1
    assert (pinned[0]["checksum"], pinned[0]["checksum_algorithm"]) == (digest, "sha256")
    assert "checksum" not in unpinned[0] and "checksum_algorithm" not in unpinned[0]
    for body in images:
        assert (body["content_type"], body["overwrite"], body["verify"], body["node_name"]) == (
            "import",
            False,
            True,
            "pve1",
        )


def test_every_storage_field_the_site_sets_reaches_its_definition_on_this_hypervisor_only():
    """Each storage type's optional fields (a ZFS pool's thin provisioning and block size, NFS mount options, a CIFS
    subdirectory, domain and content, a PBS namespace) reach the Proxmox storage definition the operator reviews,
    available on this hypervisor only and kept with prevent_destroy."""
    scope = stack()
    spec = HypervisorSpec(
        node_name="pve-a",
        storage={
            "tank": ZfsPool(
                type="zfspool", pool="tank/vmdata", content=["rootdir", "images"], thin_provision=True, blocksize="64k"
            ),
            "nas": NfsShare(
                type="nfs", server="nas.lab.internal", export="/srv/vm", content=["iso", "backup"], options="vers=4.2"
            ),
            "share": smb_share(subdirectory="pve", domain="LAB", content=["snippets", "iso"]),
            "backups": pbs_datastore(namespace="site-a"),
        },
    )
    Hypervisor(scope, "pve1", HypervisorProps(name="pve1", spec=spec))
    resources = json.loads(CdktfTesting.synth(scope))["resource"]
    bodies = {
        kind: {name: {key: value for key, value in body.items() if key != "//"} for name, body in found.items()}
        for kind, found in resources.items()
    }
    kept = {"prevent_destroy": True}
    assert bodies == {
        "proxmox_storage_zfspool": {
            "hv_pve1_storage_tank": {
                "id": "tank",
                "nodes": ["pve-a"],
                "zfs_pool": "tank/vmdata",
                "content": ["images", "rootdir"],
                "thin_provision": True,
                "blocksize": "64k",
                "lifecycle": kept,
            }
        },
        "proxmox_storage_nfs": {
            "hv_pve1_storage_nas": {
                "id": "nas",
                "nodes": ["pve-a"],
                "server": "nas.lab.internal",
                "export": "/srv/vm",
                "content": ["backup", "iso"],
                "options": "vers=4.2",
                "lifecycle": kept,
            }
        },
        "proxmox_storage_cifs": {
            "hv_pve1_storage_share": {
                "id": "share",
                "nodes": ["pve-a"],
                "server": "nas.lab.internal",
                "share": "vms",
                "subdirectory": "pve",
                "domain": "LAB",
                "username": "pve",
                "password": "${var.storage_password_share}",
                "content": ["iso", "snippets"],
                "lifecycle": kept,
            }
        },
        "proxmox_storage_pbs": {
            "hv_pve1_storage_backups": {
                "id": "backups",
                "nodes": ["pve-a"],
                "server": "pbs.lab.internal",
                "datastore": "main",
                "namespace": "site-a",
                "username": "backup@pbs!pve",
                "password": "${var.storage_password_backups}",
                "fingerprint": FINGERPRINT.lower(),
                "content": ["backup"],
                "lifecycle": kept,
            }
        },
    }


@pytest.mark.parametrize("backup", [False, True])
def test_only_the_control_planes_configuration_lets_the_etcd_backup_job_reach_talos(backup):
    """With an etcd_backup (ADR 0059) the control planes' machine configuration (and no worker's) allows Talos API
    access from the backup's namespace, for its one role; without one, both roles carry the cluster patch only."""
    scope = stack()
    spec = cluster({"cp1": node(910, "127.0.11.2/24")})
    if backup:
        spec = spec.model_copy(
            update={
                "etcd_backup": EtcdBackup(
                    schedule="0 */6 * * *",
                    endpoint="https://127.0.0.1:9000",
                    bucket="etcd-backups",
                    age_recipient="age18s09wxxa0zt9wn0fsjlfxcrpxrs99f2am97tdczyellgc4esv3dqwhd6xa",
                    namespace="etcd-backup",
                )
            }
        )
    ClusterConfig(scope, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec))
    data = json.loads(CdktfTesting.synth(scope))["data"]["talos_machine_configuration"]
    patches = {name: [yaml.safe_load(patch) for patch in body["config_patches"]] for name, body in data.items()}
    cluster_wide = {
        "cluster": {"network": {"cni": {"name": "none"}}, "proxy": {"disabled": True}},
        "machine": {"features": {"kubePrism": {"enabled": True, "port": 7445}}},
    }
    access = {"enabled": True, "allowedRoles": ["os:etcd:backup"], "allowedKubernetesNamespaces": ["etcd-backup"]}
    assert patches == {
        "cluster_machine_configuration_controlplane": [cluster_wide]
        + ([{"machine": {"features": {"kubernetesTalosAPIAccess": access}}}] if backup else []),
        "cluster_machine_configuration_worker": [cluster_wide],
    }
    assert {name: body["machine_type"] for name, body in data.items()} == {
        "cluster_machine_configuration_controlplane": "controlplane",
        "cluster_machine_configuration_worker": "worker",
    }


# ------------------------------------------------------------------------------------------------ FluxBootstrap
@pytest.mark.parametrize("git_auth", ["secrets_file", "none"])
def test_flux_reads_git_credentials_only_from_the_apply_time_variable_and_none_for_a_public_repository(git_auth):
    """`git_auth: secrets_file`: a required, sensitive, ephemeral variable feeds the write-only Secret the
    GitRepository's secretRef names, and the sync waits for it; `none`: no variable, no Secret, no secretRef."""
    scope = stack()
    flux = FluxConfig(url="https://git.example/fleet.git", git_auth=git_auth)
    cilium = Cilium(scope, "cilium", CiliumProps(config=CiliumConfig()))
    FluxBootstrap(scope, "flux", FluxBootstrapProps(flux=flux, cilium=cilium))
    synthesized = json.loads(CdktfTesting.synth(scope))
    variables, resources = synthesized["variable"], synthesized["resource"]
    sync = resources["helm_release"]["cluster_flux_sync"]
    sync_values = yaml.safe_load(sync["values"][0])
    if git_auth == "none":
        assert set(variables) == {"sops_age_key_file"}
        assert set(resources["kubernetes_secret_v1"]) == {"cluster_flux_sops_age"}
        assert sync_values["secretRef"] == ""
        assert sync["depends_on"] == ["helm_release.cluster_flux"]
        return
    credentials = variables["flux_git_credentials"]
    assert {key: credentials[key] for key in ("type", "sensitive", "nullable", "ephemeral")} == {
        "type": "string",
        "sensitive": True,
        "nullable": False,
        "ephemeral": True,
    }
    assert "default" not in credentials and "terravixens deploy --secrets FILE" in credentials["description"]
    [validation] = credentials["validation"]
    assert validation["condition"] == "${try(length(tomap(jsondecode(var.flux_git_credentials))) > 0, false)}"
    assert validation["error_message"].startswith("Give a JSON object of the Secret's keys")
    secret = resources["kubernetes_secret_v1"]["cluster_flux_git_credentials"]
    assert secret["metadata"] == {"name": flux.git_secret, "namespace": "flux-system"}
    assert secret["type"] == "Opaque" and secret["data_wo_revision"] == flux.git_credentials_revision
    assert secret["data_wo"] == "${jsondecode(var.flux_git_credentials)}"
    assert sync_values["secretRef"] == flux.git_secret
    assert sync["depends_on"] == ["helm_release.cluster_flux", "kubernetes_secret_v1.cluster_flux_git_credentials"]


@pytest.mark.parametrize("git_auth", ["secrets_file", "none"])
def test_flux_bootstraps_children_keep_their_construct_ids_for_a_users_escape_hatches(git_auth):
    """Construct ids are public API (aws-cdk DESIGN_GUIDELINES): a user's stack reaches an element FluxBootstrap does
    not expose as an attribute, e.g. `flux.node.find_child("sops_age_key_file")` to override its default, by its id.
    The variables' ids show in no JSON (their logical ids are overridden), so only this test pins them."""
    scope = stack()
    flux = FluxConfig(url="https://git.example/fleet.git", git_auth=git_auth)
    cilium = Cilium(scope, "cilium", CiliumProps(config=CiliumConfig()))
    bootstrap = FluxBootstrap(scope, "flux", FluxBootstrapProps(flux=flux, cilium=cilium))
    credentials = ["flux_git_credentials", "git_credentials"] if git_auth == "secrets_file" else []
    assert [child.node.id for child in bootstrap.node.children] == [
        "sops_age_key_file",
        "namespace",
        "sops_age",
        *credentials,
        "release",
        "sync_chart",
        "sync",
    ]
    variable = bootstrap.node.find_child("sops_age_key_file")
    assert isinstance(variable, TerraformVariable) and variable.friendly_unique_id == "sops_age_key_file"


# ---------------------------------------------------------------------------------------------------- TalosNode
def test_a_nodes_props_reach_its_apply_and_its_fields_its_vm():
    """What `terravixens decommission` sets (a non-graceful reset that reboots into maintenance) and an apply mode of
    the user's reach the apply; the node's tags (lowercased, once, sorted: as Proxmox stores them), MAC, bridge,
    storage and sizes reach its VM."""
    scope = stack()
    worker = Node(
        hypervisor="pve1",
        vm_id=920,
        cpu=6,
        memory_mib=12288,
        disk_gib=80,
        storage="fast",
        bridge="vmbr7",
        mac_address="BC:24:11:00:00:20",
        tags=["Edge", "edge", "GPU"],
        networks=NodeNetworks(vlans={111: VlanInterface(address="127.0.11.20/24")}),
    )
    spec = cluster({"cp1": node(910, "127.0.11.2/24")}, {"wk1": worker})
    config = ClusterConfig(scope, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec))
    hypervisor = HypervisorSpec(node_name="pve1", talos_image=TalosImage(extensions=["siderolabs/iscsi-tools"]))
    TalosNode(
        scope,
        "wk1",
        TalosNodeProps(
            placed=place("wk1", "worker", worker, spec, hypervisor),
            cluster=spec,
            cluster_config=config,
            apply_mode="auto",
            reset_graceful=False,
            reboot_after_reset=True,
        ),
    )
    resources = json.loads(CdktfTesting.synth(scope))["resource"]
    apply = resources["talos_machine_configuration_apply"]["node_wk1_apply"]
    assert apply["apply_mode"] == "auto"
    assert apply["on_destroy"] == {"reset": True, "graceful": False, "reboot": True}
    assert apply["node"] == apply["endpoint"] == "127.0.11.20"
    vm = resources["proxmox_virtual_environment_vm"]["node_wk1_vm"]
    assert vm["tags"] == ["edge", "gpu", "talos", "terravixens"]
    [device] = vm["network_device"]
    assert (device["bridge"], device["mac_address"], device["model"], device["firewall"]) == (
        "vmbr7",
        "BC:24:11:00:00:20",
        "virtio",
        False,
    )
    assert device["vlan_id"] is None and device["mtu"] is None
    [disk] = vm["disk"]
    assert (disk["datastore_id"], disk["size"]) == ("fast", 80)
    assert (vm["cpu"]["cores"], vm["memory"]["dedicated"], vm["vm_id"]) == (6, 12288, 920)
    assert vm["agent"] == {"enabled": False, "trim": True}  # no qemu-guest-agent in its image


def test_a_node_in_another_stack_than_its_cluster_configuration_reads_it_through_cross_stack_references(tmp_path):
    """In a stack whose nodes are written from Python (the app's stacks), a node whose ClusterConfig lives in another
    stack is left to cdktf: its apply reads the secrets and the machine configuration through remote state, never a
    reference to a resource its own stack does not hold."""
    app = App(outdir=str(tmp_path))
    secrets = TerraformStack(app, "secrets")
    TalosProvider(secrets, "talos")
    nodes = TerraformStack(app, "nodes")
    python_blocks.accept(nodes)
    ProxmoxProvider(nodes, "proxmox", endpoint="https://127.0.0.1:8006/")
    TalosProvider(nodes, "talos")
    spec = cluster({"cp1": node(910, "127.0.11.2/24")})
    config = ClusterConfig(secrets, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec))
    placed = place("cp1", "controlplane", spec.control_planes["cp1"], spec, HypervisorSpec(node_name="pve1"))
    talos = TalosNode(nodes, "cp1", TalosNodeProps(placed=placed, cluster=spec, cluster_config=config))
    app.synth()
    written = json.loads((tmp_path / "stacks" / "nodes" / "cdk.tf.json").read_text())
    apply = written["resource"]["talos_machine_configuration_apply"]["node_cp1_apply"]
    read = [*apply["client_configuration"].values(), apply["machine_configuration_input"]]
    assert len(read) == 4
    assert all(value.startswith("${data.terraform_remote_state.cross-stack-reference-input-secrets.") for value in read)
    assert not talos.written_from_python  # cdktf's elements: the blocks from Python hold references of one stack


@pytest.mark.parametrize("where", ["vm", "apply"])
def test_a_value_of_the_users_stack_in_a_nodes_vm_or_apply_is_left_to_cdktf_which_writes_its_reference(where, tmp_path):
    """A node whose VM or apply holds a token of the user's own (a variable naming the Proxmox node, a model copied
    with `model_copy(update=...)`, which pydantic does not validate; an apply mode from a variable) is written by
    its elements: the JSON reads the variable, in `app.synth()`'s file as in the stack's document the rules read."""
    app = App(outdir=str(tmp_path))
    scope = TerraformStack(app, "nodes")
    python_blocks.accept(scope)
    ProxmoxProvider(scope, "proxmox", endpoint="https://127.0.0.1:8006/")
    TalosProvider(scope, "talos")
    variable = TerraformVariable(scope, "chosen", type="string")
    spec = cluster({"cp1": node(910, "127.0.11.2/24")})
    config = ClusterConfig(scope, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec))
    placed = place("cp1", "controlplane", spec.control_planes["cp1"], spec, HypervisorSpec(node_name="pve1"))
    if where == "vm":
        placed = dataclasses.replace(
            placed, hypervisor=placed.hypervisor.model_copy(update={"node_name": variable.string_value})
        )
        props = TalosNodeProps(placed=placed, cluster=spec, cluster_config=config)
    else:
        props = TalosNodeProps(placed=placed, cluster=spec, cluster_config=config, apply_mode=variable.string_value)
    talos = TalosNode(scope, "cp1", props)
    assert not talos.written_from_python
    read = python_blocks.document_of(scope)["resource"]
    app.synth()
    written = json.loads((tmp_path / "stacks" / "nodes" / "cdk.tf.json").read_text())["resource"]
    for resources in (read, written):
        vm = resources["proxmox_virtual_environment_vm"]["node_cp1_vm"]
        apply = resources["talos_machine_configuration_apply"]["node_cp1_apply"]
        expected = ("${var.chosen}", "staged_if_needing_reboot") if where == "vm" else ("pve1", "${var.chosen}")
        assert (vm["node_name"], apply["apply_mode"]) == expected


def test_a_node_whose_id_holds_a_slash_writes_from_python_the_path_its_elements_have(tmp_path):
    """The constructs library writes a "/" of an id as "--" in the path: a node's blocks from Python carry the
    metadata path its elements would (the bytes of `app.synth()` are the same either way)."""
    written = {}
    for accepts in (True, False):
        app = App(outdir=str(tmp_path / str(accepts)))
        scope = TerraformStack(app, "nodes")
        if accepts:
            python_blocks.accept(scope)
        ProxmoxProvider(scope, "proxmox", endpoint="https://127.0.0.1:8006/")
        TalosProvider(scope, "talos")
        spec = cluster({"cp1": node(910, "127.0.11.2/24")})
        config = ClusterConfig(scope, "cluster_config", ClusterConfigProps(cluster_name="fleet", cluster=spec))
        placed = place("cp1", "controlplane", spec.control_planes["cp1"], spec, HypervisorSpec(node_name="pve1"))
        talos = TalosNode(scope, "rack1/cp1", TalosNodeProps(placed=placed, cluster=spec, cluster_config=config))
        assert talos.written_from_python is accepts
        app.synth()
        written[accepts] = (tmp_path / str(accepts) / "stacks" / "nodes" / "cdk.tf.json").read_text()
    resources = json.loads(written[True])["resource"]
    assert resources["proxmox_virtual_environment_vm"]["node_cp1_vm"]["//"]["metadata"]["path"] == "nodes/rack1--cp1/vm"
    assert written[True] == written[False]
