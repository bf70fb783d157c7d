"""A node's role in its cluster: the one spelling of "controlplane" and "worker" (Talos' machine types).

Pure (no pydantic, no cdktf): the plan guard and the upgrade command use it without loading the rest.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """Talos' machine type. A StrEnum: it formats and compares as the text Talos and Terraform use."""

    CONTROLPLANE = "controlplane"
    WORKER = "worker"
