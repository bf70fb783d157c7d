"""Test helpers: synthesize a site with app.synth() (validations on) and diff synthesized stacks structurally."""
from __future__ import annotations

import copy
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from terravixens.config.loader import DEFAULT_SITE, parse_site
from terravixens.config.model import Site
from terravixens.stacks import build_app, stack_names


def example_data() -> dict:
    return yaml.safe_load(DEFAULT_SITE.read_text())


def loopback_data(endpoint: str = "https://127.0.0.42:8006/") -> dict:
    """The example site with every address on loopback (10.a.b.c -> 127.a.b.c), for tests that run tools."""
    text = re.sub(r"\b10\.(\d+)\.(\d+)\.(\d+)", r"127.\1.\2.\3", DEFAULT_SITE.read_text())
    data = yaml.safe_load(text)
    data["proxmox"] = {"endpoint": endpoint, "insecure": False}
    for hypervisor in data["hypervisors"].values():
        hypervisor.setdefault("talos_image", {})["factory_url"] = "https://127.0.0.1:9"
    return data


def site_from(data: dict) -> Site:
    return parse_site(copy.deepcopy(data), "<test site>")


def synth(site: Site, outdir: Path | None = None) -> dict[str, dict]:
    """Every stack's cdk.tf.json after a full app.synth() (aspects, validations and cross-stack wiring included)."""
    if outdir is None:
        outdir = Path(tempfile.mkdtemp(prefix="tv-synth-"))
    build_app(site, str(outdir)).synth()
    return {name: json.loads((outdir / "stacks" / name / "cdk.tf.json").read_text()) for name in stack_names(site)}


def addresses(stack: dict) -> dict[str, dict]:
    """Terraform address -> body (metadata removed) for every resource, data source and output of a stack."""
    found: dict[str, dict] = {}
    for kind, prefix in (("resource", ""), ("data", "data.")):
        for rtype, items in stack.get(kind, {}).items():
            for name, body in items.items():
                found[f"{prefix}{rtype}.{name}"] = {k: v for k, v in body.items() if k != "//"}
    for name, body in stack.get("output", {}).items():
        found[f"output.{name}"] = body
    return found


def effective(body: dict) -> dict:
    """What Terraform acts on: attributes listed in lifecycle.ignore_changes never cause a change."""
    ignored = body.get("lifecycle", {}).get("ignore_changes", [])
    if ignored == "all":
        return {"lifecycle": body["lifecycle"]}
    result = copy.deepcopy(body)
    for path in ignored:
        _drop(result, path)
    return result


def _drop(body, path: str) -> None:
    parts = path.replace("[", ".").replace("]", "").split(".")
    target = body
    for part in parts[:-1]:
        if isinstance(target, list):
            target = target[int(part)] if int(part) < len(target) else None
        elif isinstance(target, dict):
            target = target.get(part)
        if target is None:
            return
    if isinstance(target, dict):
        target.pop(parts[-1], None)
    elif isinstance(target, list) and int(parts[-1]) < len(target):
        target.pop(int(parts[-1]))


@dataclass
class Changes:
    added: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)

    @property
    def touched(self) -> set[str]:
        return self.added | self.removed | self.changed

    def __bool__(self) -> bool:
        return bool(self.touched)


REFERENCE = re.compile(r"\$\{((?:data\.)?[a-z0-9_]+\.[A-Za-z0-9_-]+)")


def _references(body) -> set[str]:
    return set(REFERENCE.findall(json.dumps(body)))


def diff_stack(before: dict, after: dict) -> Changes:
    """Added, removed and changed addresses. A change also flows along references out of data sources and
    terraform_data (their results are re-read or re-computed), as Terraform's plan would show it: a new Kubernetes
    version changes the machine configuration data sources, and through them every node's apply."""
    old, new = addresses(before), addresses(after)
    changed = {a for a in set(old) & set(new) if effective(old[a]) != effective(new[a])}
    flowing = {a for a in changed if a.startswith(("data.", "terraform_data."))}
    while flowing:
        reached = {a for a in set(old) & set(new) if a not in changed and _references(effective(new[a])) & flowing}
        changed |= reached
        flowing = {a for a in reached if a.startswith(("data.", "terraform_data.", "output."))}
    return Changes(added=set(new) - set(old), removed=set(old) - set(new), changed=changed)


def diff(before: dict[str, dict], after: dict[str, dict]) -> dict[str, Changes]:
    """Per stack, only the stacks that changed (a stack that appears or disappears counts as all-added/removed)."""
    result = {}
    for name in sorted(set(before) | set(after)):
        changes = diff_stack(before.get(name, {}), after.get(name, {}))
        if changes:
            result[name] = changes
    return result
