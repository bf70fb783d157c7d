"""What the guard reads: a saved plan as `terraform show -json PLANFILE` prints it, checked for shape first.

Anything that is not a plan is an input error (exit 2), never a pass: `{}`, the state JSON that
`terraform show -json` prints when the plan file is forgotten, an errored plan, or a plan whose changes are
malformed. A pass on those would be a false "ok" on a plan nobody looked at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from terravixens.catalogue import MEMBERSHIP_NAME, MEMBERSHIP_TYPE
from terravixens.inputs import InputError, JsonObject, Problem, load_json, read_text, shown
from terravixens.logical_ids import owner_of
from terravixens.roles import Role

PLAN_LIMIT = 512 * 1024 * 1024
ACTIONS = frozenset({"no-op", "create", "read", "update", "delete", "forget"})
# Every action list Terraform writes (internal/command/jsonplan: the `Change.Actions` comment and actionString;
# Terraform 1.5-1.11, OpenTofu alike). ["create", "forget"] is a replacement whose old object is left running
# (`destroy = false`). Anything else — ["update", "delete"], ["delete", "delete"], ["forget", "create"] — is not a
# plan this guard knows how to read: an input error, never a guess.
ACTION_LISTS = frozenset(
    {
        ("no-op",),
        ("create",),
        ("read",),
        ("update",),
        ("delete",),
        ("forget",),
        ("delete", "create"),
        ("create", "delete"),
        ("create", "forget"),
    }
)
REPLACE_LISTS = frozenset({("delete", "create"), ("create", "delete"), ("create", "forget")})
MODES = ("managed", "data")
# Terraform writes a data source's change as a read (or a no-op); the deletes it plans to clean a data source out of
# the state are never written (MarshalResourceChanges skips them).
DATA_ACTION_LISTS = frozenset({("read",), ("no-op",)})
# action_reason families: a known reason on actions of another family is a plan Terraform never writes. Unknown
# reasons are accepted (Terraform's own docs: consumers must tolerate new ones).
REASON_ACTIONS = {
    "replace_because_cannot_update": REPLACE_LISTS,
    "replace_because_tainted": REPLACE_LISTS,
    "replace_by_request": REPLACE_LISTS,
    "replace_by_triggers": REPLACE_LISTS,
    **{
        f"delete_because_{why}": frozenset({("delete",), ("forget",)})
        for why in ("no_resource_config", "wrong_repetition", "count_index", "each_key", "no_module", "no_move_target")
    },
    **{
        f"read_because_{why}": frozenset({("read",)})
        for why in ("config_unknown", "dependency_pending", "check_nested")
    },
}
GIVE_A_PLAN = "give the output of `terraform show -json PLANFILE` (a saved plan from `terraform plan -out PLANFILE`)"
NEVER_WRITTEN = "Terraform never writes this: the plan was edited or built by hand; plan again and pass the output"


class NotAPlan(InputError):
    """The input is not a usable plan: a problem with the input (exit 2), distinct from a refusal (exit 1)."""

    def __init__(self, source: Path | str, problems: list[Problem]):
        super().__init__(source, problems, "plan")


@dataclass(frozen=True)
class Change:
    """One resource change of the plan (managed resources only), with what Terraform says about the address:
    where it was before (`previous_address`, a `moved` block), why (`action_reason`), which attributes force a
    replacement (`replace_paths`), and whether it is a deposed object (left over from a failed replacement)."""

    address: str
    type: str
    name: str
    actions: tuple[str, ...]
    before: JsonObject = field(default_factory=dict)
    after: JsonObject = field(default_factory=dict)
    after_unknown: JsonObject = field(default_factory=dict)
    module_address: str = ""
    index: object = None
    previous_address: str | None = None
    action_reason: str | None = None
    replace_paths: tuple[tuple[object, ...], ...] = ()
    deposed: str | None = None
    importing: bool = False

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
        """A replacement: the object is deleted (or forgotten) and a new one created, in either order."""
        return self.actions in REPLACE_LISTS

    @property
    def forgets(self) -> bool:
        return "forget" in self.actions

    @property
    def updates(self) -> bool:
        return "update" in self.actions

    @property
    def removes_current(self) -> bool:
        """The current object goes away (deleted, forgotten or replaced); a deposed object is not the current one."""
        return self.deposed is None and (self.deletes or self.forgets)

    @property
    def moved(self) -> bool:
        return self.previous_address is not None and self.previous_address != self.address


@dataclass(frozen=True)
class PriorResource:
    address: str
    type: str
    name: str
    values: JsonObject
    deposed: str | None = None

    @property
    def node(self) -> str | None:
        return owner_of(self.name)


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]
    prior: tuple[PriorResource, ...]
    # The per-node views of this plan computed so far (terravixens.guard.nodes.node_view), by what of the judging
    # context they read: a deploy asks for it in scale-in's sequencing and in PG001-PG003, and computes it once. Not
    # a field of the value (no init, no compare): a copy of the plan starts without.
    views: dict[tuple[object, ...], object] = field(default_factory=dict, init=False, compare=False, repr=False)

    def prior_of(self, *types: str) -> list[PriorResource]:
        """Today's current objects of `types` (deposed objects left out: no node runs on them)."""
        return [resource for resource in self.prior if resource.type in types and resource.deposed is None]

    def changes_of(self, *types: str) -> list[Change]:
        return [change for change in self.changes if change.type in types]

    def membership(self) -> JsonObject | None:
        """The membership record's input as it was at the last apply, or None when the state holds none."""
        for resource in self.prior_of(MEMBERSHIP_TYPE):
            record = resource.values.get("input")
            if resource.name == MEMBERSHIP_NAME and isinstance(record, dict):
                return record
        return None

    def planned_membership(self) -> JsonObject | None:
        """The membership record's input after this plan (what the synthesized site lists), or None when the plan
        holds no record or deletes it."""
        for change in self.changes_of(MEMBERSHIP_TYPE):
            if change.name == MEMBERSHIP_NAME and change.deposed is None:
                if change.actions in (("delete",), ("forget",)):
                    return None
                record = change.after.get("input")
                return record if isinstance(record, dict) else None
        return self.membership()

    def recorded_roles(self) -> dict[str, str]:
        """Node -> role, as terravixens recorded them at the last apply (the `cluster_membership` record, whose
        input lists each role's nodes by name). Older records (address lists) name no node: empty."""
        return roles_in(self.membership())


def roles_in(record: JsonObject | None) -> dict[str, str]:
    """Node -> role in a membership record's input ({"control_planes": {name: address}, "workers": {...}})."""
    roles: dict[str, str] = {}
    for key, role in (("control_planes", Role.CONTROLPLANE), ("workers", Role.WORKER)):
        members = (record or {}).get(key)
        if isinstance(members, dict):
            roles.update({name: role for name in members if isinstance(name, str)})
    return roles


def addresses_in(record: JsonObject | None) -> dict[str, str]:
    """Talos node address -> node name in a membership record's input."""
    found: dict[str, str] = {}
    for key in ("control_planes", "workers"):
        members = (record or {}).get(key)
        if isinstance(members, dict):
            found.update(
                {
                    address: name
                    for name, address in members.items()
                    if isinstance(name, str) and isinstance(address, str)
                }
            )
    return found


def _problem(where: str, message: str) -> Problem:
    return Problem(where, message)


def _index_text(index: object) -> str | None:
    """The `[..]` suffix Terraform writes for an instance key, or None when the key is not one it writes."""
    if index is None:
        return ""
    if isinstance(index, bool):
        return None
    if isinstance(index, int):
        return f"[{index}]"
    if isinstance(index, str):
        return "[" + json.dumps(index, ensure_ascii=False) + "]"
    return None


def _address_problem(item: JsonObject, mode: str, module_address: str | None) -> str | None:
    """Why `address` does not say what `mode`, `type`, `name`, `index` and `module_address` say, else None."""
    module = module_address or ""
    if module and not module.startswith("module."):
        return f"module_address {shown(module, 60)} is not a module address (module.NAME...)"
    suffix = _index_text(item.get("index"))
    if suffix is None:
        return f"index {shown(item.get('index'), 40)} is neither a number nor a string"
    prefix = (module + "." if module else "") + ("data." if mode == "data" else "")
    expected = f"{prefix}{item['type']}.{item['name']}{suffix}"
    if item["address"] != expected:
        return (
            f"address {shown(item['address'], 120)} does not match its type, name, index and module "
            f"({shown(expected, 120)})"
        )
    return None


def _prior_resources(data: JsonObject, problems: list[Problem]) -> list[PriorResource]:
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
            at = f"{where}.resources[{index}]"
            named = isinstance(resource, dict) and all(
                isinstance(resource.get(k), str) for k in ("address", "type", "name")
            )
            if not named:
                problems.append(_problem(at, "has no address, type and name"))
                continue
            mode = resource.get("mode")
            if mode not in MODES:
                problems.append(
                    _problem(
                        f"{at}.mode",
                        f"is {shown(mode, 40)}: a state's resources are 'managed' or 'data'. {NEVER_WRITTEN}",
                    )
                )
                continue
            wrong = _address_problem(resource, mode, module.get("address"))
            if wrong:
                problems.append(_problem(at, f"{wrong}. {NEVER_WRITTEN}"))
                continue
            if mode != "managed":
                continue
            values = resource.get("values")
            deposed = resource.get("deposed_key")
            found.append(
                PriorResource(
                    resource["address"],
                    resource["type"],
                    resource["name"],
                    values if isinstance(values, dict) else {},
                    deposed if isinstance(deposed, str) and deposed else None,
                )
            )
        modules += [(child, f"{where}.child_modules[{i}]") for i, child in enumerate(module.get("child_modules") or [])]
    return found


def _shape_problems(item: JsonObject, mode: str, actions: tuple[str, ...], change: JsonObject) -> list[str]:
    """What in one well-typed change Terraform never writes."""
    found: list[str] = []
    if mode == "data" and actions not in DATA_ACTION_LISTS:
        found.append(
            f"a data source ({item['address']}) with actions {list(actions)}: Terraform only reads data "
            f"sources (['read'] or ['no-op'])"
        )
    if mode == "managed" and actions == ("read",):
        found.append(f"a managed resource ({item['address']}) with actions ['read']: only data sources are read")
    wrong = _address_problem(item, mode, item.get("module_address"))
    if wrong:
        found.append(wrong)
    replace_paths = change.get("replace_paths")
    if replace_paths is not None:
        if not isinstance(replace_paths, list):
            found.append(f"replace_paths is {shown(replace_paths)}, not a list of attribute paths")
        elif replace_paths and actions not in REPLACE_LISTS:
            found.append(
                f"replace_paths on actions {list(actions)}: Terraform names the attributes that force a "
                f"replacement only on a replacement"
            )
    deposed = item.get("deposed")
    if deposed is not None and (not isinstance(deposed, str) or actions not in (("delete",), ("forget",))):
        found.append(
            f"deposed object {shown(deposed, 20)} with actions {list(actions)}: a deposed object (left "
            f"over from a failed replacement) is only ever deleted or forgotten"
        )
    reason = item.get("action_reason")
    if reason is not None and not isinstance(reason, str):
        found.append(f"action_reason is {shown(reason)}, not a keyword")
    elif reason in REASON_ACTIONS and actions not in REASON_ACTIONS[reason]:
        found.append(f"action_reason {reason!r} on actions {list(actions)}")
    before, after = change.get("before"), change.get("after")
    if actions == ("create",) and before is not None:
        found.append("a create with a value before it: a created object has no 'before'")
    if actions in (("delete",), ("forget",)) and after is not None:
        found.append(f"a {actions[0]} with a value after it: a deleted or forgotten object has no 'after'")
    if (actions == ("update",) or actions in REPLACE_LISTS) and not isinstance(before, dict):
        found.append(f"actions {list(actions)} without the object's value before the change")
    if actions == ("update",) and after is None:
        found.append("an update without the object's value after the change")
    previous = item.get("previous_address")
    if previous is not None and (not isinstance(previous, str) or not previous):
        found.append(f"previous_address is {shown(previous, 40)}, not an address")
    importing = change.get("importing")
    if importing is not None and not isinstance(importing, dict):
        found.append(f"importing is {shown(importing)}, not an object")
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
    where = f"resource_changes[{index}] ({shown(item['address'], 80)})"
    change = item.get("change")
    actions = change.get("actions") if isinstance(change, dict) else None
    if not isinstance(change, dict) or not isinstance(actions, list) or not actions:
        problems.append(
            _problem(
                f"{where}.change.actions",
                (f"is {shown(actions)}: a plan lists each change's actions among {', '.join(sorted(ACTIONS))}"),
            )
        )
        return None
    unknown = [action for action in actions if not isinstance(action, str) or action not in ACTIONS]
    if unknown:
        problems.append(
            _problem(
                f"{where}.change.actions",
                (f"holds {shown(unknown[0], 40)}: a plan's actions are among {', '.join(sorted(ACTIONS))}"),
            )
        )
        return None
    actions = tuple(actions)
    if actions not in ACTION_LISTS:
        problems.append(
            _problem(
                f"{where}.change.actions",
                (
                    f"is {list(actions)}: Terraform writes one of "
                    f"{', '.join(str(list(a)) for a in sorted(ACTION_LISTS))}. {NEVER_WRITTEN}"
                ),
            )
        )
        return None
    mode = item.get("mode")
    if mode not in MODES:
        problems.append(
            _problem(
                f"{where}.mode", (f"is {shown(mode, 40)}: a resource change is 'managed' or 'data'. {NEVER_WRITTEN}")
            )
        )
        return None
    shape = _shape_problems(item, mode, actions, change)
    if shape:
        problems += [_problem(where, f"{text}. {NEVER_WRITTEN}") for text in shape]
        return None
    if mode != "managed":
        return None

    def part(key: str) -> JsonObject:
        value = change.get(key)
        return value if isinstance(value, dict) else {}

    paths = change.get("replace_paths") or []
    return Change(
        item["address"],
        item["type"],
        item["name"],
        actions,
        part("before"),
        part("after"),
        part("after_unknown"),
        module_address=item.get("module_address") or "",
        index=item.get("index"),
        previous_address=item.get("previous_address"),
        action_reason=item.get("action_reason"),
        replace_paths=tuple(tuple(p) if isinstance(p, list) else (p,) for p in paths),
        deposed=item.get("deposed"),
        importing=change.get("importing") is not None,
    )


def _one_change_per_object(raw_changes: list[object], problems: list[Problem]) -> None:
    """Terraform writes one change per object (address, and deposed key for a deposed one), and an object moved by
    a `moved` block has no change left at its old address."""
    seen: dict[tuple[object, ...], int] = {}
    current: dict[str, int] = {}
    for index, item in enumerate(raw_changes):
        if not isinstance(item, dict) or not isinstance(item.get("address"), str):
            continue
        key = (item.get("mode"), item["address"], item.get("deposed"))
        if key in seen:
            problems.append(
                _problem(
                    f"resource_changes[{index}]",
                    (
                        f"is a second change for {shown(item['address'], 120)} (the first is "
                        f"resource_changes[{seen[key]}]): Terraform writes one change per object. {NEVER_WRITTEN}"
                    ),
                )
            )
        seen.setdefault(key, index)
        if item.get("deposed") is None:
            current.setdefault(item["address"], index)
    for index, item in enumerate(raw_changes):
        if not isinstance(item, dict):
            continue
        previous = item.get("previous_address")
        if isinstance(previous, str) and previous != item.get("address") and previous in current:
            problems.append(
                _problem(
                    f"resource_changes[{index}]",
                    (
                        f"was moved from {shown(previous, 120)}, which has its own change "
                        f"(resource_changes[{current[previous]}]): a moved object leaves nothing at its old address. "
                        f"{NEVER_WRITTEN}"
                    ),
                )
            )


def _planned_addresses(data: JsonObject) -> set[str]:
    """Every resource address in `planned_values` (root module and child modules; what is not an object is
    skipped: the prior state's and the changes' shapes are checked elsewhere)."""
    found: set[str] = set()
    planned = data.get("planned_values")
    modules = [planned.get("root_module") if isinstance(planned, dict) else None]
    while modules:
        module = modules.pop()
        if not isinstance(module, dict):
            continue
        resources = module.get("resources")
        for resource in resources if isinstance(resources, list) else []:
            if isinstance(resource, dict) and isinstance(resource.get("address"), str):
                found.add(resource["address"])
        children = module.get("child_modules")
        modules += children if isinstance(children, list) else []
    return found


def _nothing_changes_yet_all_goes(data: JsonObject, prior: list[PriorResource], problems: list[Problem]) -> None:
    """A plan without resource_changes whose planned_values hold none of the objects the prior state holds: every
    object would go, yet no change says so. Terraform writes a change (a no-op at least) for every object it plans,
    so it never writes this; passing it would judge nothing and say "ok"."""
    current = [resource for resource in prior if resource.deposed is None]
    if not current:
        return
    planned = _planned_addresses(data)
    if any(resource.address in planned for resource in current):
        return
    problems.append(
        _problem(
            "resource_changes",
            (
                f"is empty, while planned_values drop all {len(current)} object"
                f"{'s' if len(current) != 1 else ''} the prior state holds (e.g. {shown(current[0].address, 80)}): "
                f"every one would go and no change says so. {NEVER_WRITTEN}"
            ),
        )
    )


def read_plan(data: object, source: Path | str = "<plan>") -> Plan:
    """The plan in `data`, or NotAPlan naming what the input is instead and what to give."""
    data = _plan_object(data, source)
    if "format_version" not in data:
        raise NotAPlan(
            source,
            [
                _problem(
                    "(top level)",
                    (
                        f"has no format_version: this is not Terraform's JSON output "
                        f"({'empty' if not data else 'keys: ' + ', '.join(sorted(data)[:6])}); {GIVE_A_PLAN}"
                    ),
                )
            ],
        )
    version = data["format_version"]
    if not isinstance(version, str) or version.split(".", 1)[0] != "1":
        raise NotAPlan(
            source,
            [
                _problem(
                    "format_version",
                    (
                        f"is {shown(version, 20)}: this guard reads Terraform's JSON format 1.x (its major version "
                        f"changes only with changes a reader must not guess at); {GIVE_A_PLAN} from a Terraform that "
                        f"writes 1.x"
                    ),
                )
            ],
        )
    if "planned_values" not in data:
        what = (
            "a state (`terraform show -json` without a plan file prints the state)"
            if "values" in data or len(data) <= 2
            else "JSON without planned_values"
        )
        raise NotAPlan(source, [_problem("(top level)", f"is {what}, not a plan: {GIVE_A_PLAN}")])
    if data.get("errored") is True:
        raise NotAPlan(
            source,
            [
                _problem(
                    "errored",
                    (
                        "is true: Terraform stopped while planning, so this plan is incomplete; fix the errors "
                        "`terraform plan` printed and plan again"
                    ),
                )
            ],
        )
    problems: list[Problem] = []
    raw_changes = data.get("resource_changes") or []
    if not isinstance(raw_changes, list):
        problems.append(_problem("resource_changes", f"is {shown(raw_changes)}, not a list: {GIVE_A_PLAN}"))
        raw_changes = []
    changes = [_change(index, item, problems) for index, item in enumerate(raw_changes)]
    _one_change_per_object(raw_changes, problems)
    prior = _prior_resources(data, problems)
    if not raw_changes and not problems:
        _nothing_changes_yet_all_goes(data, prior, problems)
    if problems:
        raise NotAPlan(source, problems)
    return Plan(tuple(change for change in changes if change is not None), tuple(prior))


def _plan_object(data: object, source: Path | str) -> JsonObject:
    if not isinstance(data, dict):
        raise NotAPlan(source, [_problem("(top level)", f"is {shown(data)}, not a JSON object: {GIVE_A_PLAN}")])
    return data


def load_plan_data(path: Path | str, limit: int = PLAN_LIMIT) -> JsonObject:
    """A plan file (or '-' for stdin) read strictly and bounded, as raw JSON; InputError when it cannot be used."""
    text = read_text(path, limit=limit, what="plan")
    data = _plan_object(load_json(text, path, what="plan"), path)
    read_plan(data, path)
    return data


def load_plan_file(path: Path | str, limit: int = PLAN_LIMIT) -> Plan:
    """A plan file (or '-' for stdin) read strictly and bounded, parsed once: judged and summed up from one `Plan`
    (and one per-node view of it); InputError when it cannot be used."""
    text = read_text(path, limit=limit, what="plan")
    return read_plan(_plan_object(load_json(text, path, what="plan"), path), path)


def parse_plan_text(text: str, source: Path | str = "<plan>", limit: int = PLAN_LIMIT) -> tuple[JsonObject, Plan]:
    """Plan JSON held in memory (piped from `terraform show -json`): the same bounds and checks as a file."""
    if len(text) > limit:
        raise NotAPlan(
            source, [_problem("(file)", f"is {len(text):,} characters, over the {limit:,} limit for a plan")]
        )
    data = _plan_object(load_json(text, source, what="plan"), source)
    return data, read_plan(data, source)
