"""Talos Image Factory: schematic ids computed locally, image and installer references.

The factory names a schematic by the SHA-256 of its YAML (as Go's yaml.v3 writes it: 4-space indents, sequence
items indented under their key). Computing the id here keeps the hypervisor layer free of the Talos provider and of
any network call at plan time; tests pin two ids published by the factory.
"""

from __future__ import annotations

import hashlib
import re

from terravixens.config.model import TalosImage


def schematic_yaml(image: TalosImage) -> str:
    customization: list[str] = []
    if image.extra_kernel_args:
        customization.append("    extraKernelArgs:")
        customization += [f"        - {arg}" for arg in image.extra_kernel_args]
    if image.extensions:
        customization.append("    systemExtensions:")
        customization.append("        officialExtensions:")
        customization += [f"            - {name}" for name in sorted(image.extensions)]
    if not customization:
        return "customization: {}\n"
    return "customization:\n" + "\n".join(customization) + "\n"


def schematic_id(image: TalosImage) -> str:
    return hashlib.sha256(schematic_yaml(image).encode()).hexdigest()


def disk_image_url(image: TalosImage, talos_version: str) -> str:
    """The qcow2 disk image Proxmox imports as the VM's boot disk."""
    file_name = f"{image.platform}-{image.architecture}.qcow2"
    return f"{image.factory_url}/image/{schematic_id(image)}/{talos_version}/{file_name}"


def disk_image_file_name(image: TalosImage, talos_version: str) -> str:
    """Unique per schematic and version, so an upgrade downloads a new file instead of replacing one in use."""
    return f"talos-{schematic_id(image)[:12]}-{talos_version}-{image.platform}-{image.architecture}.qcow2"


def disk_image_file_id(image: TalosImage, talos_version: str, datastore: str) -> str:
    """The Proxmox volume id of the downloaded image, known at synth time: no cross-stack reference needed."""
    return f"{datastore}:import/{disk_image_file_name(image, talos_version)}"


def installer_image(image: TalosImage, talos_version: str) -> str:
    """The factory's platform installer: an upgrade with the generic (metal) one would drop the nocloud platform."""
    host = re.sub(r"^https?://", "", image.factory_url)
    kind = "installer" if image.platform == "metal" else f"{image.platform}-installer"
    return f"{host}/{kind}/{schematic_id(image)}:{talos_version}"
