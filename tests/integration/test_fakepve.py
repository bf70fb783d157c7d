"""Terraform itself judges the Proxmox side: plan, apply and re-plan against a fake Proxmox VE on loopback.

The site is the example site moved entirely onto loopback (node addresses 127.x, the Proxmox endpoint is the
fake, the Image Factory URL a loopback port where nothing listens: the fake never downloads). The real
bpg/proxmox provider from the offline mirror applies the hypervisors stack and the VMs of the platform stack
(each stack's projection onto the mirrored providers: there is no talos binary, see ADR 0003), then a sequence
of lifecycle changes is planned with `terraform show -json` judging which addresses change and how, applied, and
re-planned to prove convergence. Faults (locked VM, node offline, lost quorum) fail an apply cleanly, leave the
state intact, and a rerun after the fault converges.
"""

from __future__ import annotations

import copy

import pytest

from terravixens.guard import check_plan
from tests import support
from tests.fakepve_deployment import HOST, Deployment
from tests.fakepve_ext import FakePveServer
from tests.loopback import free_port

pytestmark = pytest.mark.integration

VM = "proxmox_virtual_environment_vm.node_{}_vm"
MEMBERSHIP = "terraform_data.cluster_membership"  # built in: kept in the projection, changes with the node lists


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    server = FakePveServer(HOST, free_port(HOST), tmp_path_factory.mktemp("pki")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deployed(fake, terraform_binary, tmp_path_factory):
    data = support.loopback_data(fake.url)
    deployment = Deployment(terraform_binary, fake, tmp_path_factory.mktemp("deploy"))
    deployment.write(data)
    deployment.init()
    for stack in Deployment.STACKS:
        result = deployment.apply(stack)
        assert result.returncode == 0, result.stdout + result.stderr
    return deployment, data


def test_apply_then_second_plan_shows_no_changes(deployed):
    deployment, _ = deployed
    assert deployment.converged("hypervisors") and deployment.converged("platform-prod")
    assert sorted(deployment.state("platform-prod")) == sorted(
        [MEMBERSHIP, *(VM.format(n) for n in ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b"))]
    )
    vms = deployment.fake.call(lambda: sorted((vm.vmid, vm.name, vm.node) for vm in deployment.fake.pve.vms))
    assert vms == [
        (1101, "cp-a", "pve1"),
        (1102, "cp-b", "pve2"),
        (1103, "cp-c", "pve3"),
        (1201, "wk-a", "pve1"),
        (1202, "wk-b", "pve2"),
    ]


def test_lifecycle_changes_judged_by_terraform(deployed):
    """One state, changed step by step as an operator would, each plan judged before it is applied."""
    deployment, base = deployed
    data = copy.deepcopy(base)
    workers, control_planes = data["clusters"]["prod"]["workers"], data["clusters"]["prod"]["control_planes"]

    workers["wk-c"] = copy.deepcopy(workers["wk-b"]) | {"vm_id": 1203}
    workers["wk-c"]["networks"] = {
        "maintenance_ip": "127.0.0.63",
        "vlans": {111: {"address": "127.11.1.23/24", "gateway": "127.11.1.1"}},
    }
    deployment.change(data, {"platform-prod": {VM.format("wk-c"): ["create"], MEMBERSHIP: ["update"]}})

    # An address lives in the Talos configuration: the VM does not change at all.
    workers["wk-a"]["networks"]["vlans"][111]["address"] = "127.11.1.41/24"
    deployment.change(data, {"platform-prod": {MEMBERSHIP: ["update"]}})

    workers["wk-a"]["hostname"] = "wk-a-renamed"
    deployment.change(data, {"platform-prod": {VM.format("wk-a"): ["update"]}})

    # A static MAC (ADR 0024): that VM's NIC only, updated in place (never a new VM), stored as written.
    workers["wk-a"]["mac_address"] = "02:00:7f:0b:01:15"
    deployment.change(data, {"platform-prod": {VM.format("wk-a"): ["update"]}})
    workers["wk-a"]["mac_address"] = "02-00-7F-0B-01-16"
    deployment.change(data, {"platform-prod": {VM.format("wk-a"): ["update"]}})
    net0 = deployment.fake.call(lambda: deployment.fake.pve.vm(1201).config.get("net0"))
    assert "virtio=02:00:7F:0B:01:16" in net0 and "bridge=vmbr1" in net0

    # A Talos bump downloads new images and replaces no VM (their boot image is ignored after creation).
    data["clusters"]["prod"]["talos_version"] = "v1.11.6"
    old = [f"proxmox_download_file.hv_{hv}_image_v1-11-5_ce4c980550dd" for hv in ("pve1", "pve2", "pve3")]
    new = [f"proxmox_download_file.hv_{hv}_image_v1-11-6_ce4c980550dd" for hv in ("pve1", "pve2", "pve3")]
    deployment.change(data, {"hypervisors": {**{a: ["delete"] for a in old}, **{a: ["create"] for a in new}}})

    # Promotion keeps the VMs: the role is in the Talos configuration only.
    for name in ("wk-a", "wk-b"):
        control_planes[name] = workers.pop(name)
    deployment.change(data, {"platform-prod": {MEMBERSHIP: ["update"]}})

    workers.pop("wk-c")
    deployment.change(data, {"platform-prod": {VM.format("wk-c"): ["delete"], MEMBERSHIP: ["update"]}})


def test_plan_shows_a_replacement_when_one_is_forced(deployed, tmp_path):
    """The judge can tell an update from a replacement: a new VM id replaces that VM, and only it; the plan guard
    refuses that plan."""
    deployment, base = deployed
    deployment.reset(base)
    data = copy.deepcopy(base)
    data["clusters"]["prod"]["workers"]["wk-b"]["vm_id"] = 1299
    deployment.write(data)
    assert deployment.plan("platform-prod") == {VM.format("wk-b"): ["delete", "create"]}
    [violation] = check_plan(deployment.last_plan["platform-prod"])
    assert violation.code == "PG001" and violation.message.startswith(f"{VM.format('wk-b')} would be replaced")


FAULTS = {
    "locked VM": (lambda pve: pve.snapshot_lock(1102, "backup"), lambda pve: pve.unlock(1102), "VM is locked (backup)"),
    "node offline": (
        lambda pve: pve.set_node_offline("pve2"),
        lambda pve: pve.set_node_offline("pve2", offline=False),
        "No route to host",
    ),
    "lost quorum": (lambda pve: pve.lose_quorum(), lambda pve: pve.regain_quorum(), "no quorum"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_fails_cleanly_keeps_state_and_rerun_converges(deployed, fault):
    deployment, base = deployed
    inject, clear, message = FAULTS[fault]
    deployment.reset(base)
    before = deployment.state("platform-prod")
    data = copy.deepcopy(base)
    data["clusters"]["prod"]["control_planes"]["cp-b"]["cpu"] = 6  # cp-b lives on pve2
    deployment.write(data)

    deployment.fake.call(inject, deployment.fake.pve)
    try:
        failed = deployment.apply("platform-prod")
    finally:
        deployment.fake.call(clear, deployment.fake.pve)
    assert failed.returncode == 1
    assert message in failed.stdout + failed.stderr
    assert deployment.state("platform-prod") == before

    rerun = deployment.apply("platform-prod")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert deployment.converged("platform-prod")
    vm = deployment.fake.call(lambda: deployment.fake.pve.vm(1102).config.get("cores"))
    assert int(vm) == 6
