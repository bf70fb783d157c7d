"""Running Terraform in cdktf.out/stacks/<stack>/: the binary is $TERRAFORM_BINARY_NAME (else `terraform`), and the
user's environment is passed through, plus what the provider installation mode asks for (nothing for the registry,
the default; the offline mirror's CLI config with TERRAVIXENS_PROVIDERS=mirror — terravixens.provider_install). Machine-readable output (`-json`) is read line by line, so progress is shown as it
happens and the plan's diagnostics are kept for the guard.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from terravixens import provider_install
from terravixens.operations.outcome import ExitCode, OperationError

TAIL_LINES = 25


def terraform_binary() -> str:
    return os.environ.get("TERRAFORM_BINARY_NAME") or "terraform"


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    messages: list[dict] = field(default_factory=list)

    def tail(self) -> str:
        lines = [line for line in (self.stderr + "\n" + self.stdout).splitlines() if line.strip()]
        if self.messages:
            lines = [m.get("@message", "") for m in self.messages if m.get("@level") == "error"] or lines
        return "\n".join(lines[-TAIL_LINES:])

    def diagnostics(self, severity: str | None = None) -> list[dict]:
        return [m["diagnostic"] for m in self.messages if isinstance(m.get("diagnostic"), dict)
                and (severity is None or m["diagnostic"].get("severity") == severity)]


@dataclass
class Terraform:
    """`env` is added to the process environment (tests point it at a fake Proxmox VE); nothing is removed.
    `layer_env` adds more for one layer only (keyed by the layer, the name of its working directory): the L2
    layers' apply-time tokens (terravixens.standalone.tokens), so no layer ever sees another layer's."""

    binary: str = field(default_factory=terraform_binary)
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 6 * 3600
    layer_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def environment(self, workdir: Path | None = None) -> dict[str, str]:
        try:
            env = provider_install.terraform_env()
        except provider_install.ProviderModeError as error:
            raise OperationError(str(error), ExitCode.BAD_INPUT) from None
        env["TF_IN_AUTOMATION"] = "1"
        env.update(self.env)
        if workdir is not None:
            env.update(self.layer_env.get(Path(workdir).name, {}))
        return env

    def _command(self, args: Sequence[str]) -> list[str]:
        return [self.binary, *args]

    def run(self, workdir: Path, *args: str) -> Result:
        try:
            done = subprocess.run(self._command(args), cwd=workdir, env=self.environment(workdir), capture_output=True,
                                  text=True, timeout=self.timeout, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise OperationError(f"{self.binary}: not found; install Terraform >= 1.11 or set TERRAFORM_BINARY_NAME",
                                 ExitCode.TERRAFORM_FAILED) from None
        return Result(done.returncode, done.stdout, done.stderr)

    def run_json(self, workdir: Path, *args: str, on_message: Callable[[dict], None] | None = None) -> Result:
        """Runs with `-json` and hands each UI message to `on_message` as it arrives."""
        try:
            process = subprocess.Popen(self._command([args[0], "-json", *args[1:]]), cwd=workdir, env=self.environment(workdir),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise OperationError(f"{self.binary}: not found; install Terraform >= 1.11 or set TERRAFORM_BINARY_NAME",
                                 ExitCode.TERRAFORM_FAILED) from None
        messages, other = [], []
        for line in process.stdout or ():  # stdout=PIPE: never None
            try:
                message = json.loads(line)
            except ValueError:
                other.append(line)
                continue
            if not isinstance(message, dict):
                continue
            if message.get("type") in ("diagnostic", "change_summary", "planned_change", "apply_complete",
                                       "apply_errored", "resource_drift"):
                messages.append(message)
            if on_message is not None:
                on_message(message)
        stderr = process.stderr.read() if process.stderr else ""
        returncode = process.wait(timeout=self.timeout)
        return Result(returncode, "".join(other), stderr, messages)

    def check(self, result: Result, step: str, layer: str) -> Result:
        if result.returncode != 0:
            raise OperationError(f"{layer}: terraform {step} failed (exit {result.returncode}):\n{result.tail()}",
                                 ExitCode.FAILED)
        return result

    def init(self, workdir: Path, layer: str) -> None:
        self.check(self.run(workdir, "init", "-input=false", "-no-color"), "init", layer)
