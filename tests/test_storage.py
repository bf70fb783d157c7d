"""L0 storage (ADR 0044): site fields per hypervisor, the storage resources they make, the nodes that name them, the
site rule and the guard check that keep a used storage, and the CSI Secret of the gitops layer.

Scenario tests synthesize the site before and after one change (full app.synth()) and compare addresses, like
tests/test_scenarios.py: adding a pool touches only that pool, removing an unused one removes only it, removing a
used one is refused by the site rule (at the node) and, on what is deployed, by the guard's PG010.
"""

from __future__ import annotations

import copy
import json
import os
import stat

import pytest

from terravixens.config.loader import SiteError, parse_site
from terravixens.guard import check_plan
from terravixens.guard.context import GuardContext, Usage, deployed_usage, site_usage
from terravixens.operations.outcome import OperationError
from terravixens.operations.standalone_env import layer_env
from terravixens.standalone.csi_credentials import CSI_ENV, CSI_VARIABLE
from tests import support
from tests.fixtures.plans import hand_made
from tests.scenario_support import assert_changes, run
from tests.site_builders import FINGERPRINT, PASSWORD, cluster, with_csi, with_storage

H, G, P = "hypervisors", "gitops-prod", "platform-prod"


def zfs(storage_id: str = "tank") -> str:
    return f"proxmox_storage_zfspool.hv_pve1_storage_{storage_id}"


def vm(name: str) -> str:
    return f"proxmox_virtual_environment_vm.node_{name}_vm"


def problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(SiteError) as caught:
        parse_site(copy.deepcopy(data), "site.yaml")
    return [(problem.field, problem.message) for problem in caught.value.problems]


@pytest.fixture(scope="module")
def stored() -> dict:
    return with_storage(support.example_data())


@pytest.fixture(scope="module")
def stored_synth(stored) -> dict[str, dict]:
    return support.synth(support.site_from(stored))


# ------------------------------------------------------------------------------------------------- synthesized
def test_each_storage_is_one_resource_on_its_hypervisor_kept_with_prevent_destroy(stored_synth):
    resources = stored_synth[H]["resource"]
    made = {kind: dict(bodies) for kind, bodies in resources.items() if kind.startswith("proxmox_storage_")}
    assert {kind: set(bodies) for kind, bodies in made.items()} == {
        "proxmox_storage_zfspool": {"hv_pve1_storage_tank"},
        "proxmox_storage_nfs": {"hv_pve1_storage_nas"},
        "proxmox_storage_cifs": {"hv_pve1_storage_share"},
        "proxmox_storage_pbs": {"hv_pve1_storage_backups"},
    }
    for bodies in made.values():
        for body in bodies.values():
            assert body["nodes"] == ["pve1"]
            assert body["lifecycle"] == {"prevent_destroy": True}
    tank = made["proxmox_storage_zfspool"]["hv_pve1_storage_tank"]
    assert (tank["id"], tank["zfs_pool"], tank["content"]) == ("tank", "tank/vmdata", ["images", "rootdir"])
    nas = made["proxmox_storage_nfs"]["hv_pve1_storage_nas"]
    assert (nas["server"], nas["export"], nas["content"]) == ("nas.lab.internal", "/srv/vm", ["backup", "images"])
    pbs = made["proxmox_storage_pbs"]["hv_pve1_storage_backups"]
    assert (pbs["datastore"], pbs["content"], pbs["fingerprint"]) == ("main", ["backup"], FINGERPRINT)


def test_cifs_and_pbs_passwords_are_sensitive_variables_never_values(stored_synth):
    stack = stored_synth[H]
    assert stack["resource"]["proxmox_storage_cifs"]["hv_pve1_storage_share"]["password"] == (
        "${var.storage_password_share}"
    )
    assert stack["resource"]["proxmox_storage_pbs"]["hv_pve1_storage_backups"]["password"] == (
        "${var.storage_password_backups}"
    )
    for name in ("storage_password_share", "storage_password_backups"):
        variable = stack["variable"][name]
        assert variable["sensitive"] is True and variable["nullable"] is False and "default" not in variable
        assert f"TF_VAR_{name}" in variable["description"]
    # Who the password is for, and where it comes from (pinned whole: an operator reads it in `terraform plan`).
    assert {name: body for name, body in stack["variable"].items() if name.startswith("storage_password_")} == {
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
    assert PASSWORD not in json.dumps(stored_synth)


def test_a_node_disk_goes_to_the_storage_it_names_and_no_other_node_moves(stored_synth):
    vms = stored_synth[P]["resource"]["proxmox_virtual_environment_vm"]
    disks = {name: body["disk"][0]["datastore_id"] for name, body in vms.items()}
    assert disks == {
        "node_cp-a_vm": "local-lvm",
        "node_cp-b_vm": "local-lvm",
        "node_cp-c_vm": "local-lvm",
        "node_wk-a_vm": "tank",
        "node_wk-b_vm": "local-lvm",
    }


# ------------------------------------------------------------------------------------------------- scenarios
def test_add_a_pool_touches_only_the_new_storage():
    base = support.example_data()
    result = run(base, lambda d: d["hypervisors"]["pve1"].update(storage={"tank": {"type": "zfspool", "pool": "tank"}}))
    assert_changes(result, {H: {"added": {zfs()}}})


def test_remove_an_unused_pool_removes_only_that_storage():
    base = support.example_data()
    base["hypervisors"]["pve1"]["storage"] = {
        "tank": {"type": "zfspool", "pool": "tank"},
        "fast": {"type": "zfspool", "pool": "fast"},
    }
    result = run(base, lambda d: d["hypervisors"]["pve1"]["storage"].pop("fast"))
    assert_changes(result, {H: {"removed": {zfs("fast")}}})
    # The guard lets the delete through: no node in the site names it, no deployed VM has a disk on it.
    usage = site_usage(support.site_from(base))
    assert usage.storage_users("fast") == set()


def test_moving_a_node_to_a_storage_changes_that_node_only():
    base = support.example_data()
    base["hypervisors"]["pve1"]["storage"] = {"tank": {"type": "zfspool", "pool": "tank"}}
    result = run(base, lambda d: cluster(d)["workers"]["wk-a"].update(storage="tank"))
    assert_changes(result, {P: {"changed": {vm("wk-a")}}})


def test_removing_a_used_pool_is_refused_by_the_site_rule_at_the_node(stored):
    data = copy.deepcopy(stored)
    data["hypervisors"]["pve1"]["storage"].pop("tank")
    assert problems(data) == [
        (
            "clusters.prod.workers.wk-a.storage",
            (
                "storage 'tank' does not exist on hypervisor pve1: declare it under hypervisors.pve1.storage, or use "
                "one of backups, local-lvm, nas, share"
            ),
        )
    ]


def _storage_delete(storage_id: str) -> dict:
    """`terraform show -json` of an L0 plan deleting one ZFS storage definition (tests.fixtures.plans.hand_made)."""
    name, values = f"hv_pve1_storage_{storage_id}", {"id": storage_id, "nodes": ["pve1"], "zfs_pool": storage_id}
    return hand_made.plan(
        [hand_made.resource("proxmox_storage_zfspool", name, values)],
        [hand_made.change("proxmox_storage_zfspool", name, ["delete"], values, None)],
    )


def test_removing_a_used_pool_is_refused_by_the_guard_on_what_is_deployed(stored):
    # The site no longer names tank (wk-a moved back in the file) but the deployed VM still has its disk there.
    state = {
        "version": 4,
        "resources": [
            {
                "mode": "managed",
                "type": "proxmox_virtual_environment_vm",
                "name": "node_wk-a_vm",
                "instances": [
                    {
                        "attributes": {
                            "name": "wk-a",
                            "node_name": "pve1",
                            "vm_id": 1201,
                            "disk": [{"datastore_id": "tank", "interface": "scsi0"}],
                            "initialization": [{"datastore_id": "local-lvm"}],
                        }
                    }
                ],
            }
        ],
    }
    usage = deployed_usage({P: state})
    site = copy.deepcopy(stored)
    del cluster(site)["workers"]["wk-a"]["storage"]
    site_usage(support.site_from(site), usage)
    refused = [v for v in check_plan(_storage_delete("tank"), GuardContext(usage=usage)) if not v.waived]
    assert [(v.code, v.message) for v in refused] == [
        (
            "PG010",
            (
                f"{zfs()} would delete storage 'tank', where VM wk-a in {P} (deployed) has a disk: move those disks "
                f"(or the nodes) to another storage and deploy their layer first, then remove the storage."
            ),
        )
    ]
    # Unused: allowed, and only PG010 judged it (PG009 keeps buckets and volumes, not storage definitions).
    assert check_plan(_storage_delete("fast"), GuardContext(usage=usage)) == []


def test_the_guard_counts_site_nodes_and_standalone_guests_on_their_default_storage():
    data = support.example_data()
    usage = site_usage(support.site_from(data))
    assert usage.storage_users("local-lvm") >= {"node wk-a of cluster prod (site file)"}
    assert usage.storage_users(None) == set()
    assert isinstance(Usage().storages, dict)


# ------------------------------------------------------------------------------------------------- site errors
def test_a_node_naming_a_storage_its_hypervisor_lacks_is_located():
    data = support.example_data()
    cluster(data)["workers"]["wk-b"]["storage"] = "tank"
    [(field, message)] = problems(data)
    assert field == "clusters.prod.workers.wk-b.storage"
    assert message.startswith("storage 'tank' does not exist on hypervisor pve2: declare it under ")


def test_a_backup_storage_cannot_hold_a_node_disk(stored):
    data = copy.deepcopy(stored)
    cluster(data)["workers"]["wk-a"]["storage"] = "backups"
    assert problems(data) == [
        (
            "clusters.prod.workers.wk-a.storage",
            (
                "storage 'backups' of hypervisor pve1 does not hold images (its content: backup): a Proxmox Backup "
                "Server datastore holds backups only: use another storage"
            ),
        )
    ]
    cluster(data)["workers"]["wk-a"]["storage"] = "share"
    data["hypervisors"]["pve1"]["storage"]["share"]["content"] = ["iso"]
    assert problems(data) == [
        (
            "clusters.prod.workers.wk-a.storage",
            (
                "storage 'share' of hypervisor pve1 does not hold images (its content: iso): add images to "
                "hypervisors.pve1.storage.share.content, or use another storage"
            ),
        )
    ]


def test_a_storage_id_is_once_in_the_site(stored):
    data = copy.deepcopy(stored)
    data["hypervisors"]["pve2"]["storage"] = {"tank": {"type": "zfspool", "pool": "tank"}}
    [(field, message)] = problems(data)
    assert field == "hypervisors.pve2.storage.tank"
    assert "declared on hypervisors pve1 and pve2" in message


@pytest.mark.parametrize(
    ("entry", "field", "fragment"),
    [
        ({"type": "zfspool", "pool": "tank vm"}, "pool", "is not a ZFS pool or dataset"),
        ({"type": "nfs", "server": "https://nas", "export": "/srv"}, "server", "without scheme"),
        ({"type": "nfs", "server": "nas", "export": "srv/vm"}, "export", "is not an absolute export path"),
        ({"type": "lvm", "vgname": "pve"}, "", "'zfspool', 'nfs', 'cifs', 'pbs'"),
        (
            {"type": "pbs", "server": "pbs", "datastore": "d", "username": "u@pbs", "fingerprint": "ab:cd"},
            "fingerprint",
            "is not a SHA-256 certificate fingerprint",
        ),
        ({"type": "cifs", "server": "nas", "share": "s", "username": "u", "password": "x"}, "password", "unknown key"),
    ],
)
def test_bad_storage_fields_are_located(entry, field, fragment):
    data = support.example_data()
    data["hypervisors"]["pve1"]["storage"] = {"st": entry}
    found = problems(data)
    assert found, found
    path, message = found[0]
    assert path == ".".join(part for part in ("hypervisors.pve1.storage.st", field) if part)
    assert fragment in message


def test_a_bad_storage_id_is_located():
    data = support.example_data()
    data["hypervisors"]["pve1"]["storage"] = {"9tank": {"type": "zfspool", "pool": "tank"}}
    [(field, message)] = problems(data)
    assert field.startswith("hypervisors.pve1.storage")
    assert "is not a Proxmox storage id" in message


def test_standalone_guests_name_storage_with_the_content_their_disk_needs():
    data = support.yaml.safe_load((support.EXAMPLE_SITE.parent / "standalone.yaml").read_text())
    data["hypervisors"]["pve1"]["storage"] = {"tank": {"type": "zfspool", "pool": "tank", "content": ["images"]}}
    data["standalone"]["nodes"]["nest1"]["storage"] = "tank"
    site = parse_site(copy.deepcopy(data), "site.yaml")  # a vm-type disk on images: fine
    assert site.standalone.nodes["nest1"].storage == "tank"
    data["standalone"]["nodes"]["dns1"]["storage"] = "tank"  # a guest of the nested host
    found = problems(data)
    assert found == [
        (
            "standalone.nodes.dns1.storage",
            (
                "storage 'tank' is named for a guest of nested host nest1, whose storage the site does not declare: "
                "remove storage (the guest uses the nested host's local-lvm)"
            ),
        )
    ]


def test_a_standalone_vm_disk_and_cloud_init_drive_go_to_its_storage():
    data = support.yaml.safe_load((support.EXAMPLE_SITE.parent / "standalone.yaml").read_text())
    data["hypervisors"]["pve1"]["storage"] = {"tank": {"type": "zfspool", "pool": "tank"}}
    data["standalone"]["nodes"]["nest1"]["storage"] = "tank"
    site = parse_site(data, str(support.EXAMPLE_SITE.parent / "standalone.yaml"))
    stacks = support.synth(site)
    body = stacks["standalone"]["resource"]["proxmox_virtual_environment_vm"]["sa_nest1_vm"]
    assert body["disk"][0]["datastore_id"] == "tank"
    assert body["initialization"]["datastore_id"] == "tank"


# ------------------------------------------------------------------------------------------------- CSI secret
def test_the_csi_secret_is_written_through_a_write_only_attribute_from_an_ephemeral_variable():
    stacks = support.synth(support.site_from(with_csi(support.example_data())))
    gitops = stacks[G]
    variable = gitops["variable"][CSI_VARIABLE]
    assert variable["sensitive"] is True and variable["ephemeral"] is True and "default" not in variable
    secret = gitops["resource"]["kubernetes_secret_v1"]["cluster_csi_credentials"]
    assert secret["metadata"] == {"name": "smb-creds", "namespace": "csi-smb"}
    assert secret["data_wo"] == f"${{jsondecode(var.{CSI_VARIABLE})}}"
    assert secret["data_wo_revision"] == 1 and "data" not in secret
    assert gitops["resource"]["kubernetes_namespace_v1"]["cluster_csi_namespace"]["metadata"] == {"name": "csi-smb"}
    # No other stack changes, and the platform layer knows nothing of it.
    assert CSI_VARIABLE not in json.dumps({name: stack for name, stack in stacks.items() if name != G})


def test_kube_system_is_not_created_by_the_gitops_layer():
    data = support.example_data()
    cluster(data)["csi"] = {}
    gitops = support.synth(support.site_from(data))[G]
    assert "cluster_csi_namespace" not in gitops["resource"].get("kubernetes_namespace_v1", {})
    assert (
        gitops["resource"]["kubernetes_secret_v1"]["cluster_csi_credentials"]["metadata"]["namespace"] == "kube-system"
    )


def _secrets_file(tmp_path, text: str):
    path = tmp_path / "secrets.yaml"
    path.write_text(text)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return str(path)


FLUX = "flux:\n  prod:\n    https: {username: git, password: tok}\n"  # the example's flux url is ssh: replaced below


def _csi_site() -> dict:
    data = with_csi(support.example_data())
    cluster(data)["flux"]["url"] = "https://git.lab.internal/platform/fleet.git"
    return data


def test_deploy_hands_the_csi_secret_to_that_gitops_layer_only(tmp_path):
    site = support.site_from(_csi_site())
    secrets = _secrets_file(
        tmp_path, f"schema_version: 1\n{FLUX}csi:\n  prod: {{username: pve-csi, password: {PASSWORD}}}\n"
    )
    env = layer_env(site, str(support.EXAMPLE_SITE), secrets, [G, H, P])
    assert json.loads(env[G][CSI_ENV]) == {"password": PASSWORD, "username": "pve-csi"}
    assert CSI_ENV not in env.get(H, {}) and CSI_ENV not in env.get(P, {})
    assert layer_env(site, str(support.EXAMPLE_SITE), secrets, [H]) == {}


def test_a_missing_csi_entry_is_an_input_error_before_terraform(tmp_path):
    site = support.site_from(_csi_site())
    secrets = _secrets_file(tmp_path, f"schema_version: 1\n{FLUX}")
    with pytest.raises(OperationError) as caught:
        layer_env(site, str(support.EXAMPLE_SITE), secrets, [G])
    assert caught.value.code == 2
    assert "no entry for cluster 'prod', whose clusters.prod.csi asks for a Secret: add csi.prod" in str(caught.value)
    bad = _secrets_file(tmp_path, f"schema_version: 1\n{FLUX}csi:\n  prod: {{'a b': {PASSWORD}}}\n")
    with pytest.raises(OperationError) as caught:
        layer_env(site, str(support.EXAMPLE_SITE), bad, [G])
    assert "csi.prod" in str(caught.value) and "is no Secret key" in str(caught.value)
    assert PASSWORD not in str(caught.value)
