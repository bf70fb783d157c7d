"""Running Terraform in cdktf.out/stacks/<stack>/: the binary is $TERRAFORM_BINARY_NAME (else `terraform`), and the
user's environment is passed through, plus what the provider installation mode asks for (nothing for the registry,
the default; the offline mirror's CLI config with TERRAVIXENS_PROVIDERS=mirror — terravixens.provider_install).
Machine-readable output (`-json`) is read line by line, so progress is shown as it happens and the plan's diagnostics
are kept for the guard.

Every call goes through the one bounded runner (terravixens.runner): a deadline per call
($TERRAVIXENS_TERRAFORM_TIMEOUT, default 6h: an apply that creates many VMs is slow, one that never ends is a stop),
Terraform and its provider plugins ended together at the deadline, SIGTERM first so Terraform can write its state.
A missing binary or a hung call stops the operation with the command named (exit 4); an interrupt propagates once
Terraform is stopped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from terravixens import provider_install, runner
from terravixens.exitcodes import ExitCode
from terravixens.operations.outcome import OperationError
from terravixens.state_files import tighten_backend_state

TAIL_LINES = 25
# `terraform output` on a state without any output (a layer never applied, or destroyed): Terraform 1.11 prints this
# warning on stdout, in colour, and exits 0 — it is not the output's value.
NO_OUTPUTS = "Warning: No outputs found"
# `terraform state list` where the local backend's state file does not exist yet: exit 1 and this on stderr (1.11).
NO_STATE_FILE = "No state file was found!"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TIMEOUT_ENV = "TERRAVIXENS_TERRAFORM_TIMEOUT"
DEFAULT_TIMEOUT = 6 * 3600
# SIGTERM to SIGKILL: Terraform stops gracefully on SIGTERM (it finishes what is in flight and writes the state).
STOP_GRACE = 60.0


def terraform_binary() -> str:
    return os.environ.get("TERRAFORM_BINARY_NAME") or "terraform"


def terraform_timeout() -> float:
    """$TERRAVIXENS_TERRAFORM_TIMEOUT (90s, 30m, 6h or seconds), else 6 hours."""
    text = os.environ.get(TIMEOUT_ENV)
    if not text:
        return DEFAULT_TIMEOUT
    try:
        return runner.parse_duration(text, maximum=runner.MAX_DEADLINE)
    except ValueError as error:
        raise OperationError(f"${TIMEOUT_ENV}: {error}", ExitCode.BAD_INPUT) from None


def command_name(args: Sequence[str]) -> str:
    """`terraform init`, `terraform state list`, `terraform output`: the words before the first option."""
    words: list[str] = []
    for arg in args:
        if arg.startswith("-") or len(words) == 2 or (words and words[0] != "state"):
            break
        words.append(arg)
    return " ".join(["terraform", *words])


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    messages: list[dict[str, Any]] = field(default_factory=list)

    def tail(self) -> str:
        lines = [line for line in (self.stderr + "\n" + self.stdout).splitlines() if line.strip()]
        if self.messages:
            lines = [m.get("@message", "") for m in self.messages if m.get("@level") == "error"] or lines
        return "\n".join(lines[-TAIL_LINES:])

    def diagnostics(self, severity: str | None = None) -> list[dict[str, Any]]:
        return [
            m["diagnostic"]
            for m in self.messages
            if isinstance(m.get("diagnostic"), dict)
            and (severity is None or m["diagnostic"].get("severity") == severity)
        ]


@dataclass
class Terraform:
    """`env` is added to the process environment (tests point it at a fake Proxmox VE); nothing is removed.
    `layer_env` adds more for one layer only (keyed by the layer, the name of its working directory): the L2
    layers' apply-time tokens (terravixens.standalone.tokens), so no layer ever sees another layer's."""

    binary: str = field(default_factory=terraform_binary)
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = field(default_factory=terraform_timeout)
    layer_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    grace: float = STOP_GRACE

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

    def _run(self, workdir: Path, args: Sequence[str], on_line: Callable[[str], None] | None = None) -> runner.Ran:
        name = command_name(args)
        ran = runner.run(
            self._command(args),
            timeout=self.timeout,
            cwd=workdir,
            env=self.environment(workdir),
            on_stdout_line=on_line,
            label=name,
            grace=self.grace,
        )
        layer = Path(workdir).name
        if ran.interrupted:
            raise runner.Interrupted(runner.stopping() or "SIGINT", [name])
        if ran.timed_out:
            raise OperationError(
                f"{layer}: {name} did not finish within {runner.seconds(self.timeout)} "
                f"(${TIMEOUT_ENV}): stopped with its process group; nothing after it was run",
                ExitCode.FAILED,
            )
        if ran.returncode is None:
            raise OperationError(
                f"{layer}: {ran.reason}; install Terraform >= 1.11 or set TERRAFORM_BINARY_NAME", ExitCode.FAILED
            )
        return ran

    def output(self, workdir: Path, name: str) -> Result:
        """`terraform output -raw NAME`: its text; a state without any output is answered as one without this
        output (exit 1, `Output "NAME" not found`), never with Terraform's warning text as the value."""
        result = self.run(workdir, "output", "-raw", name)
        if result.returncode == 0 and NO_OUTPUTS in ANSI.sub("", result.stdout)[:300]:
            return Result(1, "", f'Error: Output "{name}" not found (the state has no outputs)')
        return result

    def state_list(self, workdir: Path) -> Result:
        """`terraform state list`: one address per line. A layer never applied with the local backend has no state
        file, which Terraform answers with exit 1; that is an empty state, not a failure."""
        result = self.run(workdir, "state", "list")
        if result.returncode == 1 and NO_STATE_FILE in ANSI.sub("", f"{result.stderr}\n{result.stdout}"):
            return Result(0, "", "")
        return result

    def run(self, workdir: Path, *args: str) -> Result:
        ran = self._run(workdir, args)
        return Result(ran.returncode or 0, ran.stdout, ran.stderr)

    def run_json(self, workdir: Path, *args: str, on_message: Callable[[dict[str, Any]], None] | None = None) -> Result:
        """Runs with `-json` and hands each UI message to `on_message` as it arrives."""
        messages: list[dict[str, Any]] = []
        other: list[str] = []

        def on_line(line: str) -> None:
            try:
                message = json.loads(line)
            except ValueError:
                other.append(line + "\n")
                return
            if not isinstance(message, dict):
                return
            if message.get("type") in (
                "diagnostic",
                "change_summary",
                "planned_change",
                "apply_complete",
                "apply_errored",
                "resource_drift",
            ):
                messages.append(message)
            if on_message is not None:
                on_message(message)

        ran = self._run(workdir, [args[0], "-json", *args[1:]], on_line)
        return Result(ran.returncode or 0, "".join(other), ran.stderr, messages)

    def check(self, result: Result, step: str, layer: str) -> Result:
        if result.returncode != 0:
            raise OperationError(
                f"{layer}: terraform {step} failed (exit {result.returncode}):\n{result.tail()}", ExitCode.FAILED
            )
        return result

    def init(self, workdir: Path, layer: str) -> None:
        """`terraform init`; a provider it cannot install (registry unreachable, or not in the mirror) is one line
        naming the fix (terravixens.provider_install.init_failure), any other failure Terraform's own tail. The
        backend record it writes (.terraform/terraform.tfstate) is 0600 in a 0700 folder afterwards, whatever mode an
        earlier init outside terravixens gave it."""
        result = self.run(workdir, "init", "-input=false", "-no-color")
        # What init recorded of the backend, rewritten in place by Terraform with the mode an earlier init gave it.
        tighten_backend_state(Path(workdir))
        if result.returncode != 0:
            fix = provider_install.init_failure(f"{result.stderr}\n{result.stdout}", self.environment(workdir))
            if fix is not None:
                raise OperationError(f"{layer}: terraform init failed: {fix}", ExitCode.FAILED)
        self.check(result, "init", layer)

    def require_credentials(self, workdir: Path, layer: str) -> None:
        """Before Terraform plans a layer: its providers' credentials are there (the variables named if not), so
        that no provider error stands for a variable the operator did not set."""
        try:
            document = json.loads((Path(workdir) / "cdk.tf.json").read_text())
        except (OSError, ValueError):
            return  # no synthesized layer here: Terraform says so itself
        problem = provider_install.missing_credentials(document, self.environment(workdir))
        if problem is not None:
            raise OperationError(f"{layer}: {problem}; nothing was run", ExitCode.BAD_INPUT)
