"""The plan guard refuses plans that break the node promise; each rule once, with its message."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from terravixens.guard import check_plan

ROOT = Path(__file__).resolve().parent.parent
APPLY = "talos_machine_configuration_apply"


def config(role: str) -> str:
    return yaml.safe_dump({"version": "v1alpha1", "machine": {"type": role}})


def apply_address(node: str) -> str:
    return f"{APPLY}.node_{node}_apply"


def plan(prior: dict[str, str], changes: list[tuple[str, str, list[str]]]) -> dict:
    """prior: node -> role of today's applies; changes: (type, name, actions)."""
    resources = [{"address": apply_address(n), "type": APPLY, "name": f"node_{n}_apply",
                  "values": {"machine_configuration_input": config(role)}} for n, role in prior.items()]
    resources.append({"address": "talos_machine_bootstrap.cluster_bootstrap", "type": "talos_machine_bootstrap",
                      "name": "cluster_bootstrap", "values": {}})
    return {
        "prior_state": {"values": {"root_module": {"resources": resources}}},
        "resource_changes": [{"address": f"{kind}.{name}", "type": kind, "name": name, "mode": "managed",
                              "change": {"actions": actions}} for kind, name, actions in changes],
    }


FIVE = {"cp-a": "controlplane", "cp-b": "controlplane", "cp-c": "controlplane", "cp-d": "controlplane",
        "cp-e": "controlplane", "wk-a": "worker"}


def codes(result) -> list[str]:
    return [v.code for v in result]


def test_one_leaving_control_plane_and_a_new_worker_pass():
    assert check_plan(plan(FIVE, [(APPLY, "node_cp-e_apply", ["delete"]),
                                  ("proxmox_virtual_environment_vm", "node_cp-e_vm", ["delete"]),
                                  (APPLY, "node_wk-b_apply", ["create"]),
                                  (APPLY, "node_wk-a_apply", ["update"])])) == []


def test_pg001_replaced_vm_of_a_staying_node():
    [violation] = check_plan(plan(FIVE, [("proxmox_virtual_environment_vm", "node_wk-a_vm", ["delete", "create"])]))
    assert str(violation).startswith("[PG001] proxmox_virtual_environment_vm.node_wk-a_vm would be replaced: "
                                     "node 'wk-a' stays in the site but would be destroyed and re-created.")


def test_pg001_replaced_apply_would_wipe_the_node():
    [violation] = check_plan(plan(FIVE, [(APPLY, "node_cp-b_apply", ["create", "delete"])]))
    assert "node 'cp-b' stays in the site but would be wiped" in violation.message


def test_pg002_two_control_planes_leaving_at_once():
    [violation] = check_plan(plan(FIVE, [(APPLY, "node_cp-d_apply", ["delete"]), (APPLY, "node_cp-e_apply", ["delete"])]))
    assert str(violation) == (
        "[PG002] 2 control planes would leave etcd in one apply (talos_machine_configuration_apply.node_cp-d_apply, "
        "talos_machine_configuration_apply.node_cp-e_apply): apply one first with "
        "`terraform apply -target=talos_machine_configuration_apply.node_cp-d_apply`, then plan again.")


def test_workers_leaving_together_are_fine():
    prior = {"cp-a": "controlplane", "wk-a": "worker", "wk-b": "worker", "wk-c": "worker"}
    assert check_plan(plan(prior, [(APPLY, f"node_{n}_apply", ["delete"]) for n in ("wk-a", "wk-b", "wk-c")])) == []


def test_pg003_no_control_plane_of_today_remains():
    prior = {"cp-a": "controlplane", "wk-a": "worker"}
    result = check_plan(plan(prior, [(APPLY, "node_cp-a_apply", ["delete"]), (APPLY, "node_cp-z_apply", ["create"])]))
    assert codes(result) == ["PG003"]
    assert "no control plane of the current cluster would remain (talos_machine_configuration_apply.node_cp-a_apply" in result[0].message


def test_pg004_secrets_destroyed():
    result = check_plan(plan(FIVE, [("talos_machine_secrets", "cluster_secrets", ["delete"])]))
    assert [str(v) for v in result] == ["[PG004] talos_machine_secrets.cluster_secrets would be destroyed: the "
                                        "cluster's certificates and keys would be lost. Restore the cluster in the site file."]


def test_pg004_second_bootstrap():
    result = check_plan(plan(FIVE, [("talos_machine_bootstrap", "cluster_bootstrap_again", ["create"])]))
    assert codes(result) == ["PG004"]
    assert "would bootstrap etcd again on a cluster that was bootstrapped" in result[0].message


def test_first_bootstrap_of_a_new_cluster_passes():
    fresh = {"prior_state": {}, "resource_changes": [
        {"address": "talos_machine_bootstrap.cluster_bootstrap", "type": "talos_machine_bootstrap",
         "name": "cluster_bootstrap", "mode": "managed", "change": {"actions": ["create"]}}]}
    assert check_plan(fresh) == []


def test_cli_exit_codes(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan(FIVE, [(APPLY, "node_cp-d_apply", ["delete"]), (APPLY, "node_cp-e_apply", ["delete"])])))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(plan(FIVE, [])))
    run = lambda path: subprocess.run([sys.executable, "-m", "terravixens.cli", "plan-guard", str(path)], cwd=ROOT,
                                      capture_output=True, text=True, timeout=60)
    refused, accepted, garbage = run(bad), run(good), run(tmp_path / "missing.json")
    assert refused.returncode == 1 and refused.stderr.splitlines()[-1] == f"{bad}: refused, 1 problem"
    assert accepted.returncode == 0 and accepted.stdout.startswith(f"{good}: ok")
    assert garbage.returncode == 2 and "cannot be read (No such file or directory)" in garbage.stderr


def test_pg001_covers_bpgs_framework_vm_name():
    [violation] = check_plan(plan(FIVE, [("proxmox_vm", "node_wk-a_vm", ["delete", "create"])]))
    assert violation.code == "PG001" and violation.message.startswith("proxmox_vm.node_wk-a_vm would be replaced")
