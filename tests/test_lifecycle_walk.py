"""The lifecycle promise under random walks: a hypothesis state machine edits one site step by step (issue 21).

The site is the example cluster with the standalone example's guests beside it (every layer: hypervisors,
platform-prod, gitops-prod, standalone, standalone-nest1), started on one of three Talos positions. Each rule is one
site edit an operator makes — add/remove a worker, add/remove two control planes, promote two workers, rename,
re-address inside the VLAN, move to the other hypervisor, set/change a static MAC, edit labels and taints, a Talos
patch, a Talos minor with the contract pinned, moving the contract, Kubernetes inside Talos' range, the Cilium pools,
and for L2 add/remove/resize/re-spec a guest. Preconditions keep the site valid (odd control planes, free addresses
and ids, names never reused for another machine except by the rule that re-adds a removed worker's name); the site
loader and the safety rules are the judge: a site they refuse fails the walk, it is never skipped.

After each step tests/lifecycle.py judges the difference of the synthesized JSON (see its docstring); a failure
prints the walk as JSON, shrunk by hypothesis, which tests/lifecycle_replay.py turns into a regression test.

Walks at every size (issue 27): a walk may repeat a kind of edit (one step in four); `Walk` starts from the example's
size at three Talos positions or from one control plane alone, `LargeWalk` from 3 + 20 and 5 + 50 nodes, and
`GrowingWalk` grows one control plane alone to 7 control planes (1 -> 3 -> 5 -> 7) and past 10 workers, one node at a
time, with other edits on the way.

Budget: `make test` runs BUDGET, LARGE_BUDGET and GROWING_BUDGET (derandomized: the same walks every run; a test
asserts every start and every edit was taken and that a walk grew); `pytest -m fuzz_nightly` runs ten times as many
walks, each twice as long, with fresh randomness.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable

import pytest
import yaml
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from terravixens import talos_versions as versions
from terravixens.config.site_rules.failure_domains import hypervisors_needed, majority
from terravixens.rules import ALL_RULES
from tests import lifecycle
from tests.conftest import SUMMARY_LINES
from tests.lifecycle import STARTS, Walker, apply_edit, cluster, cluster_nodes, guests, used_octets

EXAMPLES, STEPS = 11, 8  # walks (Walk) from the example's size (three Talos positions) and one control plane alone
LARGE, LARGE_EXAMPLES = ["cp3-wk20", "cp5-wk50"], 2  # walks (LargeWalk) from large sites
GROWING, GROWING_STEPS = 3, 16  # growing walks (GrowingWalk), from one control plane alone
BUDGET = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    # A failing walk is shrunk by tests/lifecycle.py (edits dropped one at a time, bounded): hypothesis' own shrinker
    # synthesizes a new site per attempt and ran for over five minutes on the shared machine.
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
LARGE_BUDGET = settings(BUDGET, max_examples=LARGE_EXAMPLES)
GROWING_BUDGET = settings(BUDGET, max_examples=GROWING, stateful_step_count=GROWING_STEPS)
# Nightly: ten times the walks (TERRAVIXENS_WALK_EXAMPLES), each twice as long, fresh randomness.
NIGHTLY = settings(
    BUDGET,
    max_examples=int(os.environ.get("TERRAVIXENS_WALK_EXAMPLES", str(EXAMPLES * 10))),
    stateful_step_count=STEPS * 2,
    derandomize=False,
)
LARGE_NIGHTLY = settings(NIGHTLY, max_examples=max(NIGHTLY.max_examples * LARGE_EXAMPLES // EXAMPLES, 1))
GROWING_NIGHTLY = settings(
    NIGHTLY, max_examples=max(NIGHTLY.max_examples * GROWING // EXAMPLES, 1), stateful_step_count=GROWING_STEPS * 2
)
RULES_RUN: Counter = Counter()  # machine rule -> steps taken with it, across the process
WALKS: list[tuple[str, list[tuple[int, int]]]] = []  # (start, (control planes, workers) after each step) per walk
HOSTNAME_LABELS = ["node.kubernetes.io/pool", "topology.kubernetes.io/zone", "example.com/tier"]
TAINT_KEYS = ["dedicated", "example.com/gpu"]
POOL_BLOCKS = [f"10.12.0.{128 + 16 * i}/28" for i in range(8)]  # clear of the nodes' 10.12.0.x (< 128)
SPECS = ["dns", "jump", "tools"]


EDITS: dict[str, tuple[Callable, Callable, int]] = {}  # edit rule -> (method, enabled?, weight)


def edit_rule(enabled: Callable = lambda self: True, weight: int = 1) -> Callable:
    """One lifecycle edit of the machine. The edits are drawn by one hypothesis rule (`Walk.edit`), uniformly among
    those enabled (weighted for the Talos path, enabled in few states): hypothesis' swarm testing, which switches
    whole rules off per walk, left some edits untaken in the `make test` budget."""

    def register(method: Callable) -> Callable:
        EDITS[method.__name__] = (method, enabled, weight)
        return method

    return register


def octet(data, draw) -> int:
    return draw(st.sampled_from(sorted(set(range(100, 250)) - used_octets(data))))


def hosts(data: dict) -> list[str]:
    return sorted(data["hypervisors"])


def spread_ok(data: dict) -> bool:
    """The site keeps the control-plane spread rule (ADR 0054): no hypervisor holds a majority of the control planes
    when the site has enough hypervisors to avoid it (then it is only a warning). The walk's edits keep to it: a
    site it refuses is not a lifecycle step."""
    planes = [node["hypervisor"] for node in cluster(data)["control_planes"].values()]
    needed = hypervisors_needed(len(planes))
    if needed is None or len(data["hypervisors"]) < needed:
        return True
    return max(planes.count(host) for host in set(planes)) < majority(len(planes))


def spread_after(data: dict, edit: dict) -> bool:
    return spread_ok(apply_edit(data, edit))


class Walk(RuleBasedStateMachine):
    tag = ""

    def __init__(self) -> None:
        super().__init__()
        self.walker: Walker | None = None
        self.failed = False
        self.serial = 0
        self.taken: set[str] = set()

    # ------------------------------------------------------------------------------------------ plumbing
    @property
    def data(self) -> dict:
        assert self.walker is not None
        return self.walker.data

    def fresh(self) -> int:
        self.serial += 1
        return self.serial

    def vm_ids(self) -> set[int]:
        ids = {node["vm_id"] for node in cluster_nodes(self.data).values()}
        return ids | {guest["vm_id"] for guest in guests(self.data).values()}

    def free_vm_id(self, start: int) -> int:
        taken = self.vm_ids()
        return next(vm_id for vm_id in range(start + self.fresh(), start + 10_000) if vm_id not in taken)

    def names_used(self) -> set[str]:
        return (
            set(cluster_nodes(self.data))
            | set(guests(self.data))
            | {node.get("hostname") for node in cluster_nodes(self.data).values() if node.get("hostname")}
        )

    def step(self, rule_name: str, edit: dict) -> None:
        RULES_RUN[rule_name] += 1
        assert self.walker is not None
        try:
            self.walker.step(edit, shrink=True)
        except BaseException:
            self.failed = True
            raise
        planes, workers = len(cluster(self.data)["control_planes"]), len(cluster(self.data).get("workers", {}))
        self.sizes.append((planes, workers))

    def teardown(self) -> None:
        if self.walker is not None and not self.failed:
            self.walker.queue_for_validation()  # judged in one batch after the walks (run_walks)
            WALKS.append((self.walker.start, self.sizes))

    # In STARTS' order: derandomized, these are the walks `make test` runs; a test asserts every start and every edit
    # was taken (another order left cilium_pools untaken).
    @initialize(start=st.sampled_from([start for start in STARTS if start not in LARGE]))
    def begin(self, start: str) -> None:
        self.start(start)

    def start(self, start: str) -> None:
        self.walker = Walker(start=start, tag=self.tag)
        self.removed: list[str] = []
        c = cluster(self.data)
        self.sizes: list[tuple[int, int]] = [(len(c["control_planes"]), len(c.get("workers", {})))]

    @rule(data=st.data())
    def edit(self, data) -> None:
        enabled = [name for name, (_, ok, weight) in sorted(EDITS.items()) if ok(self) for _ in range(weight)]
        name = self.choose(data, enabled)
        self.taken.add(name)
        EDITS[name][0](self, data)

    def choose(self, data, enabled: list[str]) -> str:
        """A walk tries kinds of edit it has not taken yet first, but one step in four may repeat a kind (a second
        worker, a second rename); the list turns with each step: hypothesis draws low indices far more often than
        high ones, which left the end of a fixed list untaken."""
        fresh = [name for name in enabled if name not in self.taken]
        # (hypothesis draws the first element of a list most often: the common answer comes first)
        repeat = not fresh or data.draw(st.sampled_from([False, True, False, False]), label="repeat a kind")
        choices = enabled if repeat else fresh
        turn = (7 * len(self.taken) + self.serial) % len(choices)
        return data.draw(st.sampled_from(choices[turn:] + choices[:turn]), label="edit")

    # ------------------------------------------------------------------------------------------ node set
    @edit_rule()
    def add_worker(self, data) -> None:
        reuse = self.removed and data.draw(st.booleans(), label="reuse a removed name")
        taken = self.names_used()
        if reuse:
            name = data.draw(st.sampled_from(sorted(set(self.removed) - taken) or ["wk-x"]), label="name")
        else:
            name = f"wk-{self.fresh():02d}"
        if name in taken:
            name = f"wk-{self.fresh():02d}"
        edit = {
            "op": "add_worker",
            "node": name,
            "vm_id": self.free_vm_id(1300),
            "octet": octet(self.data, data.draw),
            "hypervisor": data.draw(st.sampled_from(hosts(self.data)), label="hypervisor"),
        }
        self.step("add_worker", edit)

    @edit_rule(lambda self: bool(cluster(self.data).get("workers")))
    def remove_worker(self, data) -> None:
        name = data.draw(st.sampled_from(sorted(cluster(self.data)["workers"])), label="worker")
        self.step("remove_worker", {"op": "remove_worker", "node": name})
        self.removed.append(name)

    @edit_rule(lambda self: len(cluster(self.data)["control_planes"]) <= 5)
    def add_control_planes(self, data) -> None:
        names = [f"cp-{self.fresh():02d}", f"cp-{self.fresh():02d}"]
        names = [n for n in names if n not in self.names_used()]
        first = octet(self.data, data.draw)
        second = data.draw(st.sampled_from(sorted(set(range(100, 250)) - used_octets(self.data) - {first})))
        vm_id = self.free_vm_id(1150)
        edit = {
            "op": "add_control_planes",
            "nodes": names,
            "vm_ids": [vm_id, next(i for i in range(vm_id + 1, vm_id + 100) if i not in self.vm_ids())],
            "octets": [first, second],
            "hypervisors": data.draw(st.lists(st.sampled_from(hosts(self.data)), min_size=2, max_size=2)),
        }
        if not spread_after(self.data, edit):  # the two least loaded hosts instead: a spread the site accepts
            load = dict.fromkeys(hosts(self.data), 0)
            for node in cluster(self.data)["control_planes"].values():
                load[node["hypervisor"]] += 1
            first = min(load, key=lambda host: (load[host], host))
            load[first] += 1
            edit["hypervisors"] = [first, min(load, key=lambda host: (load[host], host))]
        self.step("add_control_planes", edit)

    def pairs(self, names: list[str], op: str) -> list[list[str]]:
        """The pairs of `names` whose `op` keeps the control planes spread."""
        found = [[a, b] for i, a in enumerate(names) for b in names[i + 1 :]]
        return [pair for pair in found if spread_after(self.data, {"op": op, "nodes": pair})]

    @edit_rule(
        lambda self: (
            len(cluster(self.data)["control_planes"]) >= 3
            and bool(self.pairs(sorted(cluster(self.data)["control_planes"]), "remove_control_planes"))
        )
    )
    def remove_control_planes(self, data) -> None:
        """Two at once: the guard refuses the plan as it is (PG002); deploy's sequence takes them one by one."""
        pairs = self.pairs(sorted(cluster(self.data)["control_planes"]), "remove_control_planes")
        names = data.draw(st.sampled_from(pairs), label="planes")
        self.step("remove_control_planes", {"op": "remove_control_planes", "nodes": sorted(names)})
        self.removed += names

    @edit_rule(
        lambda self: (
            len(cluster(self.data).get("workers", {})) >= 2
            and len(cluster(self.data)["control_planes"]) <= 5
            and bool(self.pairs(sorted(cluster(self.data)["workers"]), "promote_workers"))
        )
    )
    def promote_workers(self, data) -> None:
        """Two at a time: the control planes stay odd (and spread)."""
        pairs = self.pairs(sorted(cluster(self.data)["workers"]), "promote_workers")
        names = data.draw(st.sampled_from(pairs), label="workers")
        self.step("promote_workers", {"op": "promote_workers", "nodes": sorted(names)})

    # ------------------------------------------------------------------------------------------ one node
    def some_node(self, data) -> str:
        return data.draw(st.sampled_from(sorted(cluster_nodes(self.data))), label="node")

    @edit_rule()
    def rename(self, data) -> None:
        name = self.some_node(data)
        self.step("rename", {"op": "rename", "node": name, "hostname": f"{name}-h{self.fresh()}"})

    @edit_rule()
    def readdress(self, data) -> None:
        name = self.some_node(data)
        self.step("readdress", {"op": "readdress", "node": name, "octet": octet(self.data, data.draw)})

    def moves(self) -> list[dict]:
        """Each node to each other hypervisor, where the control planes stay spread: a worker can always move; three
        control planes spread over three hosts and no worker leave no move at all."""
        moves = [
            {"op": "move", "node": name, "hypervisor": host}
            for name, node in sorted(cluster_nodes(self.data).items())
            for host in hosts(self.data)
            if host != node["hypervisor"]
        ]
        return [m for m in moves if spread_after(self.data, m)]

    @edit_rule(lambda self: bool(self.moves()))
    def move(self, data) -> None:
        """A node to another hypervisor (one that keeps the control planes spread)."""
        edit = data.draw(st.sampled_from(self.moves()), label="move")
        self.step("move", edit)

    @edit_rule()
    def set_mac(self, data) -> None:
        name = self.some_node(data)
        serial = self.fresh()
        self.step(
            "set_mac", {"op": "set_mac", "node": name, "mac": f"02:00:0A:0B:{serial // 256:02X}:{serial % 256:02X}"}
        )

    @edit_rule()
    def labels_taints(self, data) -> None:
        name = self.some_node(data)
        labels = data.draw(
            st.dictionaries(st.sampled_from(HOSTNAME_LABELS), st.sampled_from(["a", "b", "general"]), max_size=3)
        )
        taint_keys = data.draw(st.lists(st.sampled_from(TAINT_KEYS), unique=True, max_size=2))
        effects = data.draw(
            st.lists(st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]), min_size=2, max_size=2)
        )
        taints = [
            {"key": key, "value": "true", "effect": effect}
            for key, effect in zip(taint_keys, effects[: len(taint_keys)], strict=True)
        ]
        self.step("labels_taints", {"op": "labels_taints", "node": name, "labels": labels, "taints": taints})

    # ------------------------------------------------------------------------------------------ cluster-wide
    def talos(self) -> tuple[int, int, int]:
        return tuple(int(part) for part in cluster(self.data)["talos_version"].lstrip("v").split("."))  # type: ignore[return-value]

    def kubernetes(self) -> tuple[int, int, int]:
        return tuple(int(part) for part in cluster(self.data)["kubernetes_version"].lstrip("v").split("."))  # type: ignore[return-value]

    @edit_rule()
    def talos_patch(self, data) -> None:
        bump = data.draw(st.integers(1, 3), label="patches ahead")
        major, minor, patch = self.talos()
        self.step("talos_patch", {"op": "talos_patch", "version": f"v{major}.{minor}.{patch + bump}"})

    @edit_rule(lambda self: cluster(self.data).get("config_contract") is None, weight=3)
    def pin_contract(self, data) -> None:
        """What docs/commands.md asks before a minor bump: the contract of today, written down (changes nothing)."""
        major, minor, _ = self.talos()
        self.step("pin_contract", {"op": "pin_contract", "contract": f"v{major}.{minor}"})

    def next_minor_fits(self) -> bool:
        major, minor, _ = self.talos()
        kube = self.kubernetes()[:2]
        return (major, minor + 1) in versions.KUBERNETES and versions.kubernetes_supported((major, minor + 1), kube)

    @edit_rule(lambda self: cluster(self.data).get("config_contract") is not None and self.next_minor_fits(), weight=3)
    def talos_minor(self, data) -> None:
        """One minor at a time, the contract pinned (`terravixens upgrade` runs the nodes' OS upgrade)."""
        major, minor, _ = self.talos()
        patch = data.draw(st.integers(0, 7), label="patch")
        self.step("talos_minor", {"op": "talos_minor", "version": f"v{major}.{minor + 1}.{patch}"})

    @edit_rule(
        lambda self: (
            cluster(self.data).get("config_contract") is not None
            and versions.minor_of(cluster(self.data)["config_contract"]) < self.talos()[:2]
        ),
        weight=3,
    )
    def move_contract(self, data) -> None:
        """Deliberately, once the nodes run the newer minor: never ahead of talos_version."""
        major, contract = versions.minor_of(cluster(self.data)["config_contract"])
        target = data.draw(st.integers(contract + 1, self.talos()[1]), label="contract minor")
        self.step("move_contract", {"op": "move_contract", "contract": f"v{major}.{target}"})

    @edit_rule()
    def kubernetes_bump(self, data) -> None:
        major, minor, patch = self.kubernetes()
        newest = versions.kubernetes_range(self.talos()[:2])[1]
        choices = [f"v{major}.{minor}.{patch + k}" for k in (1, 2, 3)]
        if (major, minor + 1) <= newest:
            choices += [f"v{major}.{minor + 1}.{k}" for k in (0, 1, 2)]
        version = data.draw(st.sampled_from(choices), label="kubernetes")
        self.step("kubernetes_bump", {"op": "kubernetes", "version": version})

    @edit_rule()
    def cilium_pools(self, data) -> None:
        blocks = data.draw(st.lists(st.sampled_from(POOL_BLOCKS), unique=True, min_size=1, max_size=3))
        names = ["services", "edge", "lab"]
        pools = {names[i]: [block] for i, block in enumerate(blocks)}
        self.step("cilium_pools", {"op": "cilium_pools", "pools": pools})

    # ------------------------------------------------------------------------------------------ L2 guests
    def some_guest(self, data, movable: bool = False) -> str:
        names = sorted(
            name for name, guest in guests(self.data).items() if not movable or guest["type"] in ("vm", "ct")
        )
        return data.draw(st.sampled_from(names), label="guest")

    @edit_rule()
    def add_guest(self, data) -> None:
        kind = data.draw(st.sampled_from(["vm", "ct"]), label="type")
        parent = data.draw(st.sampled_from(["pve1", "nest1"]), label="parent")
        edit = {
            "op": "add_guest",
            "node": f"g-{self.fresh():02d}",
            "type": kind,
            "parent": parent,
            "spec": "dns" if kind == "ct" else data.draw(st.sampled_from(["jump", "tools"]), label="spec"),
            "vm_id": self.free_vm_id(3100) if parent == "pve1" else self.free_nested_id(),
            "octet": octet(self.data, data.draw),
        }
        self.step("add_guest", edit)

    def free_nested_id(self) -> int:
        taken = {g["vm_id"] for g in guests(self.data).values() if g["parent"] == "nest1"}
        return next(vm_id for vm_id in range(110 + self.fresh(), 10_000) if vm_id not in taken)

    @edit_rule(lambda self: any(g["type"] in ("vm", "ct") for g in guests(self.data).values()))
    def remove_guest(self, data) -> None:
        self.step("remove_guest", {"op": "remove_guest", "node": self.some_guest(data, movable=True)})

    @edit_rule()
    def resize_guest(self, data) -> None:
        name = self.some_guest(data)
        field, values = data.draw(
            st.sampled_from(
                [("cores", range(1, 9)), ("memory_mib", range(1024, 16385, 1024)), ("disk_gib", range(8, 129, 8))]
            ),
            label="what",
        )
        edit = {"op": "resize_guest", "node": name, "field": field, "value": data.draw(st.sampled_from(list(values)))}
        self.step("resize_guest", edit)

    @edit_rule(lambda self: any(g["type"] in ("vm", "ct") for g in guests(self.data).values()))
    def respec_guest(self, data) -> None:
        name = self.some_guest(data, movable=True)
        self.step("respec_guest", {"op": "respec_guest", "node": name, "spec": data.draw(st.sampled_from(SPECS))})


MACHINE_RULES = sorted(EDITS)
GROWN_WORKERS, GROWN_PLANES = 10, 7  # what a growing walk reaches before it edits anything else at will


class LargeWalk(Walk):
    """A walk from a site whose worker pool is well past the example's (3 + 20, 5 + 50 nodes): every edit where
    a node is one of many, and a new name sorts among dozens."""

    @initialize(start=st.sampled_from(LARGE))
    def begin(self, start: str) -> None:
        self.start(start)


class GrowingWalk(Walk):
    """A walk that grows a cluster from one control plane alone: workers one at a time past GROWN_WORKERS, control
    planes 1 -> 3 -> 5 -> 7, with one step in four any other edit on the way (so renames, moves, removals and
    upgrades happen at every size); once grown, any edit. A defect that appears only past some size, or that
    depends on a node's place among many, shows on the step that crosses it."""

    @initialize(start=st.just("cp1"))
    def begin(self, start: str) -> None:
        self.start(start)

    def choose(self, data, enabled: list[str]) -> str:
        c = cluster(self.data)
        grow = [
            *(["add_worker"] * 3 if len(c.get("workers", {})) < GROWN_WORKERS else []),
            *(["add_control_planes"] if len(c["control_planes"]) < GROWN_PLANES else []),
        ]
        if grow and data.draw(st.sampled_from([True, False, True, True]), label="grow"):
            return data.draw(st.sampled_from(grow), label="edit")
        return super().choose(data, enabled)


def test_every_listed_edit_is_a_rule():
    """Issue 21's list, one rule each (the walk's coverage test below then asserts that each one ran)."""
    assert (
        sorted(
            [
                "add_worker",
                "remove_worker",
                "add_control_planes",
                "remove_control_planes",
                "promote_workers",
                "rename",
                "readdress",
                "move",
                "set_mac",
                "labels_taints",
                "talos_patch",
                "pin_contract",
                "talos_minor",
                "move_contract",
                "kubernetes_bump",
                "cilium_pools",
                "add_guest",
                "remove_guest",
                "resize_guest",
                "respec_guest",
            ]
        )
        == MACHINE_RULES
    )


def run_walks(*runs: tuple[type[Walk], settings]) -> str:
    before = (lifecycle.SYNTHS["synth"], sum(RULES_RUN.values()), len(lifecycle.VALIDATED_KEYS), len(WALKS))
    started = time.monotonic()
    for machine, config in runs:
        run_state_machine_as_test(machine, settings=config)
    lifecycle.validate_queued()
    steps = sum(RULES_RUN.values()) - before[1]
    walks = WALKS[before[3] :]
    kinds = " + ".join(f"{c.max_examples} {m.__name__} of up to {c.stateful_step_count} steps" for m, c in runs)
    planes = max(p for _, sizes in walks for p, _ in sizes)
    workers = max(w for _, sizes in walks for _, w in sizes)
    return (
        f"lifecycle walk: {kinds}, {steps} steps in {time.monotonic() - started:.0f} s "
        f"({lifecycle.SYNTHS['synth'] - before[0]} synths), {len(lifecycle.VALIDATED_KEYS) - before[2]} node "
        f"configurations judged by Talos' validator; starts {dict(sorted(Counter(s for s, _ in walks).items()))}; "
        f"largest {planes} control planes, {workers} workers"
    )


def grew(sizes: list[tuple[int, int]]) -> bool:
    """Whether a walk's control planes went 1 -> 3 -> 5 -> 7 and its workers past GROWN_WORKERS."""
    planes = [p for p, _ in sizes]
    return (
        all(planes.index(n) < planes.index(n + 2) for n in (1, 3, 5) if n in planes and n + 2 in planes)
        and {1, 3, 5, 7} <= set(planes)
        and max(w for _, w in sizes) >= GROWN_WORKERS
    )


def test_the_lifecycle_promise_holds_on_random_walks():
    with lifecycle.counting_safety_rules() as safety:
        SUMMARY_LINES.append(run_walks((Walk, BUDGET), (LargeWalk, LARGE_BUDGET), (GrowingWalk, GROWING_BUDGET)))
    assert sorted(RULES_RUN) == MACHINE_RULES, f"rules never taken: {sorted(set(MACHINE_RULES) - set(RULES_RUN))}"
    assert sorted(safety) == sorted(rule.code for rule in ALL_RULES)
    assert {start for start, _ in WALKS} == set(STARTS), f"starts never taken: {set(STARTS) - {s for s, _ in WALKS}}"
    assert any(grew(sizes) for _, sizes in WALKS), f"no walk grew: {[sizes for _, sizes in WALKS]}"
    repeated = [RULES_RUN[name] for name in ("add_worker", "rename", "readdress")]
    assert min(repeated) >= 2, f"kinds of edit a walk repeats, taken {repeated} times"


@pytest.mark.fuzz_nightly
def test_the_lifecycle_promise_holds_on_random_walks_nightly():
    with lifecycle.counting_safety_rules():
        SUMMARY_LINES.append(run_walks((Walk, NIGHTLY), (LargeWalk, LARGE_NIGHTLY), (GrowingWalk, GROWING_NIGHTLY)))


# ---------------------------------------------------------------------------------------- the walk can fail
def hosts_of_every_node(original):
    """A plausible bug: each node's patch lists every other node's address (`machine.network.extraHostEntries`), so
    one node's address flows into every other node's apply."""

    def patch(placed, cluster_model) -> str:
        text = original(placed, cluster_model)
        documents = list(yaml.safe_load_all(text))
        entries = [
            {"ip": node.networks.vlans[111].address.split("/")[0], "aliases": [name]}
            for name, node in sorted({**cluster_model.control_planes, **cluster_model.workers}.items())
            if name != placed.name
        ]
        documents[0]["machine"]["network"]["extraHostEntries"] = entries
        return yaml.safe_dump_all(documents, sort_keys=False)

    return patch


class BrokenWalk(Walk):
    tag = "broken: extraHostEntries of every node"


def test_a_node_patch_naming_other_nodes_addresses_is_caught_and_shrunk(monkeypatch):
    import terravixens.constructs.talos_node as talos_node

    monkeypatch.setattr(talos_node, "node_patch", hosts_of_every_node(talos_node.node_patch))
    with pytest.raises(AssertionError) as caught:
        run_state_machine_as_test(BrokenWalk, settings=BUDGET)
    lifecycle.QUEUED.clear()  # the broken construct's configurations are not the library's
    message = str(caught.value)
    assert "belongs to" in message, message
    walk = json.loads(re.findall(r"WALK = (\{.*\})", message)[-1])  # the shrunk walk comes last
    SUMMARY_LINES.append(f"lifecycle walk, broken construct caught; shrunk to: {json.dumps(walk)}")
    assert len(walk["edits"]) == 1 and walk["edits"][0]["op"] in {"add_worker", "remove_worker", "readdress"} | {
        "add_control_planes",
        "remove_control_planes",
        "promote_workers",
    }
    with pytest.raises(AssertionError, match="belongs to"):
        lifecycle.replay(walk, tag=BrokenWalk.tag)
    monkeypatch.undo()
    lifecycle.replay(walk)  # the same walk holds on the real construct


def test_a_count_leaking_past_the_example_size_is_caught_from_a_large_start(monkeypatch):
    """A plausible bug invisible around the example: once the pool is larger than 3, each worker's patch carries the
    pool's size. One worker added to the example (2 -> 3 workers) keeps the promise; the same edit from the 3 + 20
    start breaks it for every other worker."""
    import terravixens.constructs.talos_node as talos_node
    from tests.planted_bugs import pool_size_label

    monkeypatch.setattr(talos_node, "node_patch", pool_size_label(talos_node.node_patch))
    tag = "broken: pool size in each worker's patch"
    edit = {"op": "add_worker", "node": "wk-01", "vm_id": 1301, "octet": 240, "hypervisor": "pve2"}
    Walker(start="v1.11.5", tag=tag).step(edit)  # judged as a walk judges a step (Talos' validator aside)
    with pytest.raises(AssertionError, match=r"wk-s07_apply changed: it belongs to wk-s07"):
        Walker(start="cp3-wk20", tag=tag).step(edit)
