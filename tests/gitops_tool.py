"""The gitops layer's judges (ADR 0043): the helm CLI built by `make tools` and tools/k8s-decode.

The requests come from the synthesized JSON, as Terraform would hand them to the helm provider: every helm_release
whose chart is one of ours (a cdktf asset of terravixens/charts/*), with its `values` documents. Helm lints and
renders the chart with those values; k8s-decode decodes every rendered object, and the Namespace and Secrets of the
kubernetes_* resources, into their owners' Go types.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ROOT / "terravixens" / "charts"
HELM = ROOT / "tools" / "helm" / "bin" / "helm"
DECODE = ROOT / "tools" / "k8s-decode" / "bin" / "k8s-decode"
# Objects judged in this process, per kind (reported at the end of a pytest run).
JUDGED: Counter = Counter()


class ToolMissing(RuntimeError):
    pass


def binary(path: Path) -> Path:
    if not path.exists():
        raise ToolMissing(f"{path} is missing: run `make tools` (builds helm and k8s-decode from the Go module proxy)")
    return path


@dataclass(frozen=True)
class Release:
    """One helm_release of our own charts: `<stack>/<resource name>`, the chart folder, its values documents."""

    name: str
    chart: Path
    values: list[str]
    release_name: str = "terravixens"
    namespace: str = "default"


# cdktf names a directory asset after its construct path: `assets/<construct id>_<hash>/<hash>`.
ASSET_PREFIXES = {
    "assets/cilium_l2_chart_": "cilium-l2",
    "assets/flux_sync_chart_": "flux-sync",
    "assets/etcd_backup_chart_": "etcd-backup",
}


def our_releases(stacks: dict[str, dict]) -> list[Release]:
    """Every helm_release of every stack whose chart is one of ours. The asset holds a copy of the chart's folder:
    the folder itself is judged (same bytes). Third-party charts (a repository, an OCI path or a vendored .tgz)
    are skipped, and every other asset is an error: no chart of ours goes unjudged."""
    found = []
    for stack_name, stack in sorted(stacks.items()):
        for name, release in sorted(stack.get("resource", {}).get("helm_release", {}).items()):
            chart = str(release["chart"])
            if "repository" in release or chart.endswith(".tgz"):
                continue
            [folder] = [CHARTS / part for prefix, part in ASSET_PREFIXES.items() if chart.startswith(prefix)] or [None]
            assert folder is not None, f"{stack_name}/{name}: chart {chart} is none of {sorted(ASSET_PREFIXES)}"
            values = list(release.get("values", []))
            found.append(Release(f"{stack_name}/{name}", folder, values, release["name"], release["namespace"]))
    return found


def helm(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary(HELM)), *args], capture_output=True, text=True, timeout=timeout)


def values_files(release: Release, folder: Path) -> list[str]:
    arguments = []
    for index, document in enumerate(release.values):
        path = folder / f"values-{index}.yaml"
        path.write_text(document)
        arguments += ["--values", str(path)]
    return arguments


def lint(release: Release) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as folder:
        values = values_files(release, Path(folder))
        return helm("lint", "--strict", "--namespace", release.namespace, str(release.chart), *values)


def template(release: Release) -> str:
    """`helm template` of the release as the provider renders it: its release name, namespace and values."""
    with tempfile.TemporaryDirectory() as folder:
        values = values_files(release, Path(folder))
        done = helm("template", release.release_name, str(release.chart), "--namespace", release.namespace, *values)
    if done.returncode != 0:
        raise AssertionError(f"helm template {release.name}: {done.stderr.strip()}")
    return done.stdout


def kubernetes_objects(stacks: dict[str, dict]) -> list[dict]:
    """The Namespace and Secret objects of the kubernetes_* resources, as the provider would send them: metadata,
    type, and the write-only data's keys when they are literal (their values are read at apply time)."""
    renders = []
    for stack_name, stack in sorted(stacks.items()):
        resources = stack.get("resource", {})
        for name, namespace in sorted(resources.get("kubernetes_namespace_v1", {}).items()):
            [metadata] = namespace["metadata"] if isinstance(namespace["metadata"], list) else [namespace["metadata"]]
            document = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
            renders.append({"name": f"{stack_name}/{name}", "manifest": yaml.safe_dump(document)})
        for name, secret in sorted(resources.get("kubernetes_secret_v1", {}).items()):
            [metadata] = secret["metadata"] if isinstance(secret["metadata"], list) else [secret["metadata"]]
            document = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": metadata,
                "type": secret.get("type", "Opaque"),
            }
            data = secret.get("data_wo")
            if isinstance(data, dict):
                document["stringData"] = dict.fromkeys(data, "(write-only, read at apply time)")
            renders.append({"name": f"{stack_name}/{name}", "manifest": yaml.safe_dump(document)})
    return renders


@dataclass(frozen=True)
class Verdict:
    render: str
    kind: str
    name: str
    ok: bool
    errors: list[str]


@dataclass(frozen=True)
class Report:
    modules: dict[str, str]
    objects: int
    kinds: dict[str, int]
    verdicts: list[Verdict]


def decode(renders: list[dict]) -> Report:
    done = subprocess.run(
        [str(binary(DECODE))], input=json.dumps({"renders": renders}), capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise AssertionError(f"k8s-decode failed ({done.returncode}): {done.stderr.strip()}")
    output = json.loads(done.stdout)
    JUDGED.update(output["kinds"])
    return Report(output["modules"], output["objects"], output["kinds"], [Verdict(**v) for v in output["results"]])


# ------------------------------------------------------------------------------------------ a real API server's word
# Objects a real kube-apiserver accepted in a server-side dry run in this process, per kind (reported at the end).
SERVER_ACCEPTED: Counter = Counter()


# API groups whose CRDs no module the proxy serves carries: Talos' own (talos.dev: the ServiceAccount of the backup
# job, which Talos' controller serves from the root siderolabs/talos module, refused by the proxy). Their objects are
# kept out of the server's dry run and listed apart; k8s-decode still judges them.
NOT_SERVED_GROUPS = ("talos.dev",)


def not_served(document: dict) -> bool:
    return str(document.get("apiVersion", "")).split("/")[0] in NOT_SERVED_GROUPS


@dataclass(frozen=True)
class ServerVerdict:
    """kubectl apply --server-side --dry-run=server of some rendered documents: the objects it printed as applied
    (`kind.group/name`), its exit code and its error lines; `not_served`: the objects left out (NOT_SERVED_GROUPS),
    as `kind.group/name`."""

    applied: list[str]
    code: int
    errors: list[str]
    not_served: list[str] = field(default_factory=list)


def documents(renders: list[dict]) -> list[dict]:
    return [doc for render in renders for doc in yaml.safe_load_all(render["manifest"]) if doc]


def server_dry_run(kube, renders: list[dict]) -> ServerVerdict:
    """The rendered objects through a real kube-apiserver (tests/control_plane.py) with the real kubectl: `apply
    --server-side --dry-run=server` (field validation Strict, kubectl's default: an unknown field is an error), the
    CRDs' OpenAPI schemas and CEL rules and the built-in types' validation judging each. The namespaces they name are
    created for real first (a dry run cannot create the namespace of the objects in it)."""
    rendered = documents(renders)
    left_out = sorted(
        f"{d['kind'].lower()}.{d['apiVersion'].split('/')[0]}/{d['metadata']['name']}"
        for d in rendered
        if not_served(d)
    )
    found = [d for d in rendered if not not_served(d)]
    if not found:  # a site without Flux and pools renders nothing: nothing to judge
        return ServerVerdict([], 0, [], left_out)
    for namespace in sorted({d["metadata"].get("namespace") for d in found if d.get("metadata")} - {None}):
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    stream = "---\n".join(yaml.safe_dump(d) for d in found)
    done = kube.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=terravixens",
        "-o",
        "name",
        "-f",
        "-",
        input=stream,
    )
    applied = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode == 0:
        SERVER_ACCEPTED.update(d["kind"] for d in found)
    return ServerVerdict(
        applied, done.returncode, [line for line in done.stderr.splitlines() if line.strip()], left_out
    )
