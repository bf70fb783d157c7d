"""PG007 NoSilentReboot: a staying node whose apply mode is `staged_if_needing_reboot` is not planned to reboot."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.catalogue import NODE_APPLY
from terravixens.guard.checks.base import Check
from terravixens.guard.context import GuardContext, apply_node_address
from terravixens.guard.plan import Change, Plan

STAGED_IF_NEEDED = "staged_if_needing_reboot"
CONFIGURATION = ("machine_configuration", "machine_configuration_input", "config_patches")


def _configuration_changes(change: Change) -> bool:
    return any(
        change.after_unknown.get(key) or change.before.get(key) != change.after.get(key) for key in CONFIGURATION
    )


class NoSilentReboot(Check):
    code = "PG007"
    name = "NoSilentReboot"
    why = (
        "with `staged_if_needing_reboot` the talos provider asks each node at plan time whether the change needs "
        "a reboot; when the node cannot be reached it only warns and plans `auto`, which may reboot it. Several "
        "nodes rebooting at once can take the cluster down."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        for change in plan.changes_of(NODE_APPLY):
            if change.actions != ("update",) or change.after.get("apply_mode") != STAGED_IF_NEEDED:
                continue
            if not _configuration_changes(change) or change.node in context.allow_reboot:
                continue
            unknown = change.after_unknown.get("resolved_apply_mode")
            resolved = None if unknown else change.after.get("resolved_apply_mode")
            allow = f"re-plan when the node answers, or allow it with --allow-reboot {change.node or change.address}"
            if resolved == "reboot":
                yield (
                    f"{change.address} is planned to reboot node {change.node!r} (resolved_apply_mode "
                    f"'reboot'): {allow}."
                )
            elif resolved is None:
                yield (
                    f"{change.address}: the reboot check of node {change.node!r} has not run (resolved_apply_mode "
                    f"unknown until apply, when an unreachable node falls back to 'auto'): {allow}."
                )
            elif resolved == "auto":
                if context.reboot_checks is None:
                    yield (
                        f"{change.address} changes node {change.node!r}'s configuration with resolved_apply_mode "
                        f"'auto', and the plan's log was not given, so the guard cannot tell 'no reboot needed' "
                        f"from 'node unreachable, may reboot': run `terravixens deploy` (it reads the log), pass "
                        f"--plan-log (`terraform plan -json` output), or {allow.split(', or ')[1]}."
                    )
                elif context.reboot_checks.unchecked(change.address, apply_node_address(change.after)):
                    yield (
                        f"{change.address}: node {change.node!r} could not be asked whether the change needs a "
                        f"reboot (the provider warned 'Cannot check reboot requirement' and planned 'auto', which "
                        f"may reboot it): {allow}."
                    )
