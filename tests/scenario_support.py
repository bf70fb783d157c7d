"""Scenario tests' harness: synthesize a site before and after one change, and compare the addresses per stack
(terravixens.stackdiff: "changed" is what Terraform acts on)."""

from __future__ import annotations

import copy

from terravixens.stackdiff import Changes, diff
from tests import support


def run(before: dict, change) -> dict[str, Changes]:
    """The difference per stack between the site `before` and the site after `change` (applied to a copy)."""
    after = copy.deepcopy(before)
    change(after)
    return diff(support.synth(support.site_from(before)), support.synth(support.site_from(after)))


def assert_changes(result: dict[str, Changes], expected: dict[str, dict[str, set[str]]]) -> None:
    actual = {
        stack: {kind: getattr(changes, kind) for kind in ("added", "removed", "changed") if getattr(changes, kind)}
        for stack, changes in result.items()
    }
    assert actual == expected
