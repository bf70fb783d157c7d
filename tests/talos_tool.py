"""Talos' own library as the judge of what terravixens renders (tools/talos-validate, ADR 0014).

The requests are read from the synthesized JSON, not from the Python model: every
`talos_machine_configuration_apply` of a platform stack, the `talos_machine_configuration` data source its
`machine_configuration_input` refers to, and both lists of config patches exactly as Terraform would send them
(Terraform's `$${` and `%%{` escapes undone; any real interpolation is refused, the tool could not evaluate it).
The machine secrets are not in the JSON (references to state): the tool generates a bundle in memory.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TOOL_DIR = ROOT / "tools" / "talos-validate"
BIN_DIR = TOOL_DIR / "bin"
DATA_SOURCE_KEYS = (
    "cluster_name",
    "cluster_endpoint",
    "machine_type",
    "talos_version",
    "kubernetes_version",
    "config_patches",
    "docs",
    "examples",
)
INPUT_REFERENCE = re.compile(r"^\$\{data\.talos_machine_configuration\.([A-Za-z0-9_-]+)\.machine_configuration\}$")
INTERPOLATION = re.compile(r"(?<!\$)\$\{|(?<!%)%\{")
VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.|$)")
INSTALLER_TAG = re.compile(r":(v\d+\.\d+\.\d+\S*)$")
# Configurations judged in this process, per machinery version (reported at the end of a pytest run).
VALIDATED: Counter = Counter()


class ToolMissing(RuntimeError):
    pass


def supported_minors() -> list[str]:
    """The Talos minors the tool is built for: one go.v1.NN.mod each."""
    return sorted(path.name[len("go.v") : -len(".mod")] for path in TOOL_DIR.glob("go.v*.mod"))


def pinned_machinery(minor: str) -> str:
    """The machinery version the minor's module file pins (what `-version` of that binary must print)."""
    text = (TOOL_DIR / f"go.v{minor}.mod").read_text()
    return re.search(r"github\.com/siderolabs/talos/pkg/machinery (v\S+)", text).group(1)


def minor_of(talos_version: str) -> str:
    major, minor = VERSION.match(talos_version).groups()
    return f"{major}.{minor}"


def binary(minor: str) -> Path:
    path = BIN_DIR / f"talos-validate-v{minor}"
    if not path.exists():
        raise ToolMissing(f"{path} is missing: run `make tools` (builds the Talos validators from the Go module proxy)")
    return path


def terraform_literal(text: str, where: str) -> str:
    """The string Terraform passes to the provider for a JSON string literal."""
    if INTERPOLATION.search(text):
        raise ValueError(f"{where}: holds a Terraform interpolation; the tool can only judge literal patches")
    return text.replace("$${", "${").replace("%%{", "%{")


def requests(stacks: dict[str, dict]) -> list[dict]:
    """One tool request per node apply of every platform stack, named `<stack>/<apply id>`, sorted by name."""
    found = []
    for stack_name, stack in sorted(stacks.items()):
        sources = stack.get("data", {}).get("talos_machine_configuration", {})
        for apply_id, apply in sorted(stack.get("resource", {}).get("talos_machine_configuration_apply", {}).items()):
            where = f"{stack_name}: talos_machine_configuration_apply.{apply_id}"
            reference = INPUT_REFERENCE.match(apply["machine_configuration_input"])
            if reference is None:
                raise ValueError(f"{where}: machine_configuration_input is not a data source's output")
            source = sources[reference.group(1)]
            data_source = {key: source.get(key) for key in DATA_SOURCE_KEYS}
            data_source["config_patches"] = [
                terraform_literal(patch, f"{where} <- config_patches of {reference.group(1)}")
                for patch in source.get("config_patches", [])
            ]
            found.append(
                {
                    "name": f"{stack_name}/{apply_id}",
                    "machine_configuration": data_source,
                    "config_patches": [terraform_literal(p, where) for p in apply.get("config_patches", [])],
                }
            )
    return found


@dataclass(frozen=True)
class Verdict:
    name: str
    ok: bool
    errors: list[str]
    warnings: list[str]
    documents: list[str]
    hostname: str
    hostname_auto: str
    machine_configuration_input: str | None = None  # holds secrets: only with emit_input, never written anywhere


@dataclass(frozen=True)
class Report:
    machinery: str
    mode: str
    verdicts: list[Verdict]


def validate(
    minor: str,
    nodes: list[dict],
    mode: str = "metal",
    emit_input: bool = False,
    secrets: Path | None = None,
    timeout: float = 120,
) -> Report:
    """Runs the minor's tool once over every node request (secrets: a bundle file; default generated in memory)."""
    command = (
        [str(binary(minor)), "-mode", mode]
        + (["-emit-input"] if emit_input else [])
        + (["-secrets", str(secrets)] if secrets else [])
    )
    result = subprocess.run(
        command, input=json.dumps({"nodes": nodes}), capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise RuntimeError(f"talos-validate-v{minor} failed ({result.returncode}): {result.stderr.strip()[:500]}")
    answer = json.loads(result.stdout)
    VALIDATED[answer["machinery"]] += len(answer["results"])
    return Report(answer["machinery"], answer["mode"], [Verdict(**item) for item in answer["results"]])


def running_version(node: dict) -> str:
    """The Talos a node runs: the tag of the installer its patches name (`machine.install.image`). The data
    source's talos_version is the configuration contract, which may be older (docs/adr/0023)."""
    images = [
        document["machine"]["install"]["image"]
        for patch in node["config_patches"]
        for document in yaml.safe_load_all(patch)
        if isinstance(document, dict) and "image" in (document.get("machine") or {}).get("install", {})
    ]
    if not images:
        raise ValueError(f"{node['name']}: no machine.install.image in its patches: which Talos does it run?")
    return INSTALLER_TAG.search(images[-1]).group(1)


def kubernetes_verdict(minor: str, kubernetes: str) -> dict:
    """Talos' compatibility table, asked through the minor's tool: {talos, kubernetes, supported, reason}."""
    result = subprocess.run([str(binary(minor)), "-kubernetes", kubernetes], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"talos-validate-v{minor} -kubernetes failed: {result.stderr.strip()[:500]}")
    return json.loads(result.stdout)


def by_minor(nodes: list[dict]) -> dict[str, list[dict]]:
    """Requests grouped by the Talos minor the node runs: each goes to that minor's tool, as the node itself would
    judge its configuration."""
    grouped: dict[str, list[dict]] = {}
    for node in nodes:
        grouped.setdefault(minor_of(running_version(node)), []).append(node)
    return grouped


def main(argv: list[str]) -> int:
    """python -m tests.talos_tool [OUTDIR]: judge what `make synth` wrote (default cdktf.out), one line per node."""
    stacks_dir = Path(argv[0] if argv else "cdktf.out") / "stacks"
    stacks = {path.parent.name: json.loads(path.read_text()) for path in sorted(stacks_dir.glob("*/cdk.tf.json"))}
    if not stacks:
        print(f"no stacks under {stacks_dir}: run `make synth` first", file=sys.stderr)
        return 2
    failed = 0
    for minor, nodes in sorted(by_minor(requests(stacks)).items()):
        report = validate(minor, nodes)
        for verdict in report.verdicts:
            failed += not verdict.ok
            status = "ok" if verdict.ok else "FAILED"
            hostname = verdict.hostname or (
                f"generated (auto: {verdict.hostname_auto})" if verdict.hostname_auto else "none"
            )
            print(f"{verdict.name}: {status} (Talos {report.machinery}, {report.mode} mode, hostname {hostname})")
            for line in verdict.errors + [f"warning: {w}" for w in verdict.warnings]:
                print(f"  {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
