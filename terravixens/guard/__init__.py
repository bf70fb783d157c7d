"""Plan guard: what synth cannot know, because it needs today's state, checked on `terraform show -json PLANFILE`.

Synth-time rules (terravixens.rules) make every change *per node*; a plan also knows what exists today. Each check
is a named module under `terravixens.guard.checks` (code, name, why); `ALL_CHECKS` lists them (and this list is held
to it by tests/test_catalogues.py):

- PG001 StayingNodeKept: a node the site keeps keeps its VM and its apply, whatever their addresses;
- PG002 OneControlPlaneLeavesPerApply: at most one control plane leaves etcd per apply (losing its VM counts);
- PG003 ControlPlaneRemains: at least one of today's control planes stays;
- PG004 ClusterIdentityKept: machine secrets never destroyed or replaced, no second bootstrap;
- PG005 SecretsMatchRunningNodes: no new or forgotten secrets while node applies run;
- PG006 BootstrapOnlyForNewCluster: no bootstrap created, forgotten or destroyed in a running cluster;
- PG007 NoSilentReboot: a staying node's `staged_if_needing_reboot` change is not planned to (maybe) reboot it;
- PG008 HypervisorKeepsWhatNodesUse: L0 keeps bridges, images and the automation user that nodes use;
- PG009 ProtectedStorageKept: no volume or state bucket (what holds data itself) destroyed;
- PG010 StorageKeptWhileUsed: no Proxmox storage definition deleted while a node (in the site or deployed) uses it.

PG001-PG003 judge nodes, not addresses: terravixens.guard.nodes computes what happens to each node (kept, new,
leaving, replaced, machine lost) from the plan, the site and the state, knowing a machine by what it is.
Roles come from the site file and from the membership record terravixens writes into the platform state (by node
name), never from machine configuration text. Input that is not a plan is an InputError (exit 2), never a pass.
See docs/adr/0011-plan-guard.md and docs/adr/0021-guard-catalogue.md.
"""

from __future__ import annotations

from pathlib import Path

from terravixens.guard.checks import ALL_CHECKS, Check, Violation
from terravixens.guard.context import GuardContext, RebootChecks, Usage, deployed_usage, site_roles, site_usage
from terravixens.guard.nodes import Fate, NodesView, NodeView, node_view
from terravixens.guard.plan import PLAN_LIMIT, NotAPlan, Plan, load_plan_data, parse_plan_text, read_plan
from terravixens.inputs import JsonObject


def check_plan(plan: JsonObject | Plan, context: GuardContext | None = None) -> list[Violation]:
    """Every violation of every check (waived ones included, marked). Raises NotAPlan when `plan` is not one."""
    parsed = plan if isinstance(plan, Plan) else read_plan(plan)
    context = context or GuardContext()
    return [violation for check in ALL_CHECKS for violation in check.run(parsed, context)]


def refusals(violations: list[Violation]) -> list[Violation]:
    return [violation for violation in violations if not violation.waived]


def load_plan(path: str | Path, limit: int = PLAN_LIMIT) -> JsonObject:
    """A plan file (or '-' for stdin), read strictly and bounded; InputError when it cannot be used."""
    return load_plan_data(path, limit)


def check_plan_file(path: str | Path, limit: int = PLAN_LIMIT, context: GuardContext | None = None) -> list[Violation]:
    return check_plan(load_plan(path, limit), context)


def ok_line(plan: JsonObject | Plan, context: GuardContext | None = None) -> str:
    """What a plan the guard lets through does, per node: e.g. '5 nodes: 4 kept (1 changed in place: cp-b),
    1 leaving (wk-c); none replaced, no machine lost; PG001-PG010 pass'. Derived from the per-node view, so it
    cannot claim what the plan does not do."""
    parsed = plan if isinstance(plan, Plan) else read_plan(plan)
    view = node_view(parsed, context or GuardContext())
    return f"{view.summary()}; {ALL_CHECKS[0].code}-{ALL_CHECKS[-1].code} pass"


def explain(codes: set[str]) -> list[str]:
    """One 'why' line per code, in catalogue order."""
    return [f"{check.code} {check.name}: {check.why}" for check in ALL_CHECKS if check.code in codes]


__all__ = [
    "ALL_CHECKS",
    "Check",
    "Fate",
    "GuardContext",
    "NodeView",
    "NodesView",
    "NotAPlan",
    "Plan",
    "RebootChecks",
    "Usage",
    "Violation",
    "check_plan",
    "check_plan_file",
    "deployed_usage",
    "explain",
    "load_plan",
    "node_view",
    "ok_line",
    "parse_plan_text",
    "refusals",
    "site_roles",
    "site_usage",
]
