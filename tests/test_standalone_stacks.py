"""The L2 stacks of sites/standalone.yaml: names and order, dependencies, snapshots, what the JSON never holds, and
the errors of the L2 constructs and rules (each invalid input asserts its message)."""

from __future__ import annotations

import json

import pytest
from cdktf import App, TerraformStack
from cdktf import Testing as CdktfTesting  # aliased: pytest would try to collect a class named Test*
from syrupy.extensions.json import JSONSnapshotExtension

from terravixens._bindings.proxmox.virtual_environment_container import VirtualEnvironmentContainer
from terravixens.config.loader import SiteError, parse_site
from terravixens.constructs.standalone_container import StandaloneContainer, StandaloneContainerProps, os_type_of
from terravixens.constructs.standalone_vm import StandaloneVm, StandaloneVmProps
from terravixens.layers import layer_named, stack_names
from terravixens.logical_ids import pin
from terravixens.stacks import build_app
from terravixens.stacks.standalone import node_tokens_variable
from terravixens.standalone.layout import standalone_layers
from terravixens.standalone.topology import placement
from tests import support
from tests.spec_support import ALL_TOKENS, standalone_data

L2 = ["standalone", "standalone-nest1"]


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("standalone-site")
    stacks = support.synth(support.site_from(standalone_data()), outdir)
    return stacks, json.loads((outdir / "manifest.json").read_text())


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def resources(stack: dict) -> set[str]:
    return {f"{kind}.{name}" for kind, items in stack.get("resource", {}).items() for name in items}


def test_the_shipped_site_has_the_done_when_topology():
    placed = placement(support.site_from(standalone_data()))
    assert {(n.name, n.type, n.parent, n.tier) for n in placed.values()} == {
        ("nest1", "pve", "pve1", 1),
        ("tools", "vm", "pve1", 1),
        ("jump1", "vm", "nest1", 2),
        ("dns1", "ct", "nest1", 2),
    }


def test_stacks_in_apply_order_and_each_after_the_one_that_creates_its_host(synthesized):
    stacks, manifest = synthesized
    site = support.site_from(standalone_data())
    assert stack_names(site) == ["hypervisors", *L2] == list(stacks)
    assert manifest["stacks"]["standalone"]["dependencies"] == ["hypervisors"]
    assert manifest["stacks"]["standalone-nest1"]["dependencies"] == ["standalone"]


def test_each_stack_creates_its_own_nodes_only(synthesized):
    stacks, _ = synthesized
    assert resources(stacks["standalone"]) == {
        "proxmox_virtual_environment_file.sa_nest1_node_env",
        "proxmox_virtual_environment_vm.sa_nest1_vm",
        "proxmox_virtual_environment_file.sa_tools_node_env",
        "proxmox_virtual_environment_vm.sa_tools_vm",
    }
    assert resources(stacks["standalone-nest1"]) == {
        "proxmox_virtual_environment_file.sa_dns1_node_env",
        "proxmox_virtual_environment_container.sa_dns1_ct",
        "proxmox_virtual_environment_file.sa_jump1_node_env",
        "proxmox_virtual_environment_vm.sa_jump1_vm",
    }


@pytest.mark.parametrize("stack", L2)
def test_l2_stack_snapshot(synthesized, snapshot_json, stack):
    assert synthesized[0][stack] == snapshot_json


def test_the_nested_host_is_reached_through_its_own_api_with_apply_time_credentials(synthesized):
    stacks, _ = synthesized
    provider = stacks["standalone-nest1"]["provider"]["proxmox"][0]
    assert provider == {
        "endpoint": "https://10.11.1.60:8006/",
        "api_token": "${var.proxmox_api_token}",
        "ssh": {"node": [{"name": "nest1", "address": "10.11.1.60"}]},
    }
    variable = stacks["standalone-nest1"]["variable"]["proxmox_api_token"]
    assert variable["sensitive"] is True and variable["default"] is None
    # The guests of the hypervisors go through the site's API, credentials from the environment.
    assert stacks["standalone"]["provider"]["proxmox"] == [
        {"endpoint": "https://pve1.lab.internal:8006/", "insecure": False}
    ]
    assert "proxmox_api_token" not in stacks["standalone"].get("variable", {})


def test_tokens_are_an_apply_time_sensitive_variable_never_a_literal(synthesized):
    stacks, _ = synthesized
    for name in L2:
        text = json.dumps(stacks[name])
        assert not any(token in text for token in ALL_TOKENS)
        variable = stacks[name]["variable"]["node_tokens"]
        assert (variable["type"], variable["sensitive"], variable["nullable"]) == ("map(string)", True, False)
        assert "default" not in variable  # required: a plan without it fails instead of creating token-less nodes
    snippet = stacks["standalone-nest1"]["resource"]["proxmox_virtual_environment_file"]["sa_dns1_node_env"]
    assert 'lookup(var.node_tokens, \\"dns1\\", \\"\\")' in json.dumps(snippet["source_raw"]["data"])


def test_guests_name_their_snippet_by_a_constant_volume_id_never_by_reference(synthesized):
    stacks, _ = synthesized
    vm = stacks["standalone-nest1"]["resource"]["proxmox_virtual_environment_vm"]["sa_jump1_vm"]
    ct = stacks["standalone-nest1"]["resource"]["proxmox_virtual_environment_container"]["sa_dns1_ct"]
    assert vm["initialization"]["vendor_data_file_id"] == "local:snippets/terravixens-jump1.yaml"
    assert vm["depends_on"] == ["proxmox_virtual_environment_file.sa_jump1_node_env"]
    assert ct["hook_script_file_id"] == "local:snippets/terravixens-dns1.sh"
    assert ct["depends_on"] == ["proxmox_virtual_environment_file.sa_dns1_node_env"]
    for body in (vm, ct):
        assert "${" not in json.dumps(body)  # nothing of a guest is computed from another resource
    files = stacks["standalone-nest1"]["resource"]["proxmox_virtual_environment_file"]
    assert {name: (f["file_mode"], f["source_raw"]["file_name"]) for name, f in files.items()} == {
        "sa_dns1_node_env": ("0700", "terravixens-dns1.sh"),
        "sa_jump1_node_env": ("0600", "terravixens-jump1.yaml"),
    }


def test_a_container_is_unprivileged_with_no_user_account_and_its_os_type_from_the_template(synthesized):
    ct = synthesized[0]["standalone-nest1"]["resource"]["proxmox_virtual_environment_container"]["sa_dns1_ct"]
    assert ct["unprivileged"] is True and ct["features"] == {"nesting": True}
    assert "user_account" not in ct["initialization"]  # bpg replaces a container whose keys or password change
    assert ct["operating_system"]["type"] == "debian"
    assert os_type_of("local:vztmpl/rockylinux-9-default_20240912_amd64.tar.xz") == "centos"
    assert os_type_of("local:vztmpl/custom.tar.zst") == "unmanaged"


def test_a_nested_pve_gets_the_hosts_cpu_and_a_vm_a_migratable_one(synthesized):
    vms = synthesized[0]["standalone"]["resource"]["proxmox_virtual_environment_vm"]
    assert vms["sa_nest1_vm"]["cpu"] == {"cores": 4, "type": "host"}
    assert vms["sa_tools_vm"]["cpu"] == {"cores": 2, "type": "x86-64-v2-AES"}
    assert vms["sa_nest1_vm"]["memory"] == {"dedicated": 12288}  # the site's preset override
    assert vms["sa_nest1_vm"]["disk"][0]["size"] == 100  # the node's own override
    assert [d["vlan_id"] for d in vms["sa_tools_vm"]["network_device"]] == [111, 120]
    assert vms["sa_tools_vm"]["initialization"]["ip_config"] == [
        {"ipv4": {"address": "10.11.1.62/24", "gateway": "10.11.1.1"}},
        {"ipv4": {"address": "10.12.0.62/24"}},
    ]


def test_a_site_without_standalone_nodes_has_no_l2_stack(example_site):
    assert standalone_layers(example_site) == {}
    assert not any(name.startswith("standalone") for name in stack_names(example_site))


def test_one_stack_per_nested_host_each_after_its_hosts_stack(tmp_path):
    data = standalone_data()
    nodes = data["standalone"]["nodes"]
    nodes["nest2"] = {
        "type": "pve",
        "parent": "nest1",
        "spec": "nested-pve",
        "image": nodes["nest1"]["image"],
        "vm_id": 201,
        "bridge": "vmbr0",
        "networks": {"vlans": {111: {"address": "10.11.1.70/24"}}},
        "bridges": {"vmbr0": {"vlan_aware": True, "vlans": [111]}},
    }
    nodes["deep1"] = {
        "type": "vm",
        "parent": "nest2",
        "spec": "tools",
        "image": nodes["jump1"]["image"],
        "vm_id": 102,
        "bridge": "vmbr0",
        "networks": {"vlans": {111: {"address": "10.11.1.71/24"}}},
    }
    site = support.site_from(data)
    layers = standalone_layers(site)
    assert [(name, layer.after, [n.name for n in layer.nodes]) for name, layer in layers.items()] == [
        ("standalone", None, ["nest1", "tools"]),
        ("standalone-nest1", "standalone", ["dns1", "jump1", "nest2"]),
        ("standalone-nest2", "standalone-nest1", ["deep1"]),
    ]
    support.synth(site, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["stacks"]["standalone-nest2"]["dependencies"] == ["standalone-nest1"]
    deep = json.loads((tmp_path / "stacks" / "standalone-nest2" / "cdk.tf.json").read_text())
    assert deep["provider"]["proxmox"][0]["endpoint"] == "https://10.11.1.70:8006/"
    assert deep["resource"]["proxmox_virtual_environment_vm"]["sa_deep1_vm"]["node_name"] == "nest2"


# ----------------------------------------------------------------------------------------------------- errors


def test_standalone_nodes_without_a_spec_server_are_refused():
    data = standalone_data()
    del data["standalone"]["spec_server"]
    with pytest.raises(SiteError) as caught:
        parse_site(data, "site.yaml")
    problem = next(p for p in caught.value.problems if p.field == "standalone.spec_server")
    assert "is missing: the standalone nodes are told at create time where to pull their spec from" in problem.message


def _stack_with_tokens():
    app = CdktfTesting.app()
    stack = TerraformStack(app, "l2")
    return stack, node_tokens_variable(stack)


def _props(name: str, **extra):
    site = support.site_from(standalone_data())
    return dict(
        placed=placement(site)[name],
        proxmox_node="pve1",
        datastores=site.hypervisors["pve1"].datastores,
        spec_server="https://specs.lab.internal:8443",
        **extra,
    )


def test_a_container_node_given_to_standalone_vm_is_refused():
    stack, tokens = _stack_with_tokens()
    with pytest.raises(
        ValueError,
        match=r"standalone node 'dns1' is a 'ct' with image None: a StandaloneVm is a "
        r"'vm' or 'pve' node with an image; create a 'ct' with StandaloneContainer",
    ):
        StandaloneVm(stack, "dns1", StandaloneVmProps(**_props("dns1", tokens=tokens)))


def test_a_vm_node_given_to_standalone_container_is_refused():
    stack, tokens = _stack_with_tokens()
    with pytest.raises(
        ValueError,
        match=r"standalone node 'tools' is a 'vm' with template None: a "
        r"StandaloneContainer is a 'ct' node with a template",
    ):
        StandaloneContainer(stack, "tools", StandaloneContainerProps(**_props("tools", tokens=tokens)))


def test_a_spec_server_missing_from_a_site_built_by_hand_is_refused_by_the_stack():
    from terravixens.stacks.standalone import StandaloneStack

    site = support.site_from(standalone_data())
    broken = site.model_copy(update={"standalone": site.standalone.model_copy(update={"spec_server": None})})
    with pytest.raises(ValueError, match=r"no standalone.spec_server: nodes are told where to pull their spec from"):
        StandaloneStack(CdktfTesting.app(), broken, layer_named(broken, "standalone"))


def synth_errors(app: App) -> str:
    with pytest.raises(RuntimeError) as caught:
        app.synth()
    return str(caught.value)


def test_tv002_a_container_outside_a_node_construct_is_refused(tmp_path):
    app = build_app(support.site_from(standalone_data()), str(tmp_path))
    stack = app.node.find_child("standalone-nest1")
    pin(VirtualEnvironmentContainer(stack, "stray", node_name="nest1"), "stray_ct")
    assert (
        "[TV002 ResetScopedToNode] proxmox_virtual_environment_container.stray_ct is not inside a TalosNode, "
        "StandaloneVm or StandaloneContainer: create it through one of them"
    ) in synth_errors(app)


def test_tv002_a_standalone_node_reading_another_nodes_attributes_is_refused(tmp_path):
    app = build_app(support.site_from(standalone_data()), str(tmp_path))
    stack = app.node.find_child("standalone-nest1")
    stack.nodes["dns1"].container.description = stack.nodes["jump1"].vm.name
    assert (
        "proxmox_virtual_environment_container.sa_dns1_ct of standalone 'dns1' reads "
        "proxmox_virtual_environment_vm.sa_jump1_vm of standalone 'jump1'"
    ) in synth_errors(app)


def test_tv003_a_standalone_resource_named_after_another_node_is_refused(tmp_path):
    app = build_app(support.site_from(standalone_data()), str(tmp_path))
    stack = app.node.find_child("standalone")
    stack.nodes["tools"].vm.override_logical_id("sa_nest1_vm2")
    assert "'sa_nest1_vm2' belongs to standalone 'tools' but is not named sa_tools_<part>." in synth_errors(app)


def test_the_l2_stacks_conform_to_the_committed_proxmox_schema(synthesized):
    from terravixens.conformance import check_stack, load_schemas

    schemas = load_schemas()
    for name in L2:
        findings, unchecked = check_stack(name, synthesized[0][name], schemas)
        assert ([str(f) for f in findings], unchecked) == ([], set())
