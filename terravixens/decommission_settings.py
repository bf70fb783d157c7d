"""How a platform stack is synthesized while `terravixens decommission` tears its cluster down (ADR 0020).

Never read from the site file: only the decommission operation builds one, for a synth of its own, so a normal
`cdktf synth` or `terravixens deploy` can never lift a protection. Pure (no cdktf import): the operations use it
without starting jsii.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decommission:
    """reboot_after_reset: wiped nodes reboot into maintenance mode instead of powering off;
    non_graceful: nodes reset without leaving etcd (the last control plane: no member is left to hand over to);
    release_secrets: lift prevent_destroy on the machine secrets (the very last step, once no node is in state)."""

    reboot_after_reset: bool = True
    non_graceful: frozenset[str] = frozenset()
    release_secrets: bool = False
