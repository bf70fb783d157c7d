"""Every cloud-init document the L2 stacks render passes the real `cloud-init schema` (Debian's cloud-init,
unpacked by `make setup-test`: tools/cloud-init/install.sh); what its first boot runs is tests/test_first_boot.py.

The stacks render the vendor data at apply time with Terraform's format(); render_cloud_config is that format in
Python, held to the synthesized stack here and to Terraform's own rendering by tests/integration/test_standalone.py
(which validates what the fake Proxmox VE received, too).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from terravixens.standalone.node_env import (
    FIRST_BOOT,
    FIRST_BOOT_SCRIPT,
    cloud_config_format,
    first_boot_source,
    render_cloud_config,
)
from terravixens.standalone.resolve import load_standalone
from tests import spec_support
from tests.cloud_init_tool import cloud_init_schema

SNAPSHOTS = Path(__file__).resolve().parent / "__snapshots__" / "test_standalone_stacks"


def test_the_validator_refuses_what_is_wrong(tmp_path):
    """The validator can fail: a runcmd that is not a list and an unknown write_files key are errors."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("#cloud-config\nwrite_files:\n  - path: /x\n    mode: '0600'\nruncmd: 5\n")
    ran = cloud_init_schema(bad)
    assert ran.returncode == 1
    assert "runcmd: 5 is not of type 'array'" in ran.stdout + ran.stderr
    assert "'mode' was unexpected" in ran.stdout + ran.stderr


def test_every_vm_and_nested_host_vendor_data_passes_cloud_init_schema(tmp_path):
    standalone = load_standalone(spec_support.SITE, spec_support.write_secrets(tmp_path / "secrets.yaml"))
    assert standalone.site.standalone.spec_server is not None
    server = standalone.site.standalone.spec_server.url
    tokens = {"nest1": spec_support.NODE_TOKENS["nest1"], "jump1": spec_support.SITE_TOKEN, "tools": None}
    nodes = [name for name, node in standalone.nodes.items() if node.placed.type in ("vm", "pve")]
    assert sorted(nodes) == sorted(tokens)
    for node in nodes:
        path = tmp_path / f"terravixens-{node}.yaml"
        path.write_text(render_cloud_config(server, node, tokens[node], "ab" * 32))
        ran = cloud_init_schema(path)
        assert ran.returncode == 0 and "Valid cloud-config" in ran.stdout, (node, ran.stdout, ran.stderr)
        document = yaml.safe_load(path.read_text())
        assert document["runcmd"] == [FIRST_BOOT]
        bootstrap = document["write_files"][1]
        assert (bootstrap["path"], bootstrap["permissions"]) == (FIRST_BOOT_SCRIPT, "0700")
        assert bootstrap["content"] == first_boot_source()  # byte for byte through YAML
        assert f"TERRAVIXENS_AGENT_SHA256={'ab' * 32}\n" in document["write_files"][0]["content"]


def test_the_stacks_render_that_format():
    """The synthesized snippets are format(CLOUD_CONFIG_FORMAT, …) (the L2 snapshots, themselves held to synth by
    tests/test_standalone_stacks.py): render_cloud_config is what Terraform writes."""
    data = []
    for path in SNAPSHOTS.glob("test_l2_stack_snapshot*.json"):
        for resource in json.loads(path.read_text())["resource"]["proxmox_virtual_environment_file"].values():
            data.append(resource["source_raw"]["data"])
    cloud_configs = [text for text in data if "#cloud-config" in text]
    assert len(cloud_configs) == 3
    assert all(
        text.startswith("${format(" + json.dumps(cloud_config_format(), ensure_ascii=False) + ", jsonencode(")
        for text in cloud_configs
    )
