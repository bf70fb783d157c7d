"""The lifecycle walk's vocabulary: site edits as data, applied to a site and judged on what they change.

An edit is a JSON object (`{"op": "readdress", "node": "wk-a", "octet": 101}`): the state machine
(tests/test_lifecycle_walk.py) draws them, a failure prints the walk as JSON, and tests/lifecycle_replay.py turns that
JSON into a regression test. Everything here is deterministic: the same walk synthesizes the same JSON.

After each edit, `Walker.step` synthesizes the whole site in process (app.synth(): aspects, the safety rules and
cross-stack wiring; memoized by site content, so a shrink or a shared start costs no second synth) and judges the
difference from the previous JSON (terravixens.stackdiff):

- only the resources of the nodes the edit names change (`node_<name>_*`, `sa_<name>_*`), and cluster-level
  resources only where the edit's kind allows it (node lists, images, configuration data sources, the pools' release);
- a node the edit keeps keeps its machine and its apply (no replacement: vm_id and the addresses stay);
- a cluster-wide edit (Talos, Kubernetes, contract, pools) touches no VM or container and creates or destroys no
  apply (no reset, no replacement); the machine secrets and the bootstrap never change;
- the plan guard, given a plan-shaped JSON derived from the difference (`plan_of`), lets every legal edit through,
  and refuses the one that takes two control planes at once (PG002) — whose deploy sequence (ADR 0037) is then
  judged step by step and must pass;
- every changed node configuration is queued for Talos' own validator (tests/talos_tool.py), judged in one batch
  per Talos minor when the walk ends (`Walker.validate_configurations`).
"""

from __future__ import annotations

import copy
import json
import tempfile
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from terravixens.guard import (
    GuardContext,
    RebootChecks,
    check_plan,
    node_view,
    read_plan,
    refusals,
    site_roles,
    site_usage,
)
from terravixens.guard.nodes import DISRUPTED
from terravixens.layers import SiteLayers
from terravixens.logical_ids import owner_of, standalone_owner_of
from terravixens.rules import ALL_RULES
from terravixens.stackdiff import Changes, addresses, diff, effective
from terravixens.stacks import build_app, stack_names
from tests import support, talos_tool
from tests.support import EXAMPLE_SITE as DEFAULT_SITE

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = "prod"
P, H, G = "platform-prod", "hypervisors", "gitops-prod"
VM_TYPE, CT_TYPE = "proxmox_virtual_environment_vm", "proxmox_virtual_environment_container"
APPLY = "talos_machine_configuration_apply"
MACHINES = {VM_TYPE, CT_TYPE}
NEVER_CHANGED = ("talos_machine_secrets.", "talos_machine_bootstrap.")
# Cluster-level lists of nodes (and what reads them): change with the node set or a node's managed address.
NODE_LISTS = {
    f"{P}:data.talos_cluster_health.cluster_health",
    f"{P}:data.talos_client_configuration.cluster_talosconfig",
    f"{P}:output.node_addresses",
    f"{P}:terraform_data.cluster_membership",
    f"{P}:output.talosconfig",
    f"{P}:output.health_checked",
}
# The kubeconfig is fetched through the bootstrap node's first-contact address (the first control plane by name):
# it is read again when that node changes, never a node's resource.
KUBECONFIG = {
    f"{P}:talos_cluster_kubeconfig.cluster_kubeconfig",
    f"{P}:output.kubeconfig",
    f"{P}:output.kubernetes_client",
}
CONFIGS = {
    f"{P}:data.talos_machine_configuration.cluster_machine_configuration_{role}" for role in ("controlplane", "worker")
}
# Edits that name no node: they reconfigure every node in place at most.
CLUSTER_WIDE = {"talos_patch", "pin_contract", "talos_minor", "move_contract", "kubernetes", "cilium_pools"}
NODE_SET = {"add_worker", "remove_worker", "add_control_planes", "remove_control_planes", "promote_workers"}
GUEST_OPS = {"add_guest", "remove_guest", "resize_guest", "respec_guest"}
STARTS = {
    # name -> (talos_version, config_contract): a young cluster, one that pinned its contract, one a minor ahead;
    # then sites of other sizes (SIZES): one control plane alone, and pools well past the example's.
    "v1.11.5": ("v1.11.5", None),
    "v1.11.6-pinned": ("v1.11.6", "v1.11"),
    "v1.12.7-pinned": ("v1.12.7", "v1.11"),
    "cp1": ("v1.11.5", None),
    "cp3-wk20": ("v1.11.6", "v1.11"),
    "cp5-wk50": ("v1.12.7", "v1.11"),
}
# start -> (control planes, workers): the example's nodes first (cp-a.., wk-a, wk-b), then new ones (`resized`).
SIZES = {"cp1": (1, 0), "cp3-wk20": (3, 20), "cp5-wk50": (5, 50)}

Edit = dict[str, Any]


# ------------------------------------------------------------------------------------------------------ the site
def start_data(start: str = "v1.11.5") -> dict:
    """The example site with the standalone example's guests (L2) beside its cluster: one site, every layer."""
    data = yaml.safe_load(DEFAULT_SITE.read_text())
    data["standalone"] = yaml.safe_load((ROOT / "sites" / "standalone.yaml").read_text())["standalone"]
    talos, contract = STARTS[start]
    cluster(data)["talos_version"] = talos
    if contract:
        cluster(data)["config_contract"] = contract
    if start in SIZES:
        resized(data, *SIZES[start])
    return data


def resized(data: dict, planes: int, workers: int) -> None:
    """The example cluster with `planes` control planes and `workers` workers: its own nodes kept in name order
    (cp-a, cp-b, cp-c, wk-a, wk-b), then new ones (cp-d.., wk-s01..) with free addresses, the control planes spread
    over the hypervisors."""
    c = cluster(data)
    for kind, wanted, names in (
        ("control_planes", planes, [f"cp-{letter}" for letter in "defghijk"]),
        ("workers", workers, [f"wk-s{index:02d}" for index in range(1, 100)]),
    ):
        nodes = c.setdefault(kind, {})
        for name in sorted(nodes)[wanted:]:
            del nodes[name]
        base = 2000 if kind == "control_planes" else 2300
        for name in names[: max(wanted - len(nodes), 0)]:
            free = min(set(range(100, 250)) - used_octets(data))
            nodes[name] = new_node(base + free, free, _host_for(data, kind, free))
    if not c["workers"]:
        del c["workers"]


def _host_for(data: dict, kind: str, free: int) -> str:
    """A worker on pve1 or pve2 by its octet; a control plane on the site's hypervisor holding the fewest of them
    (the first by name on a tie), so the sizes keep the control-plane spread rule (ADR 0054)."""
    if kind == "workers":
        return ("pve1", "pve2")[free % 2]
    held = [node["hypervisor"] for node in cluster(data)["control_planes"].values()]
    return min(sorted(data["hypervisors"]), key=held.count)


def cluster(data: dict) -> dict:
    return data["clusters"][CLUSTER]


def guests(data: dict) -> dict:
    return data["standalone"]["nodes"]


def cluster_nodes(data: dict) -> dict[str, dict]:
    return {**cluster(data)["control_planes"], **cluster(data).get("workers", {})}


def new_node(vm_id: int, octet: int, hypervisor: str) -> dict:
    return {
        "hypervisor": hypervisor,
        "vm_id": vm_id,
        "cpu": 2,
        "memory_mib": 4096,
        "disk_gib": 40,
        "networks": {
            "maintenance_ip": f"10.0.0.{octet}",
            "vlans": {111: {"address": f"10.11.1.{octet}/24", "gateway": "10.11.1.1"}},
        },
    }


def new_guest(kind: str, parent: str, spec: str, vm_id: int, octet: int) -> dict:
    guest: dict[str, Any] = {
        "type": kind,
        "parent": parent,
        "spec": spec,
        "vm_id": vm_id,
        "bridge": "vmbr1" if parent == "pve1" else "vmbr0",
        "networks": {"vlans": {111: {"address": f"10.11.1.{octet}/24", "gateway": "10.11.1.1"}}},
    }
    if kind == "ct":
        guest.update(template="local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", unprivileged=True)
        guest["preset"] = "vm-xsmall"
    else:
        guest["image"] = "local:import/debian-12-genericcloud-amd64.qcow2"
    return guest


def used_octets(data: dict) -> set[int]:
    """Last octets taken on 10.11.1.0/24 and 10.0.0.0/24 (a new address is free on both)."""
    text = json.dumps(data)
    found = {1, 10}  # gateway, VIP
    for prefix in ("10.11.1.", "10.0.0."):
        for part in text.split(prefix)[1:]:
            digits = "".join(ch for ch in part[:3] if ch.isdigit())
            found.add(int(digits))
    return found


def apply_edit(data: dict, edit: Edit) -> dict:
    """The site after `edit` (a new dict; `data` is left as it was)."""
    data = copy.deepcopy(data)
    op, c = edit["op"], cluster(data)
    if op == "add_worker":
        c.setdefault("workers", {})[edit["node"]] = new_node(edit["vm_id"], edit["octet"], edit["hypervisor"])
    elif op == "remove_worker":
        del c["workers"][edit["node"]]
    elif op == "add_control_planes":
        for name, vm_id, octet, hypervisor in zip(
            edit["nodes"], edit["vm_ids"], edit["octets"], edit["hypervisors"], strict=True
        ):
            c["control_planes"][name] = new_node(vm_id, octet, hypervisor)
    elif op == "remove_control_planes":
        for name in edit["nodes"]:
            del c["control_planes"][name]
    elif op == "promote_workers":
        for name in edit["nodes"]:
            c["control_planes"][name] = c["workers"].pop(name)
    elif op == "rename":
        cluster_nodes(data)[edit["node"]]["hostname"] = edit["hostname"]
    elif op == "readdress":
        cluster_nodes(data)[edit["node"]]["networks"]["vlans"][111]["address"] = f"10.11.1.{edit['octet']}/24"
    elif op == "move":
        cluster_nodes(data)[edit["node"]]["hypervisor"] = edit["hypervisor"]
    elif op == "set_mac":
        cluster_nodes(data)[edit["node"]]["mac_address"] = edit["mac"]
    elif op == "labels_taints":
        node = cluster_nodes(data)[edit["node"]]
        node["labels"], node["taints"] = dict(edit["labels"]), [dict(t) for t in edit["taints"]]
    elif op in ("talos_patch", "talos_minor"):
        c["talos_version"] = edit["version"]
    elif op in ("pin_contract", "move_contract"):
        c["config_contract"] = edit["contract"]
    elif op == "kubernetes":
        c["kubernetes_version"] = edit["version"]
    elif op == "cilium_pools":
        c["cilium"]["pools"] = {name: list(cidrs) for name, cidrs in edit["pools"].items()}
    elif op == "add_guest":
        guests(data)[edit["node"]] = new_guest(edit["type"], edit["parent"], edit["spec"], edit["vm_id"], edit["octet"])
    elif op == "remove_guest":
        del guests(data)[edit["node"]]
    elif op == "resize_guest":
        guests(data)[edit["node"]][edit["field"]] = edit["value"]
    elif op == "respec_guest":
        guests(data)[edit["node"]]["spec"] = edit["spec"]
    else:
        raise ValueError(f"unknown edit {op!r}")
    return data


def named(edit: Edit) -> set[tuple[str, str]]:
    """The nodes an edit names: ("node", key) for a cluster node, ("sa", key) for a standalone guest."""
    kind = "sa" if edit["op"] in GUEST_OPS else "node"
    return {(kind, name) for name in edit.get("nodes", [edit["node"]] if "node" in edit else [])}


# ------------------------------------------------------------------------------------------------------ synth
_CACHE: OrderedDict[str, dict[str, dict]] = OrderedDict()
_OUTDIR: list[Path] = []
SYNTHS: Counter = Counter()  # "synth" (app.synth() ran) and "cached" (the same site again)
SECONDS: Counter = Counter()  # "synth", "judge", "validate": where a walk's time goes (benchmarks/lifecycle_walk.py)
SAFETY_RULE_RUNS: Counter = Counter()  # rule code -> checks of a stack, across the process


def synth(data: dict, tag: str = "") -> dict[str, dict]:
    """Every stack's JSON for the site (read-only: shared with the cache). `tag` separates runs whose constructs
    differ (a deliberately broken construct)."""
    key = tag + json.dumps(data, sort_keys=True)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        SYNTHS["cached"] += 1
        return _CACHE[key]
    started = time.perf_counter()
    site = support.site_from(data)
    if not _OUTDIR:
        _OUTDIR.append(Path(tempfile.mkdtemp(prefix="tv-walk-")))
    build_app(site, str(_OUTDIR[0])).synth()
    stacks = {
        name: json.loads((_OUTDIR[0] / "stacks" / name / "cdk.tf.json").read_text()) for name in stack_names(site)
    }
    SYNTHS["synth"] += 1
    SECONDS["synth"] += time.perf_counter() - started
    _CACHE[key] = stacks
    while len(_CACHE) > 400:
        _CACHE.popitem(last=False)
    return stacks


@contextmanager
def counting_safety_rules() -> Iterator[Counter]:
    """Counts each safety rule's checks (TV001…) while the walk runs: every rule judges every synthesized stack."""
    originals = {rule: rule.check for rule in ALL_RULES}

    def counted(rule: type, original: Callable) -> Callable:
        def check(self: object, view: object) -> None:
            SAFETY_RULE_RUNS[rule.code] += 1
            original(self, view)

        return check

    for rule, original in originals.items():
        rule.check = counted(rule, original)  # type: ignore[method-assign]
    try:
        yield SAFETY_RULE_RUNS
    finally:
        for rule, original in originals.items():
            rule.check = original  # type: ignore[method-assign]


# ------------------------------------------------------------------------------------------------------ a plan
def literal(value: object) -> object:
    """What a plan would show of a synthesized value that is known at plan time: references left out."""
    if isinstance(value, str):
        return None if "${" in value else value
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items() if k not in ("//", "lifecycle", "depends_on", "provider")}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def values(address: str, body: dict) -> dict:
    """A resource's values in the plan. An apply's resolved_apply_mode is what the talos provider answers after
    asking the node at plan time: 'auto' from a node that answers and needs no reboot for the change (a healthy
    cluster; a change that needs one would be 'staged', which the walk cannot know)."""
    found = literal(body)
    assert isinstance(found, dict)
    if address.startswith(APPLY + "."):
        found["resolved_apply_mode"] = "auto"
    return found


def _resource_addresses(stack: dict) -> dict[str, dict]:
    return {a: body for a, body in addresses(stack).items() if not a.startswith(("data.", "output."))}


def replaced(address: str, old: dict, new: dict, replaced_vms: set[str]) -> tuple[str, ...] | None:
    """Why Terraform would replace this resource rather than update it, as a replace path; None for an update.
    bpg replaces a VM or container on a new vm_id; an apply follows its VM through replace_triggered_by."""
    kind = address.split(".", 1)[0]
    if kind in MACHINES and old.get("vm_id") != new.get("vm_id"):
        return ("vm_id",)
    triggers = new.get("lifecycle", {}).get("replace_triggered_by", [])
    if any(trigger.rsplit(".", 1)[0] in replaced_vms for trigger in triggers):
        return ()
    return None


def plan_of(before: dict, after: dict, changes: Changes | None) -> dict:
    """`terraform show -json PLANFILE` of the step, as far as the synthesized JSON can say: today's state is the
    previous JSON's resources (literal values), each added/removed/changed resource one change."""
    old, new = _resource_addresses(before), _resource_addresses(after)
    prior = [
        {"address": a, "mode": "managed", "type": a.split(".")[0], "name": a.split(".", 1)[1], "values": values(a, b)}
        for a, b in sorted(old.items())
    ]
    result = []
    touched = changes.touched if changes else set()
    replaced_vms: set[str] = set()
    ordered = sorted(touched & (set(old) | set(new)), key=lambda a: (a.split(".")[0] not in MACHINES, a))
    for address in ordered:
        kind, name = address.split(".", 1)
        if address not in old:
            actions, before_v, after_v, why = ["create"], None, values(address, new[address]), None
        elif address not in new:
            actions, before_v, after_v, why = ["delete"], values(address, old[address]), None, None
        else:
            if effective(old[address]) == effective(new[address]) and not (
                changes and address in changes.changed and address in new
            ):
                continue
            why = replaced(address, old[address], new[address], replaced_vms)
            actions = ["delete", "create"] if why is not None else ["update"]
            before_v, after_v = values(address, old[address]), values(address, new[address])
            if why is not None and kind in MACHINES:
                replaced_vms.add(address)
        change: dict[str, Any] = {"actions": actions, "before": before_v, "after": after_v, "after_unknown": {}}
        item: dict[str, Any] = {"address": address, "mode": "managed", "type": kind, "name": name, "change": change}
        if why:
            change["replace_paths"] = [list(why)]
            item["action_reason"] = "replace_because_cannot_update"
        elif why == ():
            item["action_reason"] = "replace_by_triggers"
        result.append(item)
    # What Terraform writes as planned_values: every resource the configuration keeps, with its planned values.
    planned = [
        {"address": a, "mode": "managed", "type": a.split(".")[0], "name": a.split(".", 1)[1], "values": values(a, b)}
        for a, b in sorted(new.items())
    ]
    return {
        "format_version": "1.2",
        "terraform_version": "1.11.4",
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": result,
        "prior_state": {"format_version": "1.0", "values": {"root_module": {"resources": prior}}},
    }


# ------------------------------------------------------------------------------------------------------ judging
def owner(address: str) -> tuple[str, str] | None:
    name = address.split(".", 1)[1] if "." in address else address
    if address.startswith(("data.", "output.")):
        return None
    if (node := owner_of(name)) is not None:
        return ("node", node)
    if (guest := standalone_owner_of(name)) is not None:
        return ("sa", guest)
    return None


def allowed_cluster_level(
    edit: Edit, before: dict, after: dict, old: dict[str, dict], new: dict[str, dict]
) -> set[str]:
    """`stack:address` of the cluster-level resources an edit may change (besides its nodes' own)."""
    op = edit["op"]
    allowed: set[str] = set()
    if op in NODE_SET or op == "readdress":
        allowed |= NODE_LISTS
    bootstrap = [sorted(cluster(d)["control_planes"])[0] for d in (before, after)]
    if bootstrap[0] != bootstrap[1]:
        allowed |= KUBECONFIG
    # A hypervisor downloads the Talos image while a node of the cluster runs on it: the first node there brings
    # it, the last one to leave takes it away.
    hosting = [{node["hypervisor"] for node in cluster_nodes(d).values()} for d in (before, after)]
    for hypervisor in hosting[0] ^ hosting[1]:
        for stacks in (old, new):
            images = stacks[H].get("resource", {}).get("proxmox_download_file", {})
            allowed |= {f"{H}:proxmox_download_file.{name}" for name in images if name.startswith(f"hv_{hypervisor}_")}
    if op in ("talos_patch", "talos_minor"):  # the new release's image comes, the old one goes
        for stacks in (old, new):
            images = stacks[H].get("resource", {}).get("proxmox_download_file", {})
            allowed |= {f"{H}:proxmox_download_file.{name}" for name in images}
    if op in ("talos_minor", "move_contract", "kubernetes", "pin_contract"):
        allowed |= CONFIGS
    if op == "cilium_pools":
        allowed.add(f"{G}:helm_release.cluster_cilium_l2")
    return allowed


def judge(edit: Edit, before: dict, after: dict, old: dict[str, dict], new: dict[str, dict]) -> list[str]:
    """Every broken promise of one step (empty: the step keeps them all)."""
    problems: list[str] = []
    result = diff(old, new)
    names = named(edit)
    allowed = allowed_cluster_level(edit, before, after, old, new)
    leaving = {n for n in names if n[0] == "node" and n[1] not in cluster_nodes(after)}
    leaving |= {n for n in names if n[0] == "sa" and n[1] not in guests(after)}
    joining = {n for n in names if n[0] == "node" and n[1] not in cluster_nodes(before)}
    joining |= {n for n in names if n[0] == "sa" and n[1] not in guests(before)}
    for stack, changes in result.items():
        for address in sorted(changes.touched):
            how = "added" if address in changes.added else "removed" if address in changes.removed else "changed"
            what = f"{stack}: {address} {how}"
            if address.startswith(NEVER_CHANGED):
                problems.append(f"{what}: the cluster's secrets and bootstrap never change")
                continue
            kind = address.split(".", 1)[0]
            who = owner(address)
            if who is None:
                if f"{stack}:{address}" not in allowed:
                    problems.append(f"{what}: a cluster-level change {edit['op']} does not explain")
                continue
            if who not in names and edit["op"] in CLUSTER_WIDE and kind == APPLY and how == "changed":
                continue  # every node reconfigured in place: a new installer, Kubernetes or contract
            if who not in names:
                problems.append(
                    f"{what}: it belongs to {who[1]}, and the step names only {sorted(n for _, n in names)}"
                )
                continue
            if edit["op"] in CLUSTER_WIDE and (kind in MACHINES or how != "changed"):
                problems.append(f"{what}: a cluster-wide edit changes no machine and resets or replaces nothing")
            if who not in leaving and who not in joining and how != "changed":
                problems.append(f"{what}: {who[1]} stays, so its resources are neither created nor destroyed")
            if who in leaving and how != "removed":
                problems.append(f"{what}: {who[1]} leaves, so its resources only go")
            if who in joining and how != "added":
                problems.append(f"{what}: {who[1]} is new, so its resources only come")
            if how == "changed" and kind in MACHINES:
                before_body = addresses(old[stack])[address]
                after_body = addresses(new[stack])[address]
                if before_body.get("vm_id") != after_body.get("vm_id"):
                    problems.append(f"{what}: its vm_id changed (a new machine)")
                if before_body.get("node_name") != after_body.get("node_name") and edit["op"] != "move":
                    problems.append(f"{what}: it moved to another hypervisor, and the step is not a move")
    problems += guard_problems(edit, after, old, new, result)
    return problems


def guard_problems(
    edit: Edit, after: dict, old: dict[str, dict], new: dict[str, dict], result: dict[str, Changes]
) -> list[str]:
    """The plan guard on each changed layer's derived plan: ok for every legal step; for two control planes at once,
    PG002 alone, and every step of deploy's sequence (ADR 0037) ok."""
    from terravixens.operations.scale_in import sequence_of

    problems: list[str] = []
    site = support.site_from(after)
    usage = site_usage(site)
    layers = SiteLayers.of(site)
    for stack in sorted(result):
        plan = plan_of(old.get(stack, {}), new.get(stack, {}), result[stack])
        layer = layers.get(stack)  # None: a layer the site no longer has
        roles = site_roles(site, layer) if layer is not None else {}
        context = GuardContext(roles=roles, usage=usage, reboot_checks=RebootChecks())  # every node answered
        refused = refusals(check_plan(plan, context))
        codes = sorted({violation.code for violation in refused})
        two_leave = edit["op"] == "remove_control_planes" and stack == P
        if two_leave:
            if codes != ["PG002"]:
                problems.append(f"{stack}: the guard says {codes or 'ok'} to two control planes at once, not PG002")
            problems += sequence_problems(sequence_of(site, layers.named(stack), read_plan(plan)), plan, context)
        elif refused:
            problems.append(f"{stack}: the guard refuses a legal step: {[v.code + ' ' + str(v) for v in refused]}")
        disrupted = {
            name
            for name, view in node_view(read_plan(plan), context).nodes.items()
            if view.fate in DISRUPTED and ("node", name) not in named(edit) and ("sa", name) not in named(edit)
        }
        if disrupted:
            problems.append(f"{stack}: the guard sees nodes the step does not name disrupted: {sorted(disrupted)}")
    return problems


def sequence_problems(sequence: Any, plan: dict, context: GuardContext) -> list[str]:
    """Deploy's sequence for a plan that takes several control planes (targeted steps, then the rest), each judged by
    the guard as deploy would."""
    if sequence is None:
        return ["deploy would not sequence a plan in which two control planes leave"]
    problems: list[str] = []
    done: set[str] = set()
    for step in sequence.steps:
        targets = set(step.targets) if step.targets else {c["address"] for c in plan["resource_changes"]} - done
        part = {**plan, "resource_changes": [c for c in plan["resource_changes"] if c["address"] in targets]}
        done |= targets
        refused = refusals(check_plan(part, context))
        if refused:
            problems.append(f"deploy's step '{step.title}' is refused: {[v.code for v in refused]}")
    leaving = [step for step in sequence.steps if step.kind == "control plane"]
    if len(leaving) != 2:
        problems.append(f"deploy's sequence takes {len(leaving)} control planes one by one, not 2")
    return problems


# ------------------------------------------------------------------------------------------------------ a walk
def walk_json(start: str, edits: list[Edit]) -> str:
    return json.dumps({"start": start, "edits": edits}, sort_keys=False)


@dataclass
class Walker:
    """A site walked edit by edit; each step judged. `tag` marks a run with a deliberately broken construct."""

    start: str = "v1.11.5"
    tag: str = ""
    data: dict = field(default_factory=dict)
    edits: list[Edit] = field(default_factory=list)
    pending: dict[str, dict] = field(default_factory=dict)  # request key -> Talos validator request
    steps: int = 0

    def __post_init__(self) -> None:
        self.data = start_data(self.start)
        self.stacks = self.synthesized(self.data)

    def replay_text(self) -> str:
        return f"replay with tests/lifecycle_replay.py:\nWALK = {walk_json(self.start, self.edits)}"

    def synthesized(self, data: dict) -> dict[str, dict]:
        try:
            return synth(data, self.tag)
        except Exception as error:  # a rule or a site problem: the walk's fault or the library's, never skipped
            raise AssertionError(f"synth failed after the edits: {error}\n{self.replay_text()}") from error

    def step(self, edit: Edit, shrink: bool = False) -> None:
        """One edit, judged. With `shrink`, a failure is first reduced to the fewest edits that still fail the same
        way (`shrunk`), and the message shows that walk."""
        self.edits.append(edit)
        after = apply_edit(self.data, edit)
        try:
            stacks = self.synthesized(after)
        except AssertionError as error:
            if shrink:
                raise AssertionError(f"{error}\n{shrunk_text(self, failure_of(str(error)))}") from None
            raise
        started = time.perf_counter()
        problems = judge(edit, self.data, after, self.stacks, stacks)
        SECONDS["judge"] += time.perf_counter() - started
        if problems:
            text = (
                f"step {len(self.edits)} ({edit['op']}) {BROKE}:\n  "
                + "\n  ".join(problems)
                + f"\n{self.replay_text()}"
            )
            raise AssertionError(f"{text}\n{shrunk_text(self, BROKE)}" if shrink else text)
        self.queue_configurations(self.stacks, stacks)
        self.data, self.stacks = after, stacks
        self.steps += 1

    def queue_configurations(self, old: dict[str, dict], new: dict[str, dict]) -> None:
        changed = {
            f"{stack}/{address.split('.', 1)[1]}"
            for stack, changes in diff(old, new).items()
            for address in changes.added | changes.changed
            if address.startswith(APPLY + ".")
        }
        for request in talos_tool.requests({name: new[name] for name in new if name.startswith("platform-")}):
            if request["name"] in changed:
                self.pending[json.dumps(request, sort_keys=True)] = request

    def validate_configurations(self) -> int:
        """Talos' validator over every configuration this walk changed (one call per Talos minor); returns how many
        it judged. Configurations already judged in this process are not sent again."""
        self.queue_for_validation()
        return validate_queued()

    def queue_for_validation(self) -> None:
        """Hands this walk's configurations to the process-wide batch (`validate_queued`), each with the walk that
        made it: one validator call per Talos minor for many walks (one call costs about 1.5 s on a shared
        machine, a third of the `make test` budget when made per walk)."""
        for key, request in self.pending.items():
            QUEUED.setdefault(key, (request, walk_json(self.start, self.edits)))
        self.pending = {}


QUEUED: dict[str, tuple[dict, str]] = {}  # request key -> (Talos validator request, the walk that made it)


def validate_queued() -> int:
    """Talos' validator over every queued configuration not judged yet in this process, one call per Talos minor;
    a refusal names the configuration and the walk to replay. Returns how many were judged."""
    todo = {key: item for key, item in QUEUED.items() if key not in VALIDATED_KEYS}
    QUEUED.clear()
    names: dict[str, str] = {}
    requests = []
    for index, (request, walk) in enumerate(todo[key] for key in sorted(todo)):
        named_request = {**request, "name": f"{index}:{request['name']}"}  # one name per request of the batch
        names[named_request["name"]] = walk
        requests.append(named_request)
    failures = []
    started = time.perf_counter()
    for minor, group in sorted(talos_tool.by_minor(requests).items()):
        for verdict in talos_tool.validate(minor, group).verdicts:
            if not verdict.ok:
                failures.append(f"{verdict.name} (Talos {minor}): {verdict.errors}\nWALK = {names[verdict.name]}")
    SECONDS["validate"] += time.perf_counter() - started
    if failures:
        raise AssertionError("Talos' validator refuses configurations of these walks:\n  " + "\n  ".join(failures))
    VALIDATED_KEYS.update(todo)
    return len(todo)


VALIDATED_KEYS: set[str] = set()
BROKE, SYNTH_FAILED = "broke the lifecycle promise", "synth failed after the edits"
SHRINK_REPLAYS = 40  # at most this many walks replayed to shrink one failure (each step memoized)


def failure_of(message: str) -> str:
    """What kind of failure a message says: the promise broken, or synth refusing with this very message."""
    if BROKE in message.split("\n", 1)[0]:
        return BROKE
    return message.split("\nreplay with", 1)[0]


def fails_the_same_way(start: str, edits: list[Edit], tag: str, how: str) -> bool:
    """Whether the walk fails as the original did: the promise broken (or synth refusing) at its last step. A
    candidate that is not a walk the site allows (an edit of a node no longer there) does not count."""
    walker = Walker(start=start, tag=tag)
    for index, edit in enumerate(edits):
        try:
            walker.step(edit)
        except (KeyError, ValueError):
            return False
        except AssertionError as error:
            return index == len(edits) - 1 and failure_of(str(error)) == how
    return False


def shrink(start: str, edits: list[Edit], tag: str, how: str) -> list[Edit]:
    """The fewest edits (one dropped at a time, bounded by SHRINK_REPLAYS) that still fail the same way. Hypothesis
    shrinks too, but each of its attempts is a new site to synthesize: minutes on a shared machine; this is bounded."""
    replays = 0
    current = list(edits)
    dropped = True
    while dropped and len(current) > 1 and replays < SHRINK_REPLAYS:
        dropped = False
        for index in range(len(current) - 1):  # the failing edit stays last
            candidate = current[:index] + current[index + 1 :]
            replays += 1
            if fails_the_same_way(start, candidate, tag, how):
                current, dropped = candidate, True
                break
            if replays >= SHRINK_REPLAYS:
                break
    return current


def shrunk_text(walker: Walker, how: str) -> str:
    edits = shrink(walker.start, walker.edits, walker.tag, how)
    return f"shrunk to {len(edits)} of {len(walker.edits)} edits:\nWALK = {walk_json(walker.start, edits)}"


def replay(walk: dict | str, tag: str = "") -> Walker:
    """Runs a printed walk (`{"start": ..., "edits": [...]}`, or its JSON) with every check; returns the walker."""
    walk = json.loads(walk) if isinstance(walk, str) else walk
    walker = Walker(start=walk["start"], tag=tag)
    for edit in walk["edits"]:
        walker.step(edit)
    walker.validate_configurations()
    return walker
