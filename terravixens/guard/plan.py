"""What the guard reads: a saved plan as `terraform show -json PLANFILE` prints it, checked for shape first.

Anything that is not a plan is an input error (exit 2), never a pass: `{}`, the state JSON that
`terraform show -json` prints when the plan file is forgotten, an errored plan, or a plan whose changes are
malformed. A pass on those would be a false "ok" on a plan nobody looked at.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from terravixens.catalogue import MEMBERSHIP_NAME, MEMBERSHIP_TYPE
from terravixens.inputs import InputError, Problem, load_json, read_text, shown
from terravixens.logical_ids import owner_of
from terravixens.roles import Role

PLAN_LIMIT = 512 * 1024 * 1024
ACTIONS = frozenset({"no-op", "create", "read", "update", "delete", "forget"})
GIVE_A_PLAN = "give the output of `terraform show -json PLANFILE` (a saved plan from `terraform plan -out PLANFILE`)"


class NotAPlan(InputError):
    """The input is not a usable plan: a problem with the input (exit 2), distinct from a refusal (exit 1)."""

    def __init__(self, source: Path | str, problems: list[Problem]):
        super().__init__(source, problems, "plan")


@dataclass(frozen=True)
class Change:
    """One resource change of the plan (managed resources only)."""

    address: str
    type: str
    name: str
    actions: tuple[str, ...]
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    after_unknown: dict = field(default_factory=dict)

    @property
    def node(self) -> str | None:
        """The node that owns the resource (`node_<name>_<part>`), else None."""
        return owner_of(self.name)

    @property
    def deletes(self) -> bool:
        return "delete" in self.actions

    @property
    def creates(self) -> bool:
        return "create" in self.actions

    @property
    def replaced(self) -> bool:
        return self.deletes and self.creates

    @property
    def forgets(self) -> bool:
        return "forget" in self.actions

    @property
    def updates(self) -> bool:
        return "update" in self.actions


@dataclass(frozen=True)
class PriorResource:
    address: str
    type: str
    name: str
    values: dict

    @property
    def node(self) -> str | None:
        return owner_of(self.name)


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]
    prior: tuple[PriorResource, ...]

    def prior_of(self, *types: str) -> list[PriorResource]:
        return [resource for resource in self.prior if resource.type in types]

    def changes_of(self, *types: str) -> list[Change]:
        return [change for change in self.changes if change.type in types]

    def recorded_roles(self) -> dict[str, str]:
        """Node -> role, as terravixens recorded them at the last apply (the `cluster_membership` record, whose
        input lists each role's nodes by name). Older records (address lists) name no node: empty."""
        roles: dict[str, str] = {}
        for resource in self.prior_of(MEMBERSHIP_TYPE):
            if resource.name != MEMBERSHIP_NAME:
                continue
            record = resource.values.get("input")
            if not isinstance(record, dict):
                continue
            for key, role in (("control_planes", Role.CONTROLPLANE), ("workers", Role.WORKER)):
                members = record.get(key)
                if isinstance(members, dict):
                    roles.update({name: role for name in members if isinstance(name, str)})
        return roles


def _problem(where: str, message: str) -> Problem:
    return Problem(where, message)


def _prior_resources(data: dict, problems: list[Problem]) -> list[PriorResource]:
    prior = data.get("prior_state")
    if prior is None:
        return []
    if not isinstance(prior, dict):
        problems.append(_problem("prior_state", f"is {shown(prior)}, not an object: {GIVE_A_PLAN}"))
        return []
    found: list[PriorResource] = []
    modules = [((prior.get("values") or {}).get("root_module") or {}, "prior_state.values.root_module")]
    while modules:
        module, where = modules.pop()
        if not isinstance(module, dict):
            problems.append(_problem(where, f"is {shown(module)}, not an object"))
            continue
        for index, resource in enumerate(module.get("resources") or []):
            if not isinstance(resource, dict) or not all(isinstance(resource.get(k), str) for k in ("address", "type", "name")):
                problems.append(_problem(f"{where}.resources[{index}]", "has no address, type and name"))
                continue
            if resource.get("mode", "managed") != "managed":
                continue
            values = resource.get("values")
            found.append(PriorResource(resource["address"], resource["type"], resource["name"],
                                       values if isinstance(values, dict) else {}))
        modules += [(child, f"{where}.child_modules[{i}]") for i, child in enumerate(module.get("child_modules") or [])]
    return found


def _change(index: int, item: object, problems: list[Problem]) -> Change | None:
    where = f"resource_changes[{index}]"
    if not isinstance(item, dict):
        problems.append(_problem(where, f"is {shown(item)}, not an object"))
        return None
    missing = [key for key in ("address", "type", "name") if not isinstance(item.get(key), str)]
    if missing:
        problems.append(_problem(where, f"has no {', '.join(missing)}: {GIVE_A_PLAN}"))
        return None
    change = item.get("change")
    actions = change.get("actions") if isinstance(change, dict) else None
    if not isinstance(actions, list) or not actions:
        problems.append(_problem(f"{where}.change.actions", (
            f"is {shown(actions)}: a plan lists each change's actions among {', '.join(sorted(ACTIONS))}")))
        return None
    unknown = [action for action in actions if not isinstance(action, str) or action not in ACTIONS]
    if unknown:
        problems.append(_problem(f"{where}.change.actions", (
            f"holds {shown(unknown[0], 40)}: a plan's actions are among {', '.join(sorted(ACTIONS))}")))
        return None
    if item.get("mode", "managed") != "managed":
        return None

    def part(key: str) -> dict:
        value = change.get(key)
        return value if isinstance(value, dict) else {}

    return Change(item["address"], item["type"], item["name"], tuple(actions), part("before"), part("after"),
                  part("after_unknown"))


def read_plan(data: object, source: Path | str = "<plan>") -> Plan:
    """The plan in `data`, or NotAPlan naming what the input is instead and what to give."""
    if not isinstance(data, dict):
        raise NotAPlan(source, [_problem("(top level)", f"is {shown(data)}, not a JSON object: {GIVE_A_PLAN}")])
    if "format_version" not in data:
        raise NotAPlan(source, [_problem("(top level)", (
            f"has no format_version: this is not Terraform's JSON output ({'empty' if not data else 'keys: ' + ', '.join(sorted(data)[:6])}); {GIVE_A_PLAN}"))])
    if "planned_values" not in data:
        what = ("a state (`terraform show -json` without a plan file prints the state)" if "values" in data or
                len(data) <= 2 else "not a plan")
        raise NotAPlan(source, [_problem("(top level)", f"is {what}, not a plan: {GIVE_A_PLAN}")])
    if data.get("errored") is True:
        raise NotAPlan(source, [_problem("errored", (
            "is true: Terraform stopped while planning, so this plan is incomplete; fix the errors `terraform plan` "
            "printed and plan again"))])
    problems: list[Problem] = []
    raw_changes = data.get("resource_changes") or []
    if not isinstance(raw_changes, list):
        problems.append(_problem("resource_changes", f"is {shown(raw_changes)}, not a list: {GIVE_A_PLAN}"))
        raw_changes = []
    changes = [_change(index, item, problems) for index, item in enumerate(raw_changes)]
    prior = _prior_resources(data, problems)
    if problems:
        raise NotAPlan(source, problems)
    return Plan(tuple(change for change in changes if change is not None), tuple(prior))


def load_plan_data(path: Path | str, limit: int = PLAN_LIMIT) -> dict:
    """A plan file (or '-' for stdin) read strictly and bounded, as raw JSON; InputError when it cannot be used."""
    text = read_text(path, limit=limit, what="plan")
    data = load_json(text, path, what="plan")
    read_plan(data, path)
    return data


def parse_plan_text(text: str, source: Path | str = "<plan>", limit: int = PLAN_LIMIT) -> tuple[dict, Plan]:
    """Plan JSON held in memory (piped from `terraform show -json`): the same bounds and checks as a file."""
    if len(text) > limit:
        raise NotAPlan(source, [_problem("(file)", f"is {len(text):,} characters, over the {limit:,} limit for a plan")])
    data = load_json(text, source, what="plan")
    return data, read_plan(data, source)
