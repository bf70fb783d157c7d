"""Chart sources per site (ADR 0043): the default repository, a mirror repository, an OCI path, or a vendored archive
(air-gapped), each pinned by version and digest.

The archives here are real chart archives made by the helm built by `make tools` (`helm package` of a minimal chart
named like the real one): the site rule reads them as Helm does. What a real air-gapped plan would add, unproven here
because the hashicorp/helm provider cannot be built from the Go module proxy: that the provider reads the archive
from the stack's assets folder without touching the network (helm 3.1.1 fetches repository indexes at plan time
only when `repository` is set, as measured outside the repository: docs/adr/0043-chart-sources.md).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from terravixens.config.loader import SiteError
from terravixens.conformance import check_stack, load_schemas
from tests import gitops_tool, support
from tests.site_builders import cluster

CILIUM, FLUX = "v1.18.4", "v2.17.1"


def _archive(folder: Path, chart: str, version: str) -> tuple[Path, str]:
    """A chart archive made by `helm package`, and its digest."""
    source = folder / "src" / chart
    (source / "templates").mkdir(parents=True)
    (source / "Chart.yaml").write_text(f"apiVersion: v2\nname: {chart}\nversion: {version}\n")
    done = gitops_tool.helm("package", str(source), "--destination", str(folder))
    assert done.returncode == 0, done.stderr
    path = folder / f"{chart}-{version}.tgz"
    return path, f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    folder = tmp_path_factory.mktemp("charts")
    return {"cilium": _archive(folder, "cilium", "1.18.4"), "flux2": _archive(folder, "flux2", "2.17.1")}


def _air_gapped(archives) -> dict:
    data = support.example_data()
    for section, chart in (("cilium", "cilium"), ("flux", "flux2")):
        path, digest = archives[chart]
        cluster(data)[section]["chart"] = {"archive": str(path), "digest": digest}
    return data


def _problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(SiteError) as caught:
        support.site_from(data)
    return [(problem.field, problem.message) for problem in caught.value.problems]


def test_local_archives_synthesize_conform_and_name_no_chart_url(archives, tmp_path):
    stacks = support.synth(support.site_from(_air_gapped(archives)), tmp_path)
    gitops = stacks["gitops-prod"]
    releases = gitops["resource"]["helm_release"]
    assert {name: "repository" in release for name, release in releases.items()} == dict.fromkeys(releases, False)
    for name, chart in (("cluster_cilium", "cilium-1.18.4.tgz"), ("cluster_flux", "flux2-2.17.1.tgz")):
        path = releases[name]["chart"]
        assert path.startswith("assets/") and path.endswith(f"/{chart}")
        copied = tmp_path / "stacks" / "gitops-prod" / path
        assert copied.read_bytes() == archives[chart.split("-")[0]][0].read_bytes()
    assert (releases["cluster_cilium"]["version"], releases["cluster_flux"]["version"]) == ("1.18.4", "2.17.1")
    text = json.dumps(gitops)
    for url in ("https://helm.cilium.io", "fluxcd-community.github.io", "oci://", "https://"):
        assert url not in text
    assert str(archives["cilium"][0].parent) not in text  # the archive is copied: no path of this machine
    assert check_stack("gitops-prod", gitops, load_schemas()) == ([], set())


def test_the_default_sources_are_the_charts_repositories(example_synth):
    releases = example_synth["gitops-prod"]["resource"]["helm_release"]
    assert {
        name: (r.get("repository"), r["chart"], r.get("version")) for name, r in releases.items() if "version" in r
    } == {
        "cluster_cilium": ("https://helm.cilium.io", "cilium", "1.18.4"),
        "cluster_flux": ("https://fluxcd-community.github.io/helm-charts", "flux2", "2.17.1"),
    }


def test_mirror_repository_and_oci_sources(tmp_path):
    data = support.example_data()
    digest = "sha256:" + "0" * 64
    cluster(data)["cilium"]["chart"] = {"oci": "oci://registry.lab.internal/charts", "digest": digest}
    cluster(data)["flux"]["chart"] = {"repository": "https://charts.lab.internal/flux", "digest": digest}
    releases = support.synth(support.site_from(data), tmp_path)["gitops-prod"]["resource"]["helm_release"]
    assert (releases["cluster_cilium"]["repository"], releases["cluster_cilium"]["chart"]) == (
        "oci://registry.lab.internal/charts",
        "cilium",
    )
    assert (releases["cluster_flux"]["repository"], releases["cluster_flux"]["chart"]) == (
        "https://charts.lab.internal/flux",
        "flux2",
    )


def test_an_archive_whose_digest_differs_is_refused(archives):
    data = _air_gapped(archives)
    wrong = "sha256:" + "f" * 64
    cluster(data)["cilium"]["chart"]["digest"] = wrong
    [(field, message)] = _problems(data)
    assert field == "clusters.prod.cilium.chart.archive"
    assert f"has digest {archives['cilium'][1]}, the site pins {wrong}" in message
    assert "helm pull" in message


def test_an_archive_of_another_version_or_chart_is_refused(archives):
    data = _air_gapped(archives)
    cluster(data)["cilium"]["chart_version"] = "v1.18.5"
    cluster(data)["flux"]["chart"] = dict(cluster(data)["cilium"]["chart"])
    problems = _problems(data)
    assert [field for field, _ in problems] == [
        "clusters.prod.cilium.chart.archive",
        "clusters.prod.flux.chart.archive",
    ]
    assert "holds cilium 1.18.4, the site pins chart_version v1.18.5" in problems[0][1]
    assert "holds no chart 'flux2'" in problems[1][1]


def test_a_missing_archive_is_refused(archives, tmp_path):
    data = _air_gapped(archives)
    cluster(data)["flux"]["chart"]["archive"] = str(tmp_path / "flux2-2.17.1.tgz")
    [(field, message)] = _problems(data)
    assert field == "clusters.prod.flux.chart.archive"
    assert "cannot be read (No such file or directory)" in message


@pytest.mark.parametrize(
    ("chart", "field", "words"),
    [
        ({"digest": "sha256:" + "0" * 64}, "clusters.prod.cilium.chart", "none given: give exactly one of"),
        (
            {"repository": "https://a.example", "oci": "oci://b.example/c", "digest": "sha256:" + "0" * 64},
            "clusters.prod.cilium.chart",
            "repository and oci given",
        ),
        ({"archive": "charts/cilium.tgz", "digest": "sha256:ABC"}, "clusters.prod.cilium.chart.digest", "not a sha256"),
        ({"archive": "../cilium.tgz", "digest": "sha256:" + "0" * 64}, "clusters.prod.cilium.chart.archive", "'..'"),
        ({"archive": "charts/cilium", "digest": "sha256:" + "0" * 64}, "clusters.prod.cilium.chart.archive", ".tgz"),
        ({"oci": "https://registry.example", "digest": "sha256:" + "0" * 64}, "clusters.prod.cilium.chart.oci", "OCI"),
        (
            {"repository": "http://a.example", "digest": "sha256:" + "0" * 64},
            "clusters.prod.cilium.chart.repository",
            "https",
        ),
        ({"archive": "charts/cilium-1.18.4.tgz"}, "clusters.prod.cilium.chart.digest", ""),
    ],
)
def test_chart_source_fields_are_located(chart, field, words):
    data = support.example_data()
    cluster(data)["cilium"]["chart"] = chart
    problems = _problems(data)
    assert [f for f, _ in problems] == [field]
    assert words in problems[0][1]
