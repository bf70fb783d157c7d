"""Talos disk image downloads: TLS verified always, the image's SHA-256 checked where the site pins one (the public
Image Factory publishes none: ADR 0031). Only the image resources carry it."""

from __future__ import annotations

import copy

import pytest

from terravixens.config.loader import SiteError, parse_site
from tests import support

DIGEST = "9f2c" * 16


def example() -> dict:
    return copy.deepcopy(support.example_data())


def images(stack: dict) -> dict[str, dict]:
    return stack["resource"]["proxmox_download_file"]


def test_without_a_pin_the_download_verifies_tls_and_carries_no_checksum(example_synth):
    for name, image in images(example_synth["hypervisors"]).items():
        assert image["verify"] is True, name
        assert "checksum" not in image and "checksum_algorithm" not in image, name


def test_a_pinned_sha256_reaches_that_hypervisors_image_and_nothing_else(tmp_path, example_synth):
    data = example()
    data["hypervisors"]["pve1"]["talos_image"]["sha256"] = {"v1.11.5": DIGEST.upper(), "v1.12.7": "0" * 64}
    pinned = support.synth(support.site_from(data), tmp_path)["hypervisors"]
    found = images(pinned)
    assert found["hv_pve1_image_v1-11-5_ce4c980550dd"]["checksum"] == DIGEST  # as sha256sum prints it
    assert found["hv_pve1_image_v1-11-5_ce4c980550dd"]["checksum_algorithm"] == "sha256"
    assert "checksum" not in found["hv_pve2_image_v1-11-5_ce4c980550dd"]  # pve2 pins nothing
    assert "checksum" not in found["hv_pve3_image_v1-11-5_ce4c980550dd"]  # nor pve3
    assert len(found) == 3  # a pin of a version no VM boots downloads nothing
    before = example_synth["hypervisors"]
    # The pin changes the image resource of pve1 and nothing else in the stack.
    differing = {
        (kind, name)
        for kind in set(before["resource"]) | set(pinned["resource"])
        for name in set(before["resource"].get(kind, {})) | set(pinned["resource"].get(kind, {}))
        if before["resource"].get(kind, {}).get(name) != pinned["resource"].get(kind, {}).get(name)
    }
    assert differing == {("proxmox_download_file", "hv_pve1_image_v1-11-5_ce4c980550dd")}


@pytest.mark.parametrize(
    "pins, field, words",
    [
        (
            {"1.11.5": DIGEST},
            "hypervisors.pve1.talos_image.sha256",
            ["'1.11.5' is not a Talos version like v1.11.5", "with the leading 'v'"],
        ),
        (
            {"v1.11.5": "sha256:" + DIGEST},
            "hypervisors.pve1.talos_image.sha256",
            ["the checksum of v1.11.5", "is not a SHA-256", "64 hexadecimal digits", "no `sha256:` prefix"],
        ),
        ({"v1.11.5": DIGEST[:-1]}, "hypervisors.pve1.talos_image.sha256", ["is not a SHA-256"]),
    ],
)
def test_a_bad_pin_is_a_located_error(pins, field, words):
    data = example()
    data["hypervisors"]["pve1"]["talos_image"]["sha256"] = pins
    with pytest.raises(SiteError) as caught:
        parse_site(data, "site.yaml")
    [problem] = caught.value.problems
    assert problem.field == field, problem
    for word in words:
        assert word in problem.message, (word, problem.message)
