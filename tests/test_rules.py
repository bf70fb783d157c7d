"""Each synth-time safety rule fails synth, with its code, the offending address, the fix and the reason.

Every test breaks exactly one rule on an otherwise valid stack and asserts the message (cdk-nag style).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdktf import App, TerraformResourceLifecycle, TerraformStack

from terravixens._bindings.proxmox.provider import ProxmoxProvider
from terravixens._bindings.proxmox.virtual_environment_user import VirtualEnvironmentUser
from terravixens._bindings.proxmox.virtual_environment_vm import VirtualEnvironmentVm
from terravixens._bindings.talos.machine_bootstrap import MachineBootstrap
from terravixens._bindings.talos.machine_secrets import MachineSecrets
from terravixens._bindings.talos.provider import TalosProvider
from terravixens.constructs.control_plane import ControlPlane, ControlPlaneProps
from terravixens.layers import layer_named
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
    return PlatformStack(app, example_site, layer_named(example_site, "platform-prod"))


def test_rules_have_unique_codes_and_reasons():
    codes = [rule.code for rule in ALL_RULES]
    # TV001, TV002, … in order, none skipped: the range apply_rules names (TV001-TVnnn) is then every rule.
    assert codes == [f"TV{number:03d}" for number in range(1, len(codes) + 1)]
    assert all(rule.why.strip() for rule in ALL_RULES)


def test_valid_platform_stack_passes_every_rule(app, platform):
    app.synth()


def test_tv001_even_control_plane_count(app, example_site, tmp_path):
    stack = PlatformStack(app, example_site, layer_named(example_site, "platform-prod"))
    two = {name: stack.nodes[name] for name in ("cp-a", "cp-b")}
    ControlPlane(
        stack,
        "second_control_plane",
        ControlPlaneProps(
            cluster_name="prod",
            cluster_config=stack.cluster_config,
            control_planes=two,
            workers={},
            bootstrap_node="cp-a",
        ),
    )
    errors = synth_errors(app)
    assert "[TV001 OddControlPlaneQuorum] cluster 'prod' has 2 control planes (cp-a, cp-b): use 1, 3, 5 or 7." in errors
    assert "etcd needs a majority" in errors


def test_tv002_reset_capable_resource_outside_a_node(app, platform):
    pin(VirtualEnvironmentVm(platform, "stray_vm", node_name="pve1"), "stray_vm")
    errors = synth_errors(app)
    assert (
        "[TV002 ResetScopedToNode] proxmox_virtual_environment_vm.stray_vm is not inside a TalosNode, "
        "StandaloneVm or StandaloneContainer: create it through one of them"
    ) in errors


def test_tv002_node_reads_another_nodes_attributes(app, platform):
    other_vm = platform.nodes["wk-b"].vm
    platform.nodes["wk-a"].apply.node_attribute = other_vm.name
    errors = synth_errors(app)
    assert (
        "talos_machine_configuration_apply.node_wk-a_apply of node 'wk-a' reads "
        "proxmox_virtual_environment_vm.node_wk-b_vm of node 'wk-b'"
    ) in errors


def test_tv002_node_reads_another_node_inside_an_expression(app, platform):
    """A reference inside a function call or a conditional renders without its own `${`: still a read."""
    from cdktf import Fn

    platform.nodes["wk-a"].apply.node_attribute = Fn.lower(platform.nodes["wk-b"].vm.name)
    errors = synth_errors(app)
    assert (
        "talos_machine_configuration_apply.node_wk-a_apply of node 'wk-a' reads "
        "proxmox_virtual_environment_vm.node_wk-b_vm of node 'wk-b'"
    ) in errors


def test_tv002_node_reads_another_node_in_another_stack(app, example_site, platform):
    """A reference across stacks becomes a remote state output (cdktf's cross-stack reference): the read is followed
    to the output's value in the stack that holds the other node."""
    from terravixens.config.placement import place
    from terravixens.constructs.talos_node import TalosNode, TalosNodeProps

    other = TerraformStack(app, "other")
    TalosProvider(other, "talos")
    ProxmoxProvider(other, "proxmox", endpoint="https://127.0.0.1:8006/")
    cluster = example_site.clusters["prod"]
    template = cluster.workers["wk-a"]
    node = TalosNode(
        other,
        "wk-z",
        TalosNodeProps(
            placed=place("wk-z", "worker", template, cluster, example_site.hypervisors["pve1"]),
            cluster=cluster,
            cluster_config=platform.cluster_config,
        ),
    )
    node.apply.node_attribute = platform.nodes["wk-b"].vm.name
    apply_rules(other)
    errors = synth_errors(app)
    assert (
        "[TV002 ResetScopedToNode] talos_machine_configuration_apply.node_wk-z_apply of node 'wk-z' reads "
        "proxmox_virtual_environment_vm.node_wk-b_vm of node 'wk-b' (through stack 'platform-prod')"
    ) in errors


def test_tv002_node_depends_on_another_node(app, platform):
    platform.nodes["cp-b"].apply.add_override("depends_on", ["proxmox_virtual_environment_vm.node_cp-a_vm"])
    errors = synth_errors(app)
    assert "node_cp-b_apply of node 'cp-b' reads proxmox_virtual_environment_vm.node_cp-a_vm of node 'cp-a'" in errors


def test_tv002_node_depends_on_another_nodes_data_source(app, platform):
    """depends_on names a data source as data.<type>.<id>: its id is read past the `data.` prefix, as in a reference."""
    platform.nodes["cp-b"].apply.add_override("depends_on", ["data.talos_machine_configuration.node_cp-a_config"])
    errors = synth_errors(app)
    assert (
        "[TV002 ResetScopedToNode] talos_machine_configuration_apply.node_cp-b_apply of node 'cp-b' reads "
        "talos_machine_configuration.node_cp-a_config of node 'cp-a'"
    ) in errors


def test_tv002_node_replaced_when_another_node_changes(app, platform):
    """replace_triggered_by names addresses bare (as TalosNode's own apply does for its VM): one naming another
    node's VM replaces, so resets, this node whenever that VM changes."""
    platform.nodes["wk-a"].apply.lifecycle = TerraformResourceLifecycle(
        replace_triggered_by=["proxmox_virtual_environment_vm.node_wk-b_vm.id"]
    )
    errors = synth_errors(app)
    assert (
        "[TV002 ResetScopedToNode] talos_machine_configuration_apply.node_wk-a_apply of node 'wk-a' reads "
        "proxmox_virtual_environment_vm.node_wk-b_vm of node 'wk-b'"
    ) in errors


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
    assert (
        "[TV004 BootstrapOnce] talos_machine_bootstrap.cluster_bootstrap does not ignore all changes: "
        "set lifecycle ignore_changes='all'."
    ) in errors


def test_tv004_one_bootstrap_per_stack(app, platform):
    pin(
        MachineBootstrap(
            platform,
            "second_bootstrap",
            node_attribute="127.0.0.1",
            lifecycle=TerraformResourceLifecycle(ignore_changes="all"),
        ),
        "second_bootstrap",
    )
    errors = synth_errors(app)
    assert (
        "stack 'platform-prod' has 2 bootstraps (cluster_bootstrap, second_bootstrap): keep one per cluster."
    ) in errors


def test_tv004_one_bootstrap_block_for_several_bootstraps(app, platform):
    """count or for_each makes one block several bootstraps: the count of blocks alone would pass it."""
    platform.control_plane.bootstrap.count = 2
    errors = synth_errors(app)
    assert (
        "[TV004 BootstrapOnce] talos_machine_bootstrap.cluster_bootstrap sets count to 2: a bootstrap block "
        "must be one bootstrap; decide in Python whether the stack holds it."
    ) in errors


def test_tv004_a_bootstrap_for_each(app, platform):
    from cdktf import TerraformIterator

    platform.control_plane.bootstrap.for_each = TerraformIterator.from_list(["cp-a", "cp-b"])
    errors = synth_errors(app)
    assert '[TV004 BootstrapOnce] talos_machine_bootstrap.cluster_bootstrap sets for_each to "${toset([' in errors
    assert errors.count("[TV007") == 0


def test_tv004_a_bootstrap_counted_once_passes(app, platform):
    platform.control_plane.bootstrap.count = 1
    app.synth()


def test_tv005_secrets_without_prevent_destroy(app):
    stack = TerraformStack(app, "bare")
    TalosProvider(stack, "talos")
    pin(MachineSecrets(stack, "secrets"), "cluster_secrets")
    apply_rules(stack)
    errors = synth_errors(app)
    assert (
        "[TV005 StoragePreventDestroy] talos_machine_secrets.cluster_secrets has no lifecycle prevent_destroy: "
        "set it, or keep this resource outside terravixens' stacks."
    ) in errors


def test_tv005_secrets_released_only_by_decommission(app, example_site):
    """The one exception: a platform stack synthesized by `terravixens decommission --destroy-secrets`."""
    import json

    from terravixens.decommission_settings import Decommission
    from terravixens.stacks.base import BuildOptions

    PlatformStack(
        app,
        example_site,
        layer_named(example_site, "platform-prod"),
        BuildOptions(decommission={"prod": Decommission(release_secrets=True)}),
    )
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


def _snippet_stack(app, tmp_path, ca_data: str, comment: str | None = None) -> None:
    from cdktf import TerraformVariable

    from terravixens.constructs.node_env_snippet import NodeEnvSnippet, NodeEnvSnippetProps
    from terravixens.standalone.node_env import Trust

    stack = TerraformStack(app, "l2")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    tokens = TerraformVariable(stack, "node_tokens", type="map(string)", sensitive=True)
    NodeEnvSnippet(
        stack,
        "dns1",
        NodeEnvSnippetProps(
            "dns1",
            "pve1",
            "local",
            "https://127.0.0.1:8443",
            tokens,
            trust=Trust(ca_data),
            agent_sha256=TerraformVariable(stack, "agent_bundle_sha256", type="string"),
        ),
    )
    if comment is not None:
        user = pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve"), "ops")
        user.comment = comment
    apply_rules(stack)


def test_tv006_lets_the_sites_public_ca_through_and_nothing_else(app, tmp_path):
    import base64

    from tests.spec_support import make_tls

    tls = make_tls(tmp_path, host="127.0.0.9")
    ca = base64.b64encode(tls["ca"].read_bytes()).decode()
    _snippet_stack(app, tmp_path, ca)
    app.synth()  # the CA the snippet writes on purpose: no error
    other = App(outdir=str(tmp_path / "other"))
    _snippet_stack(other, tmp_path, ca, comment=ca)  # the same certificate anywhere else: a finding
    assert "[TV006 NoSecretLiterals] stack 'l2' contains a base64-encoded PEM block" in synth_errors(other)
    keyed = App(outdir=str(tmp_path / "keyed"))
    _snippet_stack(keyed, tmp_path, base64.b64encode(tls["key"].read_bytes()).decode())  # a key is never public
    assert "[TV006 NoSecretLiterals] stack 'l2' contains a base64-encoded PEM block" in synth_errors(keyed)


def test_tv006_password_literal(app):
    stack = TerraformStack(app, "leaky")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve", password="hunter2hunter2"), "ops")
    apply_rules(stack)
    errors = synth_errors(app)
    assert (
        "stack 'leaky' sets secret attribute resource.proxmox_virtual_environment_user.ops.password to a literal"
    ) in errors


def test_tv006_age_key_literal(app):
    stack = TerraformStack(app, "leaky")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve", comment="AGE-SECRET-" + "KEY-1" + "Q" * 54), "ops")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "contains an age secret key" in errors


def test_tv002_covers_bpgs_other_vm_names(app, platform):
    from terravixens._bindings.proxmox.vm import Vm

    pin(Vm(platform, "framework_vm", node_name="pve1"), "framework_vm")
    errors = synth_errors(app)
    assert "[TV002 ResetScopedToNode] proxmox_vm.framework_vm is not inside a TalosNode, StandaloneVm" in errors


def test_tv005_covers_bpgs_new_storage_names(app):
    from terravixens._bindings.proxmox.storage_nfs import StorageNfs

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
    assert (
        "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops comment: "
        "'hello ${file(\"/proc/self/environ\")}' holds '${', which Terraform would evaluate as a template; text is "
        "copied into the JSON unchanged. Remove it, or write a literal as '$${' / '%%{'."
    ) in errors
    assert "Why: Terraform evaluates ${…} and %{…} in every JSON string" in errors


def test_tv007_directive_in_a_literal_beside_a_reference(app):
    stack = _user_stack(app)
    user = stack.node.find_child("user")
    pin(
        VirtualEnvironmentUser(
            stack, "second", user_id="two@pve", comment="%{ for k in [1] }x%{ endfor } " + user.user_id
        ),
        "two",
    )
    errors = synth_errors(app)
    assert (
        "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.two comment: '%{ for k in [1] }x%{ endfor } "
        "${TfToken[TOKEN." in errors
    )
    assert "holds '%{'" in errors


def test_tv007_directive_inside_a_function_argument(app):
    from cdktf import Fn

    _user_stack(app, comment=Fn.file("/tmp/%{ if true }x%{ endif }"))
    errors = synth_errors(app)
    assert (
        "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops comment: "
        "'${file(\"/tmp/%{ if true }x%{ endif }\")}' holds '%{'"
    ) in errors


def test_tv007_in_a_map_key(app):
    stack = TerraformStack(app, "keys")
    from cdktf import TerraformOutput

    pin(TerraformOutput(stack, "out", value={ENVIRON: "x"}), "out")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] keys/out output.out.value.${file(" in errors


def test_tv007_in_outputs_with_and_without_tokens(app):
    """An output is judged on its own configuration (read once) and, only when that holds a token, on its resolved
    JSON too: a directive cdktf leaves unescaped inside a function's argument is found either way."""
    from cdktf import Fn, TerraformOutput

    stack = TerraformStack(app, "outs")
    pin(TerraformOutput(stack, "plain", value="100%{ if true }x%{ endif }"), "plain")
    pin(TerraformOutput(stack, "called", value=Fn.file("/tmp/%{ if true }x%{ endif }")), "called")
    pin(TerraformOutput(stack, "fine", value=Fn.file("/tmp/$${x}")), "fine")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] outs/plain output.plain.value: '100%{ if true }x%{ endif }' holds '%{'" in (
        errors
    )
    assert "[TV007 NoTemplateSequences] outs/called output.called.value: " in errors
    assert "'${file(\"/tmp/%{ if true }x%{ endif }\")}' holds '%{'" in errors
    assert errors.count("[TV007") == 2


def test_tv007_escaped_sequences_references_and_variable_defaults_pass(app, tmp_path):
    from cdktf import Fn, TerraformVariable

    stack = _user_stack(app, comment="cost $${x} and 100%%{y}", email=Fn.file("/tmp/$${not-a-template}"))
    TerraformVariable(stack, "path", type="string", default=ENVIRON)  # Terraform reads defaults literally
    user = stack.node.find_child("user")
    pin(VirtualEnvironmentUser(stack, "second", user_id="two@pve", comment=user.user_id), "two")
    app.synth()


def test_tv007_text_beside_a_reference_forms_no_sequence_across_it(app):
    """`100%` + a reference + `{x}` is written `100%${…}{x}`: Terraform reads a `%`, an interpolation and `{x}`,
    no directive; `cost $` + a reference is written `cost $${…}`, an escape Terraform reads literally."""
    stack = _user_stack(app)
    user = stack.node.find_child("user")
    pin(VirtualEnvironmentUser(stack, "pct", user_id="a@pve", comment="100%" + user.user_id + "{x}"), "pct")
    pin(VirtualEnvironmentUser(stack, "dollar", user_id="b@pve", comment="cost $" + user.user_id + "{x}"), "dollar")
    app.synth()
    users = json.loads((Path(app.outdir) / "stacks" / "users" / "cdk.tf.json").read_text())["resource"][
        "proxmox_virtual_environment_user"
    ]
    assert users["pct"]["comment"] == "100%${proxmox_virtual_environment_user.ops.user_id}{x}"
    assert users["dollar"]["comment"] == "cost $${proxmox_virtual_environment_user.ops.user_id}{x}"


def test_tv007_node_built_from_props_without_the_site_model(app, example_site):
    """A library user builds a Node without validating it (model_construct): the label reaches the node's patch."""
    from terravixens.config.placement import place
    from terravixens.constructs.talos_node import TalosNode, TalosNodeProps

    stack = PlatformStack(app, example_site, layer_named(example_site, "platform-prod"))
    cluster = example_site.clusters["prod"]
    template = cluster.workers["wk-a"]
    node = template.model_construct(**{**dict(template), "vm_id": 1299, "labels": {"pool": ENVIRON}})
    network = node.networks.model_construct(
        vlans={111: node.networks.vlans[111].model_construct(address="10.11.1.29/24")}
    )
    node = node.model_construct(**{**dict(node), "networks": network})
    TalosNode(
        stack,
        "wk-z",
        TalosNodeProps(
            placed=place("wk-z", "worker", node, cluster, example_site.hypervisors["pve1"]),
            cluster=cluster,
            cluster_config=stack.cluster_config,
        ),
    )
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] talos_machine_configuration_apply.node_wk-z_apply config_patches.0: " in errors
    assert "holds '${'" in errors
    assert errors.count("[TV007") == 1  # the other nodes, the cluster and the VM carry none


def test_tv007_text_in_a_block_written_from_python(example_site, tmp_path):
    """In build_app's stacks a node's apply is written from Python (ADR 0057): text there is found, and the error
    goes to the element made for it, at the node."""
    from terravixens.stacks import build_app

    site = example_site.model_copy(deep=True)
    worker = site.clusters["prod"].workers["wk-a"]
    site.clusters["prod"].workers["wk-a"] = worker.model_construct(**{**dict(worker), "labels": {"pool": ENVIRON}})
    errors = synth_errors(build_app(site, str(tmp_path)))
    assert (
        "[platform-prod/wk-a/apply] [TV007 NoTemplateSequences] talos_machine_configuration_apply.node_wk-a_apply "
        "config_patches.0: "
    ) in errors
    assert errors.count("[TV007") == 1


def test_tv007_text_in_an_import_id(app):
    """An import block's id is an expression: Terraform evaluates a template in it at plan time, so text there is
    judged although the resource's own block carries no sequence."""
    stack = _user_stack(app)
    stack.node.find_child("user").import_from(f"ops@pve {ENVIRON}")
    errors = synth_errors(app)
    assert (
        "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops import.0.id: "
        "'ops@pve ${file(\"/proc/self/environ\")}' holds '${', which Terraform would evaluate as a template"
    ) in errors


def test_tv007_a_directive_in_a_function_argument_of_an_import_id(app):
    """cdktf does not escape `%{` inside a function's argument: found in the resolved import block, under its path."""
    from cdktf import Fn

    stack = _user_stack(app)
    stack.node.find_child("user").import_from(Fn.lower("ops@pve %{ if true }x%{ endif }"))
    assert (
        "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops import.0.id: "
        "'${lower(\"ops@pve %{ if true }x%{ endif }\")}' holds '%{'"
    ) in synth_errors(app)


def test_tv007_text_in_a_variable_validation_message(app):
    """A variable's default is read literally, but its validation's error_message is a template Terraform evaluates
    when the condition fails (file() included)."""
    from cdktf import TerraformVariable, TerraformVariableValidationConfig

    stack = _user_stack(app)
    pin(
        TerraformVariable(
            stack,
            "size",
            type="string",
            default="small",
            validation=[
                TerraformVariableValidationConfig(condition='${var.size != ""}', error_message=f"size {ENVIRON}")
            ],
        ),
        "size",
    )
    errors = synth_errors(app)
    assert (
        "[TV007 NoTemplateSequences] users/size variable.size.validation.0.error_message: "
        "'size ${file(\"/proc/self/environ\")}' holds '${', which Terraform would evaluate as a template"
    ) in errors
    directive = App(outdir=str(app.outdir) + "-directive")
    stack = _user_stack(directive)
    message = "size %{ if true }big%{ endif }"
    check = TerraformVariableValidationConfig(condition='${var.size != ""}', error_message=message)
    pin(TerraformVariable(stack, "size", type="string", validation=[check]), "size")
    assert f"users/size variable.size.validation.0.error_message: {message!r} holds '%{{'" in synth_errors(directive)


def test_tv007_a_reference_in_a_variable_validation_message_passes(app):
    from cdktf import TerraformVariable

    stack = _user_stack(app)
    size = pin(TerraformVariable(stack, "size", type="string", default="small"), "size")
    size.add_override(
        "validation",
        [{"condition": '${var.size != ""}', "error_message": f"size {size.string_value} is empty; 100%%{{ok}}"}],
    )
    app.synth()


def test_tv007_a_cross_stack_reference_passes(app):
    """cdktf's own cross-stack remote state reads `${terraform.workspace}` (every backend writes it so): an expression
    cdktf wrote, not text."""
    stack = _user_stack(app)
    consumer = TerraformStack(app, "consumer")
    ProxmoxProvider(consumer, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(
        VirtualEnvironmentUser(consumer, "reader", user_id="reader@pve", comment=stack.node.find_child("user").user_id),
        "reader",
    )
    apply_rules(consumer)
    app.synth()
    document = json.loads((Path(app.outdir) / "stacks" / "consumer" / "cdk.tf.json").read_text())
    assert (
        document["data"]["terraform_remote_state"]["cross-stack-reference-input-users"]["workspace"]
        == "${terraform.workspace}"
    )


@pytest.mark.parametrize("key, value", [("count", 2), ("for_each", {"a": 1, "b": 2}), ("count", True)])
def test_tv002_a_node_machine_counted_or_iterated(app, platform, key, value):
    """One node is one machine: a counted VM is several, and removing one (an index shifts) resets a machine that
    stays."""
    platform.nodes["wk-a"].vm.add_override(key, value)
    errors = synth_errors(app)
    assert (
        f"[TV002 ResetScopedToNode] proxmox_virtual_environment_vm.node_wk-a_vm of node 'wk-a' sets {key} to "
        f"{json.dumps(value)}: one node is one machine"
    ) in errors


def test_tv002_a_node_apply_counted_once_passes(app, platform):
    platform.nodes["wk-a"].apply.add_override("count", 1)
    platform.nodes["wk-b"].apply.add_override("count", 0)
    app.synth()


def test_tv007_text_in_a_stack_level_override(app, platform):
    """A stack-level override is merged into the JSON after every element wrote its block: its text is judged as
    recorded when it was added, on an existing block as on a block it adds whole."""
    platform.add_override("resource.proxmox_virtual_environment_vm.node_cp-a_vm.description", ENVIRON)
    platform.add_override("data.talos_client_configuration.extra", {"cluster_name": f"x {ENVIRON}"})
    errors = synth_errors(app)
    assert (
        "[TV007 NoTemplateSequences] stack 'platform-prod' override "
        "resource.proxmox_virtual_environment_vm.node_cp-a_vm.description: "
        "'${file(\"/proc/self/environ\")}' holds '${'"
    ) in errors
    assert "override data.talos_client_configuration.extra.cluster_name: 'x ${file(" in errors
    assert errors.count("[TV007") == 2


def test_tv007_a_stack_level_override_under_a_secret_key_is_not_shown(app, platform):
    """Each part of the override's path is a key: one that looks secret hides the value, as in a site file."""
    platform.add_override("resource.proxmox_virtual_environment_vm.node_cp-a_vm.key", f"hunter2 {ENVIRON}")
    assert (
        "override resource.proxmox_virtual_environment_vm.node_cp-a_vm.key: (value hidden: the key looks like it "
        "holds a secret) holds '${'"
    ) in synth_errors(app)


def test_tv007_a_reference_or_an_escape_in_a_stack_level_override_passes(app):
    stack = _user_stack(app)
    user = stack.node.find_child("user")
    stack.add_override("resource.proxmox_virtual_environment_user.ops.comment", user.user_id)
    stack.add_override("resource.proxmox_virtual_environment_user.ops.email", "cost $${x} and 100%%{y}")
    app.synth()


def test_tv007_a_stack_level_override_it_did_not_see_being_added(app):
    """An override added where terravixens.rules cannot record it (from a construct library written in TypeScript,
    or in Python before the stack recorded its overrides) cannot be judged: the rule says so instead of passing it."""
    import jsii

    stack = _user_stack(app)
    jsii.invoke(stack, "addOverride", ["resource.proxmox_virtual_environment_user.ops.comment", ENVIRON])
    errors = synth_errors(app)
    assert (
        "[TV007 NoTemplateSequences] stack 'users' has stack-level overrides under 'resource' that were not "
        "added through stack.add_override once the stack recorded them: their text cannot be told from "
        "references. Add them after apply_rules(stack) (a terravixens stack records from its creation), or set "
        "them on the element (element.add_override)."
    ) in errors
    other = App(outdir=str(app.outdir) + "-two")
    stack = _user_stack(other)
    jsii.invoke(stack, "addOverride", ["resource.proxmox_virtual_environment_user.ops.comment", "x"])
    jsii.invoke(stack, "addOverride", ["locals.l", "x"])
    assert "has stack-level overrides under 'resource', 'locals' that were not" in synth_errors(other)


def test_tv002_a_reset_capable_block_added_by_a_stack_level_override(app, platform):
    platform.add_override("resource.proxmox_virtual_environment_vm.stray", {"node_name": "pve1"})
    errors = synth_errors(app)
    assert (
        "[TV002 ResetScopedToNode] proxmox_virtual_environment_vm.stray is not inside a TalosNode, StandaloneVm "
        "or StandaloneContainer (it has no construct path: a stack-level override wrote it): create it through "
        "one of them"
    ) in errors


def test_tv002_a_construct_path_written_by_a_stack_level_override(app, platform):
    """The construct path the rules attribute a block by is JSON metadata: a stack-level override can write it (a
    block copied from a cdk.tf.json carries one). It does not make a stray VM part of a node."""
    pin(VirtualEnvironmentVm(platform, "stray_vm", node_name="pve1"), "node_wk-a_extra")
    platform.add_override(
        "resource.proxmox_virtual_environment_vm.node_wk-a_extra.//.metadata.path", "platform-prod/wk-a/vm"
    )
    platform.add_override(
        "resource.proxmox_virtual_environment_vm.node_wk-b_copy",
        {"//": {"metadata": {"path": "platform-prod/wk-b/vm", "uniqueId": "node_wk-b_copy"}}, "node_name": "pve1"},
    )
    errors = synth_errors(app)
    for logical in ("node_wk-a_extra", "node_wk-b_copy"):
        assert (
            f"[TV002 ResetScopedToNode] proxmox_virtual_environment_vm.{logical} is not inside a TalosNode, "
            f"StandaloneVm or StandaloneContainer (it has no construct path: a stack-level override wrote it): "
            f"create it through one of them"
        ) in errors


def test_blocks_written_as_lists_by_a_stack_level_override(app, platform):
    """Terraform's JSON takes a block as a list of objects too (hcl2json writes blocks so): a block written so is
    read like any other, not skipped."""
    platform.add_override("resource.proxmox_virtual_environment_vm.stray", [{"node_name": "pve1"}])
    platform.add_override("resource.talos_machine_bootstrap.again", [{"node": "127.0.0.1"}])
    errors = synth_errors(app)
    assert (
        "[TV002 ResetScopedToNode] proxmox_virtual_environment_vm.stray is not inside a TalosNode, StandaloneVm "
        "or StandaloneContainer (it has no construct path: a stack-level override wrote it)"
    ) in errors
    assert "stack 'platform-prod' has 2 bootstraps (again, cluster_bootstrap): keep one per cluster." in errors
    assert "talos_machine_bootstrap.again does not ignore all changes" in errors


def test_a_lifecycle_written_as_a_list_is_read(app, platform):
    """A nested block may be a list of objects in Terraform's JSON too: the rules read lifecycle so as well."""
    platform.nodes["wk-a"].apply.add_override(
        "lifecycle", [{"replace_triggered_by": ["proxmox_virtual_environment_vm.node_wk-b_vm.id"]}]
    )
    platform.cluster_config.secrets.add_override("lifecycle", [{"prevent_destroy": False}])
    platform.control_plane.bootstrap.add_override("lifecycle", [{"ignore_changes": "all"}])
    errors = synth_errors(app)
    assert (
        "[TV002 ResetScopedToNode] talos_machine_configuration_apply.node_wk-a_apply of node 'wk-a' reads "
        "proxmox_virtual_environment_vm.node_wk-b_vm of node 'wk-b'"
    ) in errors
    assert (
        "[TV005 StoragePreventDestroy] talos_machine_secrets.cluster_secrets has no lifecycle prevent_destroy" in errors
    )
    assert "[TV004" not in errors


# ------------------------------------------------------------------------------------------- how the rules run
def test_rules_run_after_every_aspect(app, platform):
    """An Aspect that runs after construction (here: one that lifts prevent_destroy) is judged too: the rules run
    as a stack validation, after all Aspects, on the tree as it will be synthesized."""
    import jsii
    from cdktf import Aspects, IAspect

    @jsii.implements(IAspect)
    class LiftPreventDestroy:
        def visit(self, node):
            if getattr(node, "friendly_unique_id", None) == "cluster_secrets":
                node.add_override("lifecycle.prevent_destroy", False)

    Aspects.of(platform).add(LiftPreventDestroy())
    errors = synth_errors(app)
    assert (
        "[TV005 StoragePreventDestroy] talos_machine_secrets.cluster_secrets has no lifecycle prevent_destroy"
    ) in errors


def test_rules_in_an_app_that_skips_validations(tmp_path):
    """The rules run as a stack validation: an App built with skip_validation=True would skip them all, silently.
    Synth fails instead (error annotations stop synth whether validations run or not)."""
    app = App(outdir=str(tmp_path), skip_validation=True)
    stack = TerraformStack(app, "bare")
    TalosProvider(stack, "talos")
    pin(MachineSecrets(stack, "secrets"), "cluster_secrets")
    apply_rules(stack)
    errors = synth_errors(app)
    assert (
        "[bare] terravixens' safety rules (TV001-TV007) run as a validation of stack 'bare', and its App skips "
        "validations (skip_validation=True), so none would run: build the App without skip_validation."
    ) in errors


def test_a_rule_alone_is_an_aspect(app):
    """Library users may attach one rule as an Aspect instead of all of them with apply_rules."""
    from cdktf import Aspects
    from constructs import Construct

    from terravixens.rules import StableLogicalIds

    stack = TerraformStack(app, "one_rule")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    VirtualEnvironmentUser(Construct(stack, "team"), "user", user_id="ops@pve")
    Aspects.of(stack).add(StableLogicalIds())
    errors = synth_errors(app)
    assert "[TV003 StableLogicalIds] 'team_user_" in errors and "is cdktf's path-derived id" in errors
    assert "below its stack" not in errors  # attached to the stack: what it visits below it is judged, not refused


def test_a_rule_alone_in_an_app_that_skips_validations_is_refused_once_per_stack(tmp_path):
    """One rule as an Aspect (not apply_rules) in an App that skips validations: synth fails, naming the rule, and
    the rule registers itself on a stack once, however often the App synthesizes (cdktf visits it each time)."""
    from cdktf import Aspects

    from terravixens.rules import StableLogicalIds

    app = App(outdir=str(tmp_path), skip_validation=True)
    stack = TerraformStack(app, "one_rule")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    Aspects.of(stack).add(StableLogicalIds())
    refusal = (
        "[one_rule] rule TV003 StableLogicalIds run as a validation of stack 'one_rule', and its App skips "
        "validations (skip_validation=True), so it would not run: build the App without skip_validation."
    )
    assert synth_errors(app).count(refusal) == 1
    assert synth_errors(app).count(refusal) == 1


def test_a_rule_alone_judges_what_other_aspects_did(app):
    """An Aspect visits the stack before any construct in it: a rule attached alone still judges the finished tree,
    after the Aspects that change elements (lift prevent_destroy) or add them (a stray VM) below the stack."""
    import jsii
    from cdktf import Aspects, IAspect, TerraformResourceLifecycle

    from terravixens.rules import ResetScopedToNode, StoragePreventDestroy

    @jsii.implements(IAspect)
    class LiftPreventDestroyAndAddAVm:
        def visit(self, node):
            if getattr(node, "friendly_unique_id", None) == "cluster_secrets":
                node.add_override("lifecycle.prevent_destroy", False)
                pin(VirtualEnvironmentVm(node, "stray", node_name="pve1"), "stray_vm")

    stack = TerraformStack(app, "bare")
    TalosProvider(stack, "talos")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(MachineSecrets(stack, "secrets", lifecycle=TerraformResourceLifecycle(prevent_destroy=True)), "cluster_secrets")
    Aspects.of(stack).add(StoragePreventDestroy())
    Aspects.of(stack).add(ResetScopedToNode())
    Aspects.of(stack).add(LiftPreventDestroyAndAddAVm())
    errors = synth_errors(app)
    assert (
        "[TV005 StoragePreventDestroy] talos_machine_secrets.cluster_secrets has no lifecycle prevent_destroy: "
        "set it, or keep this resource outside terravixens' stacks."
    ) in errors
    assert "[TV002 ResetScopedToNode] proxmox_virtual_environment_vm.stray_vm is not inside a TalosNode" in errors


def test_a_rule_alone_below_a_stack_is_refused(app):
    """A rule judges a whole stack: attached to a construct below one, it would judge nothing (cdktf never shows it
    the stack), so synth fails and says where to attach it."""
    from cdktf import Aspects
    from constructs import Construct

    from terravixens.rules import StableLogicalIds

    stack = TerraformStack(app, "one_rule")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    team = Construct(stack, "team")
    VirtualEnvironmentUser(team, "user", user_id="ops@pve")
    Aspects.of(team).add(StableLogicalIds())
    errors = synth_errors(app)
    assert (
        "[TV003 StableLogicalIds] the rule is attached as an Aspect to 'one_rule/team', below its stack, where it "
        "judges nothing: attach it to the stack (Aspects.of(stack).add(...)) or call "
        "terravixens.rules.apply_rules(stack)."
    ) in errors
    assert errors.count("below its stack") == 1  # once, at the construct it is attached to, not at each below it


def test_tv007_two_elements_under_one_address_are_each_judged(app):
    """cdktf merges two resources pinned to one logical id into one block: the text of either is still found."""
    stack = _user_stack(app)
    pin(VirtualEnvironmentUser(stack, "twin", user_id="ops@pve", comment=f"twin {ENVIRON}"), "ops")
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops comment: 'twin ${file(" in errors


def test_tv007_two_elements_under_one_address_in_a_stack_with_a_remote_state(app):
    """A remote state writes a block no element of the stack's resources wrote (gitops stacks hold one): the twins
    cdktf merges are still each judged, the first one's text included (the merged block names the second)."""
    from cdktf import DataTerraformRemoteStateLocal

    stack = TerraformStack(app, "users")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    DataTerraformRemoteStateLocal(stack, "platform", path="platform.tfstate")
    pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve", comment=f"first {ENVIRON}"), "ops")
    pin(VirtualEnvironmentUser(stack, "twin", user_id="ops@pve"), "ops")
    apply_rules(stack)
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops comment: 'first ${file(" in errors


def test_tv007_two_elements_under_one_address_beside_a_block_a_stack_override_added(app):
    stack = _user_stack(app, comment=f"first {ENVIRON}")
    pin(VirtualEnvironmentUser(stack, "twin", user_id="ops@pve"), "ops")
    stack.add_override("resource.proxmox_virtual_environment_user.other", {"user_id": "other@pve"})
    errors = synth_errors(app)
    assert "[TV007 NoTemplateSequences] proxmox_virtual_environment_user.ops comment: 'first ${file(" in errors


def test_rules_do_not_rely_on_assert():
    """cdktf.json runs the app under `python -O`, which drops assert statements: no code of terravixens uses one."""
    import ast

    root = Path(__file__).resolve().parent.parent / "terravixens"
    found = [
        f"{path.relative_to(root.parent)}:{node.lineno}"
        for path in sorted(root.rglob("*.py"))
        if "_bindings" not in path.relative_to(root).parts  # generated by cdktf get, not ours
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert found == []


def test_a_rule_fails_synth_under_python_O(tmp_path):
    """What `cdktf synth` runs (python -O, cdktf.json): a broken rule still stops synth with its message."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    app_command = json.loads((root / "cdktf.json").read_text())["app"].split()
    assert "-O" in app_command
    program = (
        "from cdktf import App, TerraformStack\n"
        "from terravixens._bindings.talos.machine_secrets import MachineSecrets\n"
        "from terravixens._bindings.talos.provider import TalosProvider\n"
        "from terravixens.logical_ids import pin\n"
        "from terravixens.rules import apply_rules\n"
        f"app = App(outdir={str(tmp_path)!r})\n"
        "stack = TerraformStack(app, 'bare')\n"
        "TalosProvider(stack, 'talos')\n"
        "pin(MachineSecrets(stack, 'secrets'), 'cluster_secrets')\n"
        "apply_rules(stack)\n"
        "app.synth()\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        [sys.executable, "-O", "-c", program], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode != 0
    assert (
        "[TV005 StoragePreventDestroy] talos_machine_secrets.cluster_secrets has no lifecycle prevent_destroy"
        in result.stderr
    )
