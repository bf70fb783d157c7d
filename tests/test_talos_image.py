"""Talos Image Factory schematic ids computed locally, pinned to ids published by the factory, and image references."""

from __future__ import annotations

import hashlib

import pytest

from terravixens.config.model import TalosImage
from terravixens.talos.image import (
    disk_image_file_id,
    disk_image_file_name,
    disk_image_url,
    installer_image,
    schematic_id,
    schematic_yaml,
)

QEMU_GUEST_AGENT_ID = "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515"
DEFAULT_SCHEMATIC_ID = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"  # no customization


# ---------------------------------------------------------------------------------------------------------- ids
def test_default_extensions_are_the_qemu_guest_agent():
    assert TalosImage().extensions == ["siderolabs/qemu-guest-agent"]


def test_default_image_reproduces_the_factory_id():
    assert schematic_id(TalosImage()) == QEMU_GUEST_AGENT_ID


def test_explicit_qemu_guest_agent_reproduces_the_factory_id():
    assert schematic_id(TalosImage(extensions=["siderolabs/qemu-guest-agent"])) == QEMU_GUEST_AGENT_ID


def test_no_extensions_reproduces_the_factory_default_schematic_id():
    assert schematic_id(TalosImage(extensions=[])) == DEFAULT_SCHEMATIC_ID


def test_schematic_yaml_is_what_the_factory_hashes():
    assert schematic_yaml(TalosImage()) == (
        "customization:\n"
        "    systemExtensions:\n"
        "        officialExtensions:\n"
        "            - siderolabs/qemu-guest-agent\n"
    )
    assert schematic_yaml(TalosImage(extensions=[])) == "customization: {}\n"
    assert schematic_id(TalosImage()) == hashlib.sha256(schematic_yaml(TalosImage()).encode()).hexdigest()


def test_id_is_independent_of_extension_order():
    a = TalosImage(extensions=["siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools", "siderolabs/util-linux-tools"])
    b = TalosImage(extensions=["siderolabs/util-linux-tools", "siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"])
    assert schematic_id(a) == schematic_id(b)
    assert schematic_yaml(a) == schematic_yaml(b)


def test_different_extension_set_gives_a_different_id():
    more = TalosImage(extensions=["siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"])
    other = TalosImage(extensions=["siderolabs/iscsi-tools"])
    ids = {schematic_id(TalosImage()), schematic_id(TalosImage(extensions=[])), schematic_id(more), schematic_id(other)}
    assert len(ids) == 4


def test_kernel_args_change_the_id_and_keep_their_order():
    plain = TalosImage()
    with_args = TalosImage(extra_kernel_args=["console=ttyS0", "net.ifnames=0"])
    swapped = TalosImage(extra_kernel_args=["net.ifnames=0", "console=ttyS0"])
    assert schematic_id(with_args) != schematic_id(plain)
    # Kernel arguments are order-sensitive on a command line: unlike extensions, they are not sorted.
    assert schematic_id(with_args) != schematic_id(swapped)
    assert schematic_yaml(with_args).startswith(
        "customization:\n    extraKernelArgs:\n        - console=ttyS0\n        - net.ifnames=0\n"
        "    systemExtensions:\n"
    )


def test_platform_and_architecture_do_not_change_the_id():
    assert schematic_id(TalosImage(platform="metal", architecture="arm64")) == QEMU_GUEST_AGENT_ID


# ---------------------------------------------------------------------------------------------------------- references
def test_disk_image_url_default_image():
    assert disk_image_url(TalosImage(), "v1.11.5") == (
        f"https://factory.talos.dev/image/{QEMU_GUEST_AGENT_ID}/v1.11.5/nocloud-amd64.qcow2"
    )


def test_disk_image_url_follows_platform_architecture_and_factory():
    image = TalosImage(
        extensions=[], platform="metal", architecture="arm64", factory_url="https://factory.lab.internal"
    )
    assert disk_image_url(image, "v1.10.0") == (
        f"https://factory.lab.internal/image/{DEFAULT_SCHEMATIC_ID}/v1.10.0/metal-arm64.qcow2"
    )


def test_disk_image_file_name_default_image():
    assert disk_image_file_name(TalosImage(), "v1.11.5") == "talos-ce4c980550dd-v1.11.5-nocloud-amd64.qcow2"


def test_disk_image_file_name_differs_per_version_and_schematic():
    names = {
        disk_image_file_name(TalosImage(), "v1.11.5"),
        disk_image_file_name(TalosImage(), "v1.11.6"),
        disk_image_file_name(TalosImage(extensions=[]), "v1.11.5"),
    }
    assert len(names) == 3
    assert (
        disk_image_file_name(TalosImage(extensions=[]), "v1.11.5") == "talos-376567988ad3-v1.11.5-nocloud-amd64.qcow2"
    )


def test_disk_image_file_id_default_image():
    assert disk_image_file_id(TalosImage(), "v1.11.5", "local") == (
        "local:import/talos-ce4c980550dd-v1.11.5-nocloud-amd64.qcow2"
    )


def test_disk_image_file_id_uses_the_datastore():
    assert disk_image_file_id(TalosImage(), "v1.11.5", "nfs-images").startswith("nfs-images:import/talos-ce4c980550dd-")


def test_installer_image_default_image():
    assert (
        installer_image(TalosImage(), "v1.11.5") == f"factory.talos.dev/nocloud-installer/{QEMU_GUEST_AGENT_ID}:v1.11.5"
    )


@pytest.mark.parametrize("factory_url", ["https://factory.lab.internal", "http://factory.lab.internal"])
def test_installer_image_strips_the_url_scheme(factory_url):
    reason = {"allow_insecure_http": "a lab mirror without TLS"} if factory_url.startswith("http:") else {}
    image = TalosImage(extensions=[], factory_url=factory_url, **reason)
    assert installer_image(image, "v1.11.5") == f"factory.lab.internal/nocloud-installer/{DEFAULT_SCHEMATIC_ID}:v1.11.5"


def test_a_metal_image_upgrades_with_the_factory_metal_installer():
    """The factory names its generic installer `installer`, and `<platform>-installer` for any other platform."""
    image = TalosImage(extensions=[], platform="metal")
    assert installer_image(image, "v1.11.5") == f"factory.talos.dev/installer/{DEFAULT_SCHEMATIC_ID}:v1.11.5"
