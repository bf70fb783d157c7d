"""Kubernetes Node objects of nodes that were reset: Talos wipes the machine, but its Node object stays in the
API (NotReady for ever) until someone deletes it. Done with kubectl and the platform layer's kubeconfig output,
written to a 0600 file in a 0700 temporary folder that is removed afterwards; never echoed."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from terravixens.operations.console import Console
from terravixens.operations.files import private_directory, write_private
from terravixens.operations.terraform import Terraform

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


def default_runner(command: Sequence[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(command), capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return subprocess.CompletedProcess(list(command), 127, "", f"{command[0]}: not found")


@dataclass
class Kubectl:
    binary: str = field(default_factory=lambda: os.environ.get("KUBECTL", "kubectl"))
    run: Runner = default_runner


def kubeconfig_of(tf: Terraform, workdir: Path) -> str | None:
    """The platform layer's `kubeconfig` output; None when the layer has none (cluster gone, or no Talos here)."""
    result = tf.run(workdir, "output", "-raw", "kubeconfig")
    return result.stdout if result.returncode == 0 and result.stdout.strip() else None


def delete_nodes(kubectl: Kubectl, kubeconfig: str | None, names: Sequence[str], console: Console,
                 layer: str) -> list[str]:
    """Deletes the Node objects; returns the names that could not be deleted (each reported, none fatal)."""
    if not names:
        return []
    if kubeconfig is None:
        console.step(layer, "kubernetes", f"no kubeconfig output: delete Node objects {', '.join(names)} by hand "
                                          f"(kubectl delete node NAME)")
        return list(names)
    failed = []
    with private_directory() as folder:
        path = write_private(folder / "kubeconfig", kubeconfig)
        for name in names:
            result = kubectl.run([kubectl.binary, "--kubeconfig", str(path), "delete", "node", name,
                                  "--ignore-not-found", "--wait=false"])
            if result.returncode == 0:
                console.step(layer, "kubernetes", f"Node {name} deleted")
            else:
                failed.append(name)
                console.step(layer, "kubernetes", f"Node {name} not deleted ({(result.stderr or result.stdout).strip()[:200]}):"
                                                  f" kubectl delete node {name}")
    return failed
