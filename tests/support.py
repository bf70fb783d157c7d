"""Test helpers: synthesize a site with app.synth() (validations on); the structural diff is terravixens.stackdiff."""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path

import yaml

from terravixens.config.loader import parse_site
from terravixens.config.model import Site
from terravixens.stacks import build_app, stack_names

# The checkout's example site, whatever folder a test runs in (DEFAULT_SITE is relative to the current folder).
EXAMPLE_SITE = Path(__file__).resolve().parent.parent / "sites" / "example.yaml"


def example_data() -> dict:
    return yaml.safe_load(EXAMPLE_SITE.read_text())


def loopback_data(endpoint: str = "https://127.0.0.42:8006/") -> dict:
    """The example site with every address on loopback (10.a.b.c -> 127.a.b.c), for tests that run tools."""
    text = re.sub(r"\b10\.(\d+)\.(\d+)\.(\d+)", r"127.\1.\2.\3", EXAMPLE_SITE.read_text())
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
