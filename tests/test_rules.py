"""Each synth-time safety rule fails synth, with its code, the offending address, the fix and the reason.

Every test breaks exactly one rule on an otherwise valid stack and asserts the message (cdk-nag style).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from cdktf import App, TerraformResourceLifecycle, TerraformStack

from imports.proxmox.provider import ProxmoxProvider
from imports.proxmox.virtual_environment_user import VirtualEnvironmentUser
from imports.proxmox.virtual_environment_vm import VirtualEnvironmentVm
from imports.talos.machine_bootstrap import MachineBootstrap
from imports.talos.machine_secrets import MachineSecrets
from imports.talos.provider import TalosProvider
from terravixens.constructs.control_plane import ControlPlane, ControlPlaneProps
from terravixens.logical_ids import node_id, pin
from terravixens.rules import ALL_RULES, apply_rules
from terravixens.stacks.platform import PlatformStack


def synth_errors(app: App) -> str:
    with pytest.raises(RuntimeError) as raised:
        app.synth()
    text = str(raised.value)
    assert 'Encountered Annotations with level "ERROR"' in text
    return text


@pytest.fixture()
def app(tmp_path):
    return App(outdir=str(tmp_path))


@pytest.fixture()
def platform(app, example_site) -> PlatformStack:
    return PlatformStack(app, example_site, "prod")


def test_rules_have_unique_codes_and_reasons():
    codes = [rule.code for rule in ALL_RULES]
    assert len(set(codes)) == len(codes) == 7
    assert all(rule.why.strip() for rule in ALL_RULES)


def test_valid_platform_stack_passes_every_rule(app, platform):
    app.synth()


def test_tv001_even_control_plane_count(app, example_site, tmp_path):
    stack = PlatformStack(app, example_site, "prod")
    two = {name: stack.nodes[name] for name in ("cp-a", "cp-b")}
    ControlPlane(stack, "second_control_plane", ControlPlaneProps(
        cluster_name="prod", cluster_config=stack.cluster_config, control_planes=two, workers={},
        bootstrap_node="cp-a",
    ))
    errors = synth_errors(app)
    assert "[TV001 OddControlPlaneQuorum] cluster 'prod' has 2 control planes (cp-a, cp-b): use 1, 3, 5 or 7." in errors
    assert "etcd needs a majority" in errors


def test_tv002_reset_capable_resource_outside_a_node(app, platform):
    pin(VirtualEnvironmentVm(platform, "stray_vm", node_name="pve1"), "stray_vm")
    errors = synth_errors(app)
    assert ("[TV002 ResetScopedToNode] proxmox_virtual_environment_vm.stray_vm is not inside a TalosNode, "
            "StandaloneVm or StandaloneContainer: create it through one of them") in errors


def test_tv002_node_reads_another_nodes_attributes(app, platform):
    other_vm = platform.nodes["wk-b"].vm
    platform.nodes["wk-a"].apply.node_attribute = other_vm.name
    errors = synth_errors(app)
    assert ("talos_machine_configuration_apply.node_wk-a_apply of node 'wk-a' reads "
            "proxmox_virtual_environment_vm.node_wk-b_vm of node 'wk-b'") in errors


def test_tv002_node_depends_on_another_node(app, platform):
    platform.nodes["cp-b"].apply.add_override("depends_on", ["proxmox_virtual_environment_vm.node_cp-a_vm"])
    errors = synth_errors(app)
    assert "node_cp-b_apply of node 'cp-b' reads proxmox_virtual_environment_vm.node_cp-a_vm of node 'cp-a'" in errors


def test_tv003_unpinned_logical_id(app, platform):
    VirtualEnvironmentVm(platform.nodes["wk-a"], "extra", node_name="pve1")
    errors = synth_errors(app)
    assert "[TV003 StableLogicalIds] 'wk-a_extra_" in errors
    assert "is cdktf's path-derived id: pin it with terravixens.logical_ids.pin()." in errors


def test_tv003_logical_id_with_a_role(app, platform):
    platform.nodes["wk-a"].vm.override_logical_id(node_id("wk-a", "worker_vm"))
    errors = synth_errors(app)
    assert "'node_wk-a_worker_vm' carries a role or a position ('worker_vm'): name it by what it is." in errors


def test_tv003_logical_id_with_a_position(app, platform):
    platform.nodes["wk-a"].vm.override_logical_id(node_id("wk-a", "vm_0"))
    errors = synth_errors(app)
    assert "'node_wk-a_vm_0' carries a role or a position ('vm_0')" in errors


def test_tv003_logical_id_named_after_another_node(app, platform):
    platform.nodes["wk-a"].vm.override_logical_id(node_id("wk-b", "disk"))
    errors = synth_errors(app)
    assert "'node_wk-b_disk' belongs to node 'wk-a' but is not named node_wk-a_<part>." in errors


def test_tv004_bootstrap_must_ignore_all_changes(app, platform):
    platform.control_plane.bootstrap.lifecycle = TerraformResourceLifecycle(ignore_changes=["node"])
    errors = synth_errors(app)
    assert ("[TV004 BootstrapOnce] talos_machine_bootstrap.cluster_bootstrap does not ignore all changes: "
            "set lifecycle ignore_changes='all'.") in errors


def test_tv004_one_bootstrap_per_stack(app, platform):
    pin(MachineBootstrap(platform, "second_bootstrap", node_attribute="127.0.0.1",
                         lifecycle=TerraformResourceLifecycle(ignore_changes="all")), "second_bootstrap")
    errors = synth_errors(app)
    assert "stack 'platform-prod' has 2 bootstraps (cluster_bootstrap, second_bootstrap): keep one per cluster." in errors


def test_tv005_secrets_without_prevent_destroy(app):
    stack = TerraformStack(app, "bare")
    TalosProvider(stack, "talos")
    pin(MachineSecrets(stack, "secrets"), "cluster_secrets")
    apply_rules(stack)
    errors = synth_errors(app)
    assert ("[TV005 StoragePreventDestroy] talos_machine_secrets.cluster_secrets has no lifecycle prevent_destroy: "
            "set it, or keep this resource outside terravixens' stacks.") in errors


def test_tv005_secrets_released_only_by_decommission(app, example_site):
    """The one exception: a platform stack synthesized by `terravixens decommission --destroy-secrets`."""
    import json

    from terravixens.decommission_settings import Decommission

    PlatformStack(app, example_site, "prod", Decommission(release_secrets=True))
    app.synth()
    stack = json.loads((Path(app.outdir) / "stacks" / "platform-prod" / "cdk.tf.json").read_text())
    assert stack["resource"]["talos_machine_secrets"]["cluster_secrets"]["lifecycle"]["prevent_destroy"] is False


def test_tv006_private_key_literal(app):
    stack = TerraformStack(app, "leaky")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    user = pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve"), "ops")
    # Built at run time: the repository itself carries nothing that looks like key material.
    user.comment = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nnot-a-key\n-----END " + "OPENSSH PRIVATE KEY-----"
    apply_rules(stack)
    errors = synth_errors(app)
    assert "[TV006 NoSecretLiterals] stack 'leaky' contains a PEM private key" in errors


def test_tv006_password_literal(app):
    stack = TerraformStack(app, "leaky")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve", password="hunter2hunter2"), "ops")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "stack 'leaky' sets secret attribute resource.proxmox_virtual_environment_user.ops.password to a literal" in errors


def test_tv006_age_key_literal(app):
    stack = TerraformStack(app, "leaky")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve",
                               comment="AGE-SECRET-" + "KEY-1" + "Q" * 54), "ops")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "contains an age secret key" in errors


def test_tv002_covers_bpgs_other_vm_names(app, platform):
    from imports.proxmox.vm import Vm

    pin(Vm(platform, "framework_vm", node_name="pve1"), "framework_vm")
    errors = synth_errors(app)
    assert "[TV002 ResetScopedToNode] proxmox_vm.framework_vm is not inside a TalosNode, StandaloneVm" in errors


def test_tv005_covers_bpgs_new_storage_names(app):
    from imports.proxmox.storage_nfs import StorageNfs

    stack = TerraformStack(app, "storage")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(StorageNfs(stack, "nas", id="nas", server="127.0.0.1", export="/export", content=["images"]), "nas")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "[TV005 StoragePreventDestroy] proxmox_storage_nfs.nas has no lifecycle prevent_destroy" in errors


# ---------------------------------------------------------------------------------------------------------- TV007
ENVIRON = '${file("/proc/self/environ")}'


def _user_stack(app, **user) -> TerraformStack:
    stack = TerraformStack(app, "users")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve", **user), "ops")
    apply_rules(stack)
    return stack


def test_tv007_interpolation_in_a_literal(app):
    _user_stack(app, comment=f"hello {ENVIRON}")
    errors = synth_errors(app)
    assert ("[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops comment: "
            "'hello ${file(\"/proc/self/environ\")}' holds '${', which Terraform would evaluate as a template; text is "
            "copied into the JSON unchanged. Remove it, or write a literal as '$${' / '%%{'.") in errors
    assert "Why: Terraform evaluates ${…} and %{…} in every JSON string" in errors


def test_tv007_directive_in_a_literal_beside_a_reference(app):
    stack = _user_stack(app)
    user = stack.node.find_child("user")
    pin(VirtualEnvironmentUser(stack, "second", user_id="two@pve",
                               comment="%{ for k in [1] }x%{ endfor } " + user.user_id), "two")
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.two comment: '%{ for k in [1] }x%{ endfor } " \
           "${TfToken[TOKEN." in errors
    assert "holds '%{'" in errors


def test_tv007_directive_inside_a_function_argument(app):
    from cdktf import Fn

    _user_stack(app, comment=Fn.file("/tmp/%{ if true }x%{ endif }"))
    errors = synth_errors(app)
    assert ("[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops comment: "
            "'${file(\"/tmp/%{ if true }x%{ endif }\")}' holds '%{'") in errors


def test_tv007_in_a_map_key(app):
    stack = TerraformStack(app, "keys")
    from cdktf import TerraformOutput

    pin(TerraformOutput(stack, "out", value={ENVIRON: "x"}), "out")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] keys/out output.out.value.${file(" in errors


def test_tv007_escaped_sequences_references_and_variable_defaults_pass(app, tmp_path):
    from cdktf import Fn, TerraformVariable

    stack = _user_stack(app, comment="cost $${x} and 100%%{y}", email=Fn.file("/tmp/$${not-a-template}"))
    TerraformVariable(stack, "path", type="string", default=ENVIRON)  # Terraform reads defaults literally
    user = stack.node.find_child("user")
    pin(VirtualEnvironmentUser(stack, "second", user_id="two@pve", comment=user.user_id), "two")
    app.synth()


def test_tv007_node_built_from_props_without_the_site_model(app, example_site):
    """A library user builds a Node without validating it (model_construct): the label reaches the node's patch."""
    from terravixens.config.placement import place
    from terravixens.constructs.talos_node import TalosNode, TalosNodeProps

    stack = PlatformStack(app, example_site, "prod")
    cluster = example_site.clusters["prod"]
    template = cluster.workers["wk-a"]
    node = template.model_construct(**{**dict(template), "vm_id": 1299, "labels": {"pool": ENVIRON}})
    network = node.networks.model_construct(vlans={111: node.networks.vlans[111].model_construct(
        address="10.11.1.29/24")})
    node = node.model_construct(**{**dict(node), "networks": network})
    TalosNode(stack, "wk-z", TalosNodeProps(
        placed=place("wk-z", "worker", node, cluster, example_site.hypervisors["pve1"]), cluster=cluster,
        cluster_config=stack.cluster_config))
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] talos_machine_configuration_apply.node_wk-z_apply config_patches.0: " in errors
    assert "holds '${'" in errors
    assert errors.count("[TV007") == 1  # the other nodes, the cluster and the VM carry none
