"""The two Proxmox-bearing stacks (their projection onto the mirrored providers) in work directories with local
state, driven by the real Terraform CLI against the fake Proxmox VE (tests/integration/test_fakepve.py,
tests/integration/test_storage_fakepve.py)."""

from __future__ import annotations

import json
from pathlib import Path

from terravixens.guard import check_plan
from tests import support
from tests.fakepve_ext import FakePveServer
from tests.loopback import assert_only_loopback
from tests.terraform import mirrored_providers, projection, terraform

HOST = "127.0.0.42"


class Deployment:
    """The two Proxmox-bearing stacks in work directories with local state, driven by the real CLI."""

    STACKS = ("hypervisors", "platform-prod")

    def __init__(self, binary: str, fake: FakePveServer, root: Path):
        self.binary, self.fake, self.root = binary, fake, root
        self.last_plan: dict[str, dict] = {}

    def write(self, data: dict) -> None:
        stacks = support.synth(support.site_from(data))
        for name in self.STACKS:
            document, _ = projection(stacks[name], mirrored_providers())
            document["terraform"]["backend"] = {"local": {"path": "terraform.tfstate"}}
            assert_only_loopback(document)
            workdir = self.root / name
            workdir.mkdir(exist_ok=True)
            (workdir / "cdk.tf.json").write_text(json.dumps(document, indent=1))

    def tf(self, stack: str, *args: str):
        return terraform(self.binary, self.root / stack, *args, "-no-color", **self.fake.provider_env())

    def init(self) -> None:
        for name in self.STACKS:
            result = terraform(self.binary, self.root / name, "init", "-input=false", "-no-color")
            assert result.returncode == 0, result.stdout + result.stderr

    def plan(self, stack: str) -> dict[str, list[str]]:
        """Address -> actions of every resource the plan would change (no-ops left out)."""
        result = self.tf(stack, "plan", "-input=false", "-out=plan.bin")
        assert result.returncode == 0, result.stdout + result.stderr
        shown = self.tf(stack, "show", "-json", "plan.bin")
        self.last_plan[stack] = json.loads(shown.stdout)
        changes = self.last_plan[stack].get("resource_changes", [])
        return {c["address"]: c["change"]["actions"] for c in changes if c["change"]["actions"] != ["no-op"]}

    def apply(self, stack: str):
        return self.tf(stack, "apply", "-input=false", "-auto-approve")

    def converged(self, stack: str) -> bool:
        return self.tf(stack, "plan", "-input=false", "-detailed-exitcode").returncode == 0

    def state(self, stack: str) -> list[str]:
        return self.tf(stack, "state", "list").stdout.split()

    def reset(self, data: dict) -> None:
        """Back to `data`, whatever an earlier test applied."""
        self.write(data)
        for stack in self.STACKS:
            result = self.apply(stack)
            assert result.returncode == 0, result.stdout + result.stderr

    def change(self, data: dict, expected: dict[str, dict[str, list[str]]]) -> None:
        """Plans `data`, checks the exact changes per stack, applies them and checks convergence."""
        self.write(data)
        for stack in self.STACKS:
            assert self.plan(stack) == expected.get(stack, {}), stack
            assert check_plan(self.last_plan[stack]) == [], stack  # the plan guard lets every step through
            result = self.apply(stack)
            assert result.returncode == 0, result.stdout + result.stderr
            assert self.converged(stack), stack
