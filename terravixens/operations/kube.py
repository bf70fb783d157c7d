"""Kubernetes Node objects of nodes that were reset: Talos wipes the machine, but its Node object stays in the
API (NotReady for ever) until someone deletes it. Done with kubectl and the platform layer's kubeconfig output,
written to a 0600 file in a 0700 temporary folder that is removed afterwards; never echoed.

kubectl runs through the one bounded runner (terravixens.runner): a deadline per call ($TERRAVIXENS_KUBECTL_TIMEOUT,
default 60s). A Node object that cannot be deleted is reported with the command to run by hand and the operation
goes on (its machine is already reset); a kubectl that hangs stops the operation with the command named (exit 4).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from terravixens import runner
from terravixens.exitcodes import ExitCode
from terravixens.operations.console import Console
from terravixens.operations.files import private_directory, write_private
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform

TIMEOUT_ENV = "TERRAVIXENS_KUBECTL_TIMEOUT"
DEFAULT_TIMEOUT = 60


def kubectl_timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    if not text:
        return DEFAULT_TIMEOUT
    try:
        return runner.parse_duration(text, maximum=runner.MAX_DEADLINE)
    except ValueError as error:
        raise OperationError(f"${TIMEOUT_ENV}: {error}", ExitCode.BAD_INPUT) from None


@dataclass
class Kubectl:
    binary: str = field(default_factory=lambda: os.environ.get("KUBECTL", "kubectl"))
    timeout: float = field(default_factory=kubectl_timeout)
    grace: float = 5.0

    def run(self, arguments: Sequence[str], kubeconfig: Path) -> runner.Ran:
        label = " ".join(["kubectl", *arguments[:2]])
        return runner.run(
            [self.binary, "--kubeconfig", str(kubeconfig), *arguments],
            timeout=self.timeout,
            label=label,
            grace=self.grace,
        )


def kubeconfig_of(tf: Terraform, workdir: Path) -> str | None:
    """The platform layer's `kubeconfig` output; None when the layer has none (cluster gone, or no Talos here)."""
    result = tf.output(workdir, "kubeconfig")
    return result.stdout if result.returncode == 0 and result.stdout.strip() else None


def delete_nodes(
    kubectl: Kubectl, kubeconfig: str | None, names: Sequence[str], console: Console, layer: str
) -> list[str]:
    """Deletes the Node objects; returns the names that could not be deleted (each reported, none fatal), except
    a kubectl that does not answer in time: that stops, naming the command and the Node objects left."""
    if not names:
        return []
    if kubeconfig is None:
        console.step(
            layer,
            "kubernetes",
            f"no kubeconfig output: delete Node objects {', '.join(names)} by hand (kubectl delete node NAME)",
        )
        return list(names)
    failed = []
    with private_directory() as folder:
        path = write_private(folder / "kubeconfig", kubeconfig)
        for index, name in enumerate(names):
            result = kubectl.run(["delete", "node", name, "--ignore-not-found", "--wait=false"], path)
            if result.interrupted:
                raise runner.Interrupted(runner.stopping() or "SIGINT", ["kubectl delete node"])
            if result.timed_out:
                left = ", ".join(names[index:])
                raise OperationError(
                    f"{layer}: {result.reason}; Node objects not deleted: {left} (delete them by "
                    f"hand: kubectl delete node NAME)",
                    ExitCode.FAILED,
                )
            if result.ok:
                console.step(layer, "kubernetes", f"Node {name} deleted")
            else:
                failed.append(name)
                console.step(
                    layer, "kubernetes", f"Node {name} not deleted ({result.reason[:200]}): kubectl delete node {name}"
                )
    return failed
