"""L0 storage judged by Terraform and the real bpg/proxmox provider against the fake Proxmox VE (ADR 0044).

fakepve 0.5.0 keeps a storage.cfg behind `/storage` as Proxmox VE's API documents it: per-type options (required,
fixed), sensitive options (`password`) never shown back, ids unique, `DELETE /storage/{storage}` removing the
definition only. The hypervisors stack applies one storage of each type; wk-a's disk goes on the ZFS pool; removing
an unused storage deletes only it; removing the used one is refused by the guard (PG010) on the platform layer's
deployed state, and `plan -destroy` by prevent_destroy.

What the fake cannot show, and a real host adds: the ZFS pool existing (`zpool list`), the NFS/SMB servers answering
and the share being mounted on the node, the Proxmox Backup Server checking the fingerprint and the
credentials, and the space used on each.
"""

from __future__ import annotations

import copy
import json

import pytest

from terravixens.guard import check_plan
from terravixens.guard.context import GuardContext, deployed_usage, site_usage
from tests import support
from tests.fakepve_deployment import HOST, Deployment
from tests.fakepve_ext import FakePveServer
from tests.loopback import free_port
from tests.site_builders import FINGERPRINT, PASSWORD, with_storage

pytestmark = pytest.mark.integration

H, P = "hypervisors", "platform-prod"
TANK, NAS = "proxmox_storage_zfspool.hv_pve1_storage_tank", "proxmox_storage_nfs.hv_pve1_storage_nas"
PASSWORDS = {"TF_VAR_storage_password_share": PASSWORD, "TF_VAR_storage_password_backups": PASSWORD}


class StorageDeployment(Deployment):
    def tf(self, stack: str, *args: str):
        from tests.terraform import terraform

        return terraform(self.binary, self.root / stack, *args, "-no-color", **self.fake.provider_env(), **PASSWORDS)


def loopback_storage(data: dict) -> dict:
    with_storage(data)
    for entry in data["hypervisors"]["pve1"]["storage"].values():
        if "server" in entry:
            entry["server"] = "127.0.0.77"  # nothing listens: the fake never mounts
    return data


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    server = FakePveServer(HOST, free_port(HOST), tmp_path_factory.mktemp("pki")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deployed(fake, terraform_binary, tmp_path_factory):
    data = loopback_storage(support.loopback_data(fake.url))
    deployment = StorageDeployment(terraform_binary, fake, tmp_path_factory.mktemp("storage"))
    deployment.write(data)
    deployment.init()
    for stack in Deployment.STACKS:
        result = deployment.apply(stack)
        assert result.returncode == 0, result.stdout + result.stderr
    return deployment, data


def storages(fake: FakePveServer) -> dict[str, dict]:
    return fake.call(lambda: {name: fake.pve.storage_config(name) for name in fake.pve.storages})


def test_each_storage_is_a_storage_cfg_entry_on_its_node_and_converges(deployed):
    deployment, _ = deployed
    assert deployment.converged(H) and deployment.converged(P)
    found = storages(deployment.fake)
    assert {name: found[name]["type"] for name in ("tank", "nas", "share", "backups")} == {
        "tank": "zfspool",
        "nas": "nfs",
        "share": "cifs",
        "backups": "pbs",
    }
    assert (found["tank"]["pool"], found["tank"]["nodes"]) == ("tank/vmdata", "pve1")
    assert (found["nas"]["export"], found["nas"]["server"], found["nas"]["path"]) == (
        "/srv/vm",
        "127.0.0.77",
        "/mnt/pve/nas",
    )
    assert found["backups"]["fingerprint"] == FINGERPRINT and found["backups"]["content"] == "backup"
    # The API never shows a password back (fakepve drops sensitive options as storage.cfg keeps them apart).
    assert "password" not in found["share"] and "password" not in found["backups"]
    document = (deployment.root / H / "cdk.tf.json").read_text()
    assert PASSWORD not in document and "${var.storage_password_share}" in document


def test_the_node_disk_is_on_the_pool_it_names(deployed):
    deployment, _ = deployed
    disk = deployment.fake.call(lambda: next(vm for vm in deployment.fake.pve.vms if vm.name == "wk-a").config["scsi0"])
    assert disk.startswith("tank:vm-1201-disk-"), disk


def test_removing_an_unused_storage_deletes_only_it_and_the_guard_lets_it_through(deployed):
    deployment, data = deployed
    without_nas = copy.deepcopy(data)
    without_nas["hypervisors"]["pve1"]["storage"].pop("nas")
    deployment.write(without_nas)
    assert deployment.plan(H) == {NAS: ["delete"]}
    usage = site_usage(support.site_from(without_nas), deployed_usage({P: _state(deployment)}))
    assert check_plan(deployment.last_plan[H], GuardContext(usage=usage)) == []
    result = deployment.apply(H)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nas" not in storages(deployment.fake) and "tank" in storages(deployment.fake)
    deployment.reset(data)


def test_removing_the_used_pool_is_refused_by_the_guard_and_by_prevent_destroy(deployed):
    deployment, data = deployed
    # The site file moved wk-a back to local-lvm and dropped tank, but the platform layer is not deployed yet.
    moved = copy.deepcopy(data)
    del moved["clusters"]["prod"]["workers"]["wk-a"]["storage"]
    moved["hypervisors"]["pve1"]["storage"].pop("tank")
    deployment.write(moved)
    assert deployment.plan(H) == {TANK: ["delete"]}
    usage = site_usage(support.site_from(moved), deployed_usage({P: _state(deployment)}))
    refused = check_plan(deployment.last_plan[H], GuardContext(usage=usage))
    assert [v.code for v in refused] == ["PG010"]
    assert "where VM wk-a in platform-prod (deployed) has a disk" in refused[0].message
    assert "tank" in storages(deployment.fake)  # nothing applied
    deployment.write(data)
    destroy = deployment.tf(H, "plan", "-destroy", "-input=false")
    assert destroy.returncode == 1
    assert "Instance cannot be destroyed" in destroy.stderr and "prevent_destroy" in destroy.stderr


def _state(deployment: StorageDeployment) -> dict:
    pulled = deployment.tf(P, "state", "pull")
    assert pulled.returncode == 0, pulled.stderr
    return json.loads(pulled.stdout)


def test_moving_a_node_to_the_pool_plans_an_in_place_update_of_its_vm_only(deployed):
    """Planned only: bpg moves the disk (`POST /qemu/{vmid}/move_disk`, the source deleted), which fakepve 0.5.0
    answers from the API schema without moving anything, so the apply and its read-back are a real host's to show."""
    deployment, data = deployed
    moved = copy.deepcopy(data)
    moved["clusters"]["prod"]["control_planes"]["cp-a"]["storage"] = "tank"
    deployment.write(moved)
    assert deployment.plan(H) == {}
    assert deployment.plan(P) == {"proxmox_virtual_environment_vm.node_cp-a_vm": ["update"]}
    [change] = [c for c in deployment.last_plan[P]["resource_changes"] if c["change"]["actions"] == ["update"]]
    before, after = change["change"]["before"]["disk"][0], change["change"]["after"]["disk"][0]
    assert (before["datastore_id"], after["datastore_id"]) == ("local-lvm", "tank")
    assert {k: v for k, v in before.items() if k not in ("datastore_id", "path_in_datastore")} == {
        k: v for k, v in after.items() if k in before and k not in ("datastore_id", "path_in_datastore")
    }
    deployment.write(data)
