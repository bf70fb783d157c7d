"""Stack-level overrides are recorded per stack, asked for explicitly (terravixens.rules.overrides.record): importing
terravixens patches nothing of cdktf, and what TV007 sees does not depend on which module was imported first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cdktf import App, TerraformStack

from terravixens._bindings.proxmox.provider import ProxmoxProvider
from terravixens._bindings.proxmox.virtual_environment_user import VirtualEnvironmentUser
from terravixens.logical_ids import pin
from terravixens.rules import apply_rules, overrides
from terravixens.stacks import build_app

ROOT = Path(__file__).resolve().parent.parent
ENVIRON = '${file("/proc/self/environ")}'

# A user's stack, its override added after apply_rules; the imports in the order each case gives.
PROGRAM = """
import sys
{first}
{second}
app = App(outdir=sys.argv[1])
stack = TerraformStack(app, "users")
ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve"), "ops")
apply_rules(stack)
stack.add_override("resource.proxmox_virtual_environment_user.ops.comment", '${{file("/proc/self/environ")}}')
try:
    app.synth()
except RuntimeError as error:
    print(error)
    sys.exit(1)
"""
CDKTF = (
    "from cdktf import App, TerraformStack\n"
    "from terravixens._bindings.proxmox.provider import ProxmoxProvider\n"
    "from terravixens._bindings.proxmox.virtual_environment_user import VirtualEnvironmentUser"
)
TERRAVIXENS = "from terravixens.logical_ids import pin\nfrom terravixens.rules import apply_rules"


def test_importing_terravixens_patches_nothing_of_cdktf():
    """The rules and the stacks are imported here (this module): cdktf's method is still cdktf's own."""
    assert TerraformStack.add_override.__module__ == "cdktf"
    assert TerraformStack.add_override.__qualname__ == "TerraformStack.add_override"


@pytest.mark.parametrize("order", ["cdktf first", "terravixens first"])
def test_import_order_does_not_matter(order, tmp_path):
    first, second = (CDKTF, TERRAVIXENS) if order == "cdktf first" else (TERRAVIXENS, CDKTF)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(first=first, second=second), str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "[TV007 NoTemplateSequences] stack 'users' override "
        "resource.proxmox_virtual_environment_user.ops.comment: '${file(\"/proc/self/environ\")}' holds '${'"
        in result.stdout
    ), result.stdout + result.stderr
    assert "were not added through stack.add_override" not in result.stdout


def test_a_terravixens_stack_records_from_its_creation(example_site, tmp_path):
    """No apply_rules call of the user's: the stack base class asked for the record before building the layer."""
    app = build_app(example_site, str(tmp_path))
    stack = app.node.find_child("hypervisors")
    stack.add_override("resource.proxmox_virtual_environment_network_linux_bridge.extra", {"comment": ENVIRON})
    assert overrides.stack_overrides(stack) == [
        ("resource.proxmox_virtual_environment_network_linux_bridge.extra", {"comment": ENVIRON})
    ]


def test_an_override_added_before_the_stack_records_is_refused_not_passed(tmp_path):
    """A plain stack records from apply_rules on: an earlier override is listed in the JSON without a record, and
    TV007 says how to add it instead of judging text it cannot tell from references."""
    app = App(outdir=str(tmp_path))
    stack = TerraformStack(app, "users")
    ProxmoxProvider(stack, "proxmox", endpoint="https://127.0.0.1:8006/")
    pin(VirtualEnvironmentUser(stack, "user", user_id="ops@pve"), "ops")
    stack.add_override("resource.proxmox_virtual_environment_user.ops.comment", "plain text")
    apply_rules(stack)
    assert overrides.stack_overrides(stack) == []
    with pytest.raises(RuntimeError) as raised:
        app.synth()
    assert (
        "stack 'users' has stack-level overrides under 'resource' that were not added through "
        "stack.add_override once the stack recorded them"
    ) in str(raised.value)


def test_recording_twice_records_each_override_once(tmp_path):
    stack = TerraformStack(App(outdir=str(tmp_path)), "users")
    overrides.record(stack)
    overrides.record(stack)
    apply_rules(stack)
    stack.add_override("terraform.required_version", ">= 1.5")
    assert overrides.stack_overrides(stack) == [("terraform.required_version", ">= 1.5")]
    assert stack.to_terraform()["terraform"]["required_version"] == ">= 1.5"
