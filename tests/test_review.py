"""`terravixens review`: per stack and node, what a change does, with the nodes the change does not name flagged."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from terravixens.operations import OperationError
from terravixens.operations.review import Row, named_by_change, picture, review_dirs, review_ref, rows
from terravixens.stackdiff import diff
from tests import support
from tests.mermaid import parse

ROOT = Path(__file__).resolve().parent.parent


def synth_dir(data: dict) -> Path:
    outdir = Path(tempfile.mkdtemp(prefix="tv-review-"))
    support.synth(support.site_from(data), outdir)
    return outdir


def test_named_by_change_reads_the_site_documents():
    before = support.example_data()
    after = copy.deepcopy(before)
    after["clusters"]["prod"]["workers"]["wk-a"]["cpu"] = 6
    assert named_by_change(before, after).nodes == {"wk-a"}
    after["hypervisors"]["pve2"]["bridges"]["vmbr1"]["vlans"] = [111]
    named = named_by_change(before, after)
    assert named.hypervisors == {"pve2"} and named.nodes == {"wk-a", "cp-b", "wk-b"}  # nodes on pve2 too
    after["clusters"]["prod"]["kubernetes_version"] = "v1.34.3"
    assert named_by_change(before, after).nodes == {"cp-a", "cp-b", "cp-c", "wk-a", "wk-b"}


def test_review_of_two_directories_lists_addresses_and_attributes():
    before = support.example_data()
    after = copy.deepcopy(before)
    after["clusters"]["prod"]["workers"]["wk-a"]["cpu"] = 6
    old, new = synth_dir(before), synth_dir(after)
    result = review_dirs(old, new)
    assert "| | node wk-a | `proxmox_virtual_environment_vm.node_wk-a_vm` | changed | `cpu.cores` |" in result.text
    assert "### `platform-prod` — 1 changed" in result.text and "hypervisors" not in result.text
    assert "```mermaid" not in result.text  # no site given: no picture
    # with the site `after` was synthesized from: the same review, and the blast radius above the tables
    with_site = review_dirs(old, new, support.site_from(after)).text
    picture_text, tables = with_site.split("```\n\n", 1)
    assert tables == result.text.split("\n\n", 1)[1]
    _, _, classes = parse(picture_text.split("```mermaid\n", 1)[1])
    assert classes["touched"] == {"node_prod_wk_a", "layer_platform_prod"} and "flagged" not in classes


def test_an_address_of_a_node_the_change_does_not_name_is_flagged():
    before = support.example_data()
    after = copy.deepcopy(before)
    after["clusters"]["prod"]["workers"]["wk-a"]["cpu"] = 6
    old, new = support.synth(support.site_from(before)), support.synth(support.site_from(after))
    new["platform-prod"]["resource"]["proxmox_virtual_environment_vm"]["node_cp-a_vm"]["memory"]["dedicated"] = 4096
    found = rows(diff(old, new), named_by_change(before, after))
    assert [(r.owner, r.flagged) for r in found] == [("node cp-a", True), ("node wk-a", False)]
    assert found[0].attributes == ["memory.dedicated"]
    # the blast radius: the touched worker, the flagged control plane and their layer; nothing else marked
    lines = picture(support.site_from(after), found)
    block = "\n".join(lines[lines.index("```mermaid") + 1 : lines.index("```")]) + "\n"
    labels, _, classes = parse(block)
    assert classes["touched"] == {"node_prod_wk_a", "layer_platform_prod"}
    assert classes["flagged"] == {"node_prod_cp_a"}
    plain = set(labels) - classes["touched"] - classes["flagged"]
    assert {"node_prod_cp_b", "node_prod_wk_b", "hv_pve1", "layer_gitops_prod"} <= plain


def test_blast_radius_names_what_the_working_tree_no_longer_has():
    """A removed node is in no picture of the site that removed it: the Markdown says so under the picture."""
    site = support.site_from(support.example_data())
    found = [
        Row("platform-prod", "node wk-c", "proxmox_virtual_environment_vm.node_wk-c_vm", "removed", [], False),
        Row(
            "hypervisors",
            "hypervisor pve1",
            "proxmox_virtual_environment_network_linux_bridge.hv_pve1_bridge_vmbr1",
            "changed",
            ["comment"],
            False,
        ),
        Row("gitops-prod", "cluster", "helm_release.cluster_flux", "changed", ["values"], False),
    ]
    lines = picture(site, found)
    assert lines[-2] == "Not in the working tree's site (removed): node wk-c."
    block = "\n".join(lines[lines.index("```mermaid") + 1 : lines.index("```")]) + "\n"
    _, _, classes = parse(block)
    assert classes["touched"] == {"layer_platform_prod", "hv_pve1", "layer_hypervisors", "layer_gitops_prod"}
    assert "flagged" not in classes


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A throwaway clone of this repository (its committed HEAD), with the working tree's generated bindings."""
    path = tmp_path_factory.mktemp("clone") / "repo"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(ROOT), str(path)], check=True, timeout=120)
    (path / "terravixens" / "_bindings").symlink_to(ROOT / "terravixens" / "_bindings")
    return path


def test_review_against_a_git_ref_in_a_clone(clone):
    site = clone / "sites" / "example.yaml"
    data = support.example_data()
    data["clusters"]["prod"]["workers"]["wk-c"] = copy.deepcopy(data["clusters"]["prod"]["workers"]["wk-b"]) | {
        "vm_id": 1203,
        "networks": {"vlans": {111: {"address": "10.11.1.23/24", "gateway": "10.11.1.1"}}},
    }
    site.write_text(json.dumps(data))  # YAML is a superset of JSON
    status = subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True, text=True).stdout
    result = review_ref(clone, "HEAD", "sites/example.yaml")
    assert "The change names: nodes wk-c." in result.text
    assert "| | node wk-c | `proxmox_virtual_environment_vm.node_wk-c_vm` | added |  |" in result.text
    assert "| | node wk-c | `talos_machine_configuration_apply.node_wk-c_apply` | added |  |" in result.text
    assert result.flagged == 0 and "⚠" not in result.text
    # the added node and its layer, in the working tree's picture
    _, _, classes = parse(result.text.split("```mermaid\n", 1)[1].split("```", 1)[0])
    assert (
        classes["touched"] >= {"node_prod_wk_c", "layer_platform_prod"} and "node_prod_wk_b" not in classes["touched"]
    )
    # The working tree is left as it was, and the temporary worktree is gone.
    assert (
        subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True, text=True).stdout
        == status
    )
    listed = subprocess.run(["git", "-C", str(clone), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1


def test_review_of_an_unknown_ref_is_bad_input(clone):
    with pytest.raises(OperationError) as caught:
        review_ref(clone, "no-such-ref", "sites/example.yaml")
    assert caught.value.code == 2 and "sites/example.yaml is not tracked at no-such-ref" in str(caught.value)


def test_git_environment_is_not_needed_beyond_git(clone):
    assert os.access(clone / "terravixens" / "_bindings", os.R_OK)


def test_a_change_flows_through_a_reference_nested_in_an_expression():
    """cdktf renders a reference inside a function call without a `${` of its own: a node whose apply reads a changed
    data source through `lower(…)` is changed too, as Terraform's plan would show it."""
    from terravixens.stackdiff import diff_stack

    worker_input = "${lower(data.talos_machine_configuration.worker.machine_configuration)}"

    def stack(version: str) -> dict:
        return {
            "data": {"talos_machine_configuration": {"worker": {"kubernetes_version": version}}},
            "resource": {
                "talos_machine_configuration_apply": {
                    "node_wk-a_apply": {"machine_configuration_input": worker_input},
                    "node_wk-b_apply": {"machine_configuration_input": "${var.unrelated}"},
                }
            },
        }

    changes = diff_stack(stack("1.34.2"), stack("1.35.0"))
    assert changes.changed == {
        "data.talos_machine_configuration.worker",
        "talos_machine_configuration_apply.node_wk-a_apply",
    }
    assert changes.attributes["talos_machine_configuration_apply.node_wk-a_apply"] == [
        "(reads data.talos_machine_configuration.worker)"
    ]
