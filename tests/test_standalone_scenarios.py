"""L2 lifecycle scenarios: each change touches exactly the Terraform addresses (and apply-time inputs) it must.

Synth side: the site before and after one change, full app.synth(), exact added/removed/changed addresses per stack
(terravixens.stackdiff). Apply-time side: what `terravixens deploy` hands each L2 layer (TF_VAR_node_tokens, from
the secrets file and the specs' postures). A spec edit, a token rotation and a posture change change no address at
all: the posture and the token are not in the synthesized JSON (ADR 0026); they change one node's entry of one
layer's token map, which real Terraform turns into the replacement of that node's snippet file only — proven
against the fake Proxmox VE in tests/integration/test_standalone.py.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from terravixens.agent.bundle import built
from terravixens.conformance import check_stack, load_schemas
from terravixens.operations.standalone_env import AGENT_SHA256_ENV, layer_env
from terravixens.stackdiff import diff
from terravixens.standalone.resolve import load_standalone
from terravixens.standalone.tokens import TOKENS_ENV, TokensUnavailable, layer_variables, node_tokens
from tests import support
from tests.scenario_support import assert_changes
from tests.spec_support import NODE_TOKENS, SITE, SITE_TOKEN, secrets_data, standalone_copy, write_secrets

S, N = "standalone", "standalone-nest1"
SCHEMAS = load_schemas()


def vm(name: str) -> str:
    return f"proxmox_virtual_environment_vm.sa_{name}_vm"


def ct(name: str) -> str:
    return f"proxmox_virtual_environment_container.sa_{name}_ct"


def env(name: str) -> str:
    return f"proxmox_virtual_environment_file.sa_{name}_node_env"


def base() -> dict:
    return yaml.safe_load(SITE.read_text())


def nodes(data: dict) -> dict:
    return data["standalone"]["nodes"]


def run(before: dict, change):
    after = copy.deepcopy(before)
    change(after)
    return diff(support.synth(support.site_from(before)), support.synth(support.site_from(after))), after


def new_vm(parent: str, vm_id: int, octet: int, **extra) -> dict:
    return {
        "type": "vm",
        "parent": parent,
        "spec": "tools",
        "image": "local:import/debian-12-genericcloud-amd64.qcow2",
        "vm_id": vm_id,
        "bridge": "vmbr1" if parent == "pve1" else "vmbr0",
        "networks": {"vlans": {111: {"address": f"10.11.1.{octet}/24", "gateway": "10.11.1.1"}}},
        **extra,
    }


def conforms(stacks: dict) -> None:
    """Every L2 stack conforms to the committed proxmox schema, and every provider of it was checked."""
    checked = [check_stack(name, stack, SCHEMAS) for name, stack in stacks.items() if name.startswith(S)]
    assert checked and [str(f) for findings, _ in checked for f in findings] == []
    assert all(unchecked == set() for _, unchecked in checked)


def test_add_a_vm_on_the_hypervisor_adds_only_its_vm_and_snippet():
    result, after = run(base(), lambda d: nodes(d).update(web1=new_vm("pve1", 3003, 80)))
    assert_changes(result, {S: {"added": {vm("web1"), env("web1")}}})
    conforms(support.synth(support.site_from(after)))


def test_add_a_container_under_the_nested_host_adds_only_its_container_and_hookscript():
    def change(d):
        nodes(d)["cache1"] = {
            **copy.deepcopy(nodes(d)["dns1"]),
            "vm_id": 103,
            "networks": {"vlans": {111: {"address": "10.11.1.54/24", "gateway": "10.11.1.1"}}},
        }

    result, after = run(base(), change)
    assert_changes(result, {N: {"added": {ct("cache1"), env("cache1")}}})
    conforms(support.synth(support.site_from(after)))


def test_remove_a_guest_of_the_nested_host_destroys_only_that_guest():
    result, _ = run(base(), lambda d: nodes(d).pop("jump1"))
    assert_changes(result, {N: {"removed": {vm("jump1"), env("jump1")}}})


def test_remove_a_container_destroys_only_the_container_and_its_hookscript():
    result, _ = run(base(), lambda d: nodes(d).pop("dns1"))
    assert_changes(result, {N: {"removed": {ct("dns1"), env("dns1")}}})


def test_remove_the_nested_host_and_its_guests_removes_its_stack_and_only_its_own_vm():
    def change(d):
        for name in ("dns1", "jump1", "nest1"):
            nodes(d).pop(name)

    result, _ = run(base(), change)
    assert_changes(
        result,
        {
            S: {"removed": {vm("nest1"), env("nest1")}},
            N: {"removed": {vm("jump1"), env("jump1"), ct("dns1"), env("dns1")}},
        },
    )


def test_a_new_nested_host_with_a_guest_adds_its_stack_and_its_vm_only():
    def change(d):
        nodes(d)["nest2"] = {
            **copy.deepcopy(nodes(d)["nest1"]),
            "vm_id": 3004,
            "networks": {"vlans": {111: {"address": "10.11.1.90/24", "gateway": "10.11.1.1"}}},
        }
        nodes(d)["lab1"] = new_vm("nest2", 101, 91)

    result, after = run(base(), change)
    assert_changes(
        result, {S: {"added": {vm("nest2"), env("nest2")}}, "standalone-nest2": {"added": {vm("lab1"), env("lab1")}}}
    )
    conforms(support.synth(support.site_from(after)))


def test_resizing_a_vm_changes_only_that_vm():
    result, _ = run(base(), lambda d: nodes(d)["tools"].update(cores=4))
    assert_changes(result, {S: {"changed": {vm("tools")}}})


def test_a_new_image_for_a_running_vm_changes_nothing_terraform_acts_on():
    result, _ = run(base(), lambda d: nodes(d)["jump1"].update(image="local:import/debian-13-genericcloud-amd64.qcow2"))
    assert_changes(result, {})


def test_a_new_spec_server_url_changes_every_snippet_and_no_guest():
    result, _ = run(base(), lambda d: d["standalone"]["spec_server"].update(url="https://specs2.lab.internal:8443"))
    assert_changes(result, {S: {"changed": {env("nest1"), env("tools")}}, N: {"changed": {env("dns1"), env("jump1")}}})


# ------------------------------------------------------------ specs, tokens, postures: no address changes at all


@pytest.fixture
def site_copy(tmp_path):
    return standalone_copy(tmp_path)


def _synth(site_path):
    return support.synth(load_standalone(site_path).site)


def test_editing_a_spec_changes_no_address_and_no_token(site_copy):
    site_path, secrets = site_copy
    before_stacks, before_tokens = _synth(site_path), layer_variables(site_path, secrets)
    spec = site_path.parent / "specs" / "jump.yaml"
    data = yaml.safe_load(spec.read_text())
    data["platform"]["packages"].append("tmux")
    data["access"]["users"]["ops"]["ssh_keys"] = ["alice"]
    spec.write_text(yaml.safe_dump(data))
    assert_changes(diff(before_stacks, _synth(site_path)), {})
    assert layer_variables(site_path, secrets) == before_tokens


def test_rotating_a_node_token_changes_no_address_and_only_that_nodes_token(site_copy):
    site_path, secrets = site_copy
    before_stacks, before = _synth(site_path), layer_variables(site_path, secrets)
    rotated = secrets_data(node_tokens={**NODE_TOKENS, "dns1": "dns1-rotated-" + "7" * 30})
    write_secrets(secrets, rotated)
    after = layer_variables(site_path, secrets)
    assert_changes(diff(before_stacks, _synth(site_path)), {})
    assert after[S] == before[S]
    tokens_before, tokens_after = json.loads(before[N][TOKENS_ENV]), json.loads(after[N][TOKENS_ENV])
    assert {k for k in tokens_before if tokens_before[k] != tokens_after[k]} == {"dns1"}


def test_rotating_the_site_token_changes_only_the_site_token_nodes(site_copy):
    site_path, secrets = site_copy
    before = layer_variables(site_path, secrets)
    write_secrets(secrets, secrets_data(site_token="site-rotated-" + "5" * 30))
    after = layer_variables(site_path, secrets)
    assert after[S] == before[S]  # nest1 (prod) and tools (dev) do not use the site token
    changed = {k for k, v in json.loads(after[N][TOKENS_ENV]).items() if json.loads(before[N][TOKENS_ENV])[k] != v}
    assert changed == {"jump1"}


def test_a_posture_change_changes_no_address_and_only_that_nodes_token(site_copy):
    site_path, secrets = site_copy
    before_stacks, before = _synth(site_path), layer_variables(site_path, secrets)
    spec = site_path.parent / "specs" / "tools.yaml"
    data = yaml.safe_load(spec.read_text())
    data["access"]["posture"] = "stage"  # dev (network) -> stage (site token)
    spec.write_text(yaml.safe_dump(data))
    after = layer_variables(site_path, secrets)
    assert_changes(diff(before_stacks, _synth(site_path)), {})
    assert json.loads(before[S][TOKENS_ENV]) == {"nest1": NODE_TOKENS["nest1"]}
    assert json.loads(after[S][TOKENS_ENV]) == {"nest1": NODE_TOKENS["nest1"], "tools": SITE_TOKEN}
    assert after[N] == before[N]


def test_each_layer_gets_its_own_nodes_tokens_by_posture(site_copy):
    site_path, secrets = site_copy
    variables = layer_variables(site_path, secrets)
    assert {layer: json.loads(value[TOKENS_ENV]) for layer, value in variables.items()} == {
        S: {"nest1": NODE_TOKENS["nest1"]},  # prod; tools is dev: no token
        N: {"dns1": NODE_TOKENS["dns1"], "jump1": SITE_TOKEN},  # dns1 prod, jump1 stage
    }


def test_tokens_without_a_secrets_file_are_refused_naming_the_nodes(site_copy):
    site_path, _ = site_copy
    with pytest.raises(
        TokensUnavailable,
        match=r"standalone nodes dns1, jump1, nest1 have a posture that uses a "
        r"token: give the secrets file \(--secrets FILE or "
        r"\$TERRAVIXENS_SECRETS\)",
    ):
        node_tokens(load_standalone(site_path))


def test_a_site_whose_nodes_all_trust_the_network_needs_no_secrets_file(site_copy):
    site_path, _ = site_copy
    for spec in (site_path.parent / "specs").glob("*.yaml"):
        data = yaml.safe_load(spec.read_text())
        data["access"]["posture"] = "dev"
        spec.write_text(yaml.safe_dump(data))
    assert node_tokens(load_standalone(site_path)) == {}


# --------------------------------------------------------------- the agent bundle a VM's first boot may run


def test_the_agent_bundle_hash_reaches_the_layers_with_vms_at_apply_time_only(site_copy):
    """ADR 0059: the SHA-256 a VM's node.env pins is the installed terravixens' bundle, given to each layer with a
    VM as TF_VAR_agent_bundle_sha256 by `terravixens deploy` — never in the synthesized JSON, so a new terravixens
    changes no address and no snapshot (it replaces the VMs' snippets at deploy: tests/integration/
    test_standalone.py); a layer of containers only gets none and declares none."""
    site_path, secrets = site_copy
    pinned = built()[1]
    variables = layer_env(load_standalone(site_path).site, str(site_path), str(secrets), None)
    assert {layer: value.get(AGENT_SHA256_ENV) for layer, value in variables.items()} == {S: pinned, N: pinned}
    stacks = _synth(site_path)
    assert pinned not in json.dumps(stacks)
    assert all("agent_bundle_sha256" in stacks[layer]["variable"] for layer in (S, N))

    data = yaml.safe_load(site_path.read_text())
    del data["standalone"]["nodes"]["jump1"]  # nest1 keeps one guest, a container
    site_path.write_text(yaml.safe_dump(data, sort_keys=False))
    tokens = {name: token for name, token in NODE_TOKENS.items() if name != "jump1"}
    write_secrets(secrets, secrets_data(node_tokens=tokens))
    variables = layer_env(load_standalone(site_path).site, str(site_path), str(secrets), None)
    assert AGENT_SHA256_ENV not in variables[N] and variables[S][AGENT_SHA256_ENV] == pinned
    assert "agent_bundle_sha256" not in _synth(site_path)[N]["variable"]
