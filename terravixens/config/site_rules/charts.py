"""Chart archives (air-gapped sites, ADR 0043): the file the site names is the chart, at the version and digest pinned.

A chart given as `archive` is copied into the gitops layer at synth and installed from there: nothing fetches it
again, so what is checked here is all that stands between a stale or wrong file and the cluster. Each archive must
be a readable gzip tar whose sha256 is the pinned `digest` and whose `<chart>/Chart.yaml` names the expected chart
at the section's `chart_version` (Helm reads that file, not the archive's name). Relative paths are taken from the
project root, the folder terravixens and cdktf run in.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator
from pathlib import Path as FilePath
from typing import Any

import yaml

from terravixens.config.model import ChartSource, Site
from terravixens.config.site_rules.walk import Finding, Path
from terravixens.inputs import shown

# A vendored chart is a few hundred KiB (cilium 1.18: about 200 KiB); anything far larger is not one.
ARCHIVE_LIMIT = 64 * 1024 * 1024
VENDOR_HINT = "vendor it again with `helm pull` (docs/commands.md)"


def _chart_yaml(archive: tarfile.TarFile, chart: str) -> dict[str, Any] | None:
    """The chart's own Chart.yaml (`<chart>/Chart.yaml`, not a subchart's), or None."""
    try:
        member = archive.getmember(f"{chart}/Chart.yaml")
    except KeyError:
        return None
    handle = archive.extractfile(member)
    if handle is None:
        return None
    loaded = yaml.safe_load(handle.read(1024 * 1024))
    return loaded if isinstance(loaded, dict) else None


def archive_problem(archive_path: str, source: ChartSource, chart: str, version: str) -> str | None:
    """What is wrong with the chart archive `source` names (`archive_path`), or None when it is the pinned chart."""
    path = FilePath(archive_path)
    try:
        size = path.stat().st_size
        if size > ARCHIVE_LIMIT:
            return f"{shown(archive_path)} is {size:,} bytes, not a chart archive: {VENDOR_HINT}"
        data = path.read_bytes()
    except OSError as error:
        return f"{shown(archive_path)} cannot be read ({error.strerror}): {VENDOR_HINT}, or fix the path"
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    if digest != source.digest:
        return (
            f"{shown(archive_path)} has digest {digest}, the site pins {source.digest}: {VENDOR_HINT} and pin "
            f"its digest, or fix `digest`"
        )
    try:
        with tarfile.open(path, mode="r:gz") as archive:
            metadata = _chart_yaml(archive, chart)
    except (tarfile.TarError, OSError, EOFError, yaml.YAMLError) as error:
        return f"{shown(archive_path)} is not a chart archive ({error}): {VENDOR_HINT}"
    if metadata is None or metadata.get("name") != chart:
        return f"{shown(archive_path)} holds no chart {chart!r} ({chart}/Chart.yaml): {VENDOR_HINT}"
    found = str(metadata.get("version", ""))
    if found != version.removeprefix("v"):
        return (
            f"{shown(archive_path)} holds {chart} {found}, the site pins chart_version {version}: vendor "
            f"{chart} {version.removeprefix('v')}, or set chart_version to v{found}"
        )
    return None


def chart_archives(site: Site) -> Iterator[Finding]:
    for cluster_name, cluster in site.clusters.items():
        sections: list[tuple[str, str, ChartSource | None, str]] = [
            ("cilium", "cilium", cluster.cilium.chart, cluster.cilium.chart_version)
        ]
        if cluster.flux is not None:
            sections.append(("flux", "flux2", cluster.flux.chart, cluster.flux.chart_version))
        for section, chart, source, version in sections:
            if source is None or source.archive is None:
                continue
            problem = archive_problem(source.archive, source, chart, version)
            if problem is not None:
                where: Path = ("clusters", cluster_name, section, "chart", "archive")
                yield where, problem
