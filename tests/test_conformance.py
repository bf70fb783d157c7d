"""Every block of every stack of the example site and of every scenario site conforms to the committed provider
schemas (terravixens.conformance): proxmox's dumped from the built provider, talos', helm's and kubernetes'
hand-authored subsets (their binaries cannot be built here, see ADR 0003). No provider may go unchecked.
"""

from __future__ import annotations

import copy

import pytest

from terravixens.conformance import check_block, check_stack, load_schemas
from tests.variants import VARIANTS

SCHEMAS = load_schemas()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_stack_conforms_to_the_provider_schemas(variant, variant_stacks):
    stacks = variant_stacks(variant)
    for name, stack in stacks.items():
        findings, unchecked = check_stack(name, stack, SCHEMAS)
        assert [str(f) for f in findings] == []
        assert unchecked == set()


def _vm_schema():
    return SCHEMAS["proxmox"]["resource_schemas"]["proxmox_virtual_environment_vm"]["block"]


def _vm(example_synth):
    return copy.deepcopy(example_synth["platform-prod"]["resource"]["proxmox_virtual_environment_vm"]["node_cp-a_vm"])


def findings(body, block, ignore=("//", "lifecycle", "depends_on")):
    return [f"{path}: {problem}" for path, problem in check_block(body, block, ignore=frozenset(ignore))]


def test_unknown_attribute_is_reported(example_synth):
    vm = _vm(example_synth)
    vm["cores"] = 4
    assert findings(vm, _vm_schema()) == ["cores: is neither an attribute nor a block of this type"]


def test_missing_required_attribute_is_reported(example_synth):
    vm = _vm(example_synth)
    del vm["node_name"]
    assert findings(vm, _vm_schema()) == ["node_name: is required by the schema and missing"]


def test_object_attribute_lacking_keys_is_reported(example_synth):
    """The bug `terraform validate` first found: network_device objects need every key."""
    vm = _vm(example_synth)
    vm["network_device"] = [{"bridge": "vmbr1", "model": "virtio"}]
    [finding] = findings(vm, _vm_schema())
    assert finding.startswith("network_device[0]: lacks disconnected, enabled, firewall, mac_address")


def test_block_nesting_and_count_are_reported(example_synth):
    vm = _vm(example_synth)
    vm["cpu"] = [{"cores": 2}, {"cores": 4}]
    vm["disk"] = "scsi0"
    assert findings(vm, _vm_schema()) == [
        "cpu: has 2 blocks, the schema allows at most 1",
        "disk: is a str, the schema says a list of blocks",
    ]


def test_literal_types_are_reported(example_synth):
    vm = _vm(example_synth)
    vm["vm_id"] = "one-hundred"
    vm["started"] = "yes"
    vm["tags"] = "talos"
    assert findings(vm, _vm_schema()) == [
        "started: is 'yes', the schema says bool",
        'tags: is a str, the schema says ["list", "string"]',
        "vm_id: is 'one-hundred', the schema says number",
    ]


def test_computed_attribute_set_is_reported(example_synth):
    vm = _vm(example_synth)
    vm["ipv4_addresses"] = [["127.0.0.1"]]
    assert findings(vm, _vm_schema()) == ["ipv4_addresses: is computed by the provider and cannot be set"]


def test_nested_attribute_of_talos_apply_is_checked(example_synth):
    schema = SCHEMAS["talos"]["resource_schemas"]["talos_machine_configuration_apply"]["block"]
    applies = example_synth["platform-prod"]["resource"]["talos_machine_configuration_apply"]
    apply = copy.deepcopy(applies["node_cp-a_apply"])
    apply["on_destroy"]["wipe"] = True
    assert findings(apply, schema) == ["on_destroy.wipe: is not an attribute of this nested object"]


def test_expressions_are_not_typed(example_synth):
    vm = _vm(example_synth)
    vm["vm_id"] = "${var.vm_id}"
    assert findings(vm, _vm_schema()) == []


def test_helm_release_is_checked(example_synth):
    schema = SCHEMAS["helm"]["resource_schemas"]["helm_release"]["block"]
    release = copy.deepcopy(example_synth["gitops-prod"]["resource"]["helm_release"]["cluster_cilium"])
    release["value"] = ["x"]
    del release["chart"]
    assert findings(release, schema) == [
        "value: is neither an attribute nor a block of this type",
        "chart: is required by the schema and missing",
    ]


def test_kubernetes_metadata_block_is_required(example_synth):
    schema = SCHEMAS["kubernetes"]["resource_schemas"]["kubernetes_secret_v1"]["block"]
    secret = copy.deepcopy(example_synth["gitops-prod"]["resource"]["kubernetes_secret_v1"]["cluster_flux_sops_age"])
    del secret["metadata"]
    assert findings(secret, schema) == ["metadata: is a required block (min_items 1) and missing"]


def test_a_stack_with_an_unknown_provider_reports_it_unchecked():
    stack = {"resource": {"aws_s3_bucket": {"state": {"bucket": "x"}}}, "provider": {"aws": [{}]}}
    assert check_stack("other", stack, SCHEMAS) == ([], {"aws"})


def test_kubernetes_provider_block_matches_the_real_provider(example_synth):
    """hashicorp/kubernetes 2.38.0's provider block (`terraform providers schema -json` of the built provider,
    measured outside the repository): `exec` and `experiments` are lists without max_items, so several blocks conform;
    a limit the schema does have (a Secret's single metadata block) is still enforced."""
    provider = SCHEMAS["kubernetes"]["provider"]["block"]
    assert {
        name: {key: value for key, value in nested.items() if key != "block"}
        for name, nested in provider["block_types"].items()
    } == {"exec": {"nesting_mode": "list"}, "experiments": {"nesting_mode": "list"}}
    config = copy.deepcopy(example_synth["gitops-prod"]["provider"]["kubernetes"][0])
    assert findings(config, provider, ignore=("alias",)) == []
    plugin = {"api_version": "client.authentication.k8s.io/v1", "command": "kubelogin"}
    config["exec"] = [plugin, {**plugin, "command": "other"}]
    config["experiments"] = [{"manifest_resource": True}, {"manifest_resource": False}]
    assert findings(config, provider, ignore=("alias",)) == []
    config["exec"] = [{"command": "kubelogin"}]
    assert findings(config, provider, ignore=("alias",)) == [
        "exec[0].api_version: is required by the schema and missing"
    ]
    secret = copy.deepcopy(example_synth["gitops-prod"]["resource"]["kubernetes_secret_v1"]["cluster_flux_sops_age"])
    secret["metadata"] = [secret["metadata"], secret["metadata"]]
    schema = SCHEMAS["kubernetes"]["resource_schemas"]["kubernetes_secret_v1"]["block"]
    assert findings(secret, schema) == ["metadata: has 2 blocks, the schema allows at most 1"]
