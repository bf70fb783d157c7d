"""The lifecycle promise at every size: a sweep of cluster sizes, one node added, removed or renamed (issue 27).

For worker pools of 0-5, 8, 16 and 50 and 1, 3, 5 and 7 control planes, each change of one node leaves every other
node's resources byte-identical: a per-node fingerprint (`fingerprints`: the node's resources in the synthesized
JSON, with the cluster-level data and resources they read, e.g. the role's machine configuration) is the same
before and after for every node the change does not name. Synth is the app's own (`app.synth()`, the safety rules
on), in process.

The names are chosen so that position matters: each pair of control planes added brings one that sorts first and
one that sorts last (`CONTROL_PLANES`); the workers of a pool alternate between sorting first and last
(`WORKERS`); every size also gets a worker named to sort before all (`FIRST`) and a node renamed to a hostname that
sorts first. So a per-node value derived from a count (the pool's size crossing a threshold), from the list of
nodes, or from a node's index in a sorted list changes some other node's fingerprint in at least one case.

Pairs share sites: size (W, C) with one more worker is size (W + 1, C) for W < 5, and two control planes more is
(W, C + 2); every site is synthesized once per process (only the platform layer, which holds every Talos node's
resources: tests/lifecycle.py's walk synthesizes all layers), and only its fingerprints are kept.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from terravixens.layers import site_layers
from terravixens.logical_ids import owner_of
from terravixens.stackdiff import addresses
from terravixens.stacks.base import BuildOptions
from tests import support
from tests.conftest import SUMMARY_LINES
from tests.lifecycle import CLUSTER, new_node
from tests.planted_bugs import pool_size_label

POOLS = (0, 1, 2, 3, 4, 5, 8, 16, 50)
PLANES = (1, 3, 5, 7)
# Each pair added: one sorting before every control plane so far, one after.
CONTROL_PLANES = ("cp-m", "cp-g", "cp-s", "cp-d", "cp-v", "cp-a", "cp-z")
# The k-th worker of a pool: odd k sorts before every worker so far (wk-l.., decreasing), even k after (wk-n..).
WORKERS = tuple(f"wk-l{99 - k:02d}" if k % 2 else f"wk-n{k:02d}" for k in range(max(POOLS) + 1))
FIRST = "wk-a"  # a worker that sorts before all the others
RENAMED = "aa-renamed"  # a hostname that sorts before every name
NAMES = (*CONTROL_PLANES, *WORKERS, FIRST)
_REFERENCE = re.compile(r"\$\{((?:data\.)?[a-z][a-z0-9_]*\.[A-Za-z0-9_-]+)")


def site_data(planes: int, workers: tuple[str, ...], renamed: str | None = None) -> dict:
    """The example site's cluster with `planes` control planes and these workers. A node is the same machine in
    every site (its VM id, addresses and hypervisor come from its name), so its fingerprints compare."""
    data = support.example_data()
    cluster = data["clusters"][CLUSTER]

    def node(name: str) -> dict:
        index = NAMES.index(name)
        return new_node(2000 + index, 100 + index, ("pve1", "pve2", "pve3")[index % 3])

    cluster["control_planes"] = {name: node(name) for name in CONTROL_PLANES[:planes]}
    cluster["workers"] = {name: node(name) for name in workers}
    if renamed is not None:
        {**cluster["control_planes"], **cluster["workers"]}[renamed]["hostname"] = RENAMED
    return data


def fingerprints(stacks: dict[str, dict]) -> dict[str, str]:
    """Node name -> sha256 of its resources (stack, address and body, every byte) and of what they read that no
    other node owns (data sources and cluster-level resources, followed through references and depends_on)."""
    everything = {f"{stack}:{a}": body for stack, doc in stacks.items() for a, body in addresses(doc).items()}
    result: dict[str, str] = {}
    for key in sorted(everything):
        stack, address = key.split(":", 1)
        node = owner_of(address.split(".", 1)[1]) if not address.startswith(("data.", "output.")) else None
        if node is None:
            continue
        seen: dict[str, dict] = {}
        todo = [key]
        while todo:
            current = todo.pop()
            if current in seen or current not in everything:
                continue
            seen[current] = everything[current]
            text = json.dumps(everything[current], sort_keys=True)
            for found in set(_REFERENCE.findall(text)) | set(everything[current].get("depends_on", [])):
                name = found.split(".", 2)[1] if found.startswith("data.") else found.split(".", 1)[1]
                if found.startswith("data.") or owner_of(name) in (None, node):
                    todo.append(f"{stack}:{found}")
        digest = hashlib.sha256()
        for part in sorted(seen):
            digest.update(part.encode() + b"\0" + json.dumps(seen[part], sort_keys=True).encode() + b"\0")
        result.setdefault(node, "")
        result[node] = hashlib.sha256((result[node] + digest.hexdigest()).encode()).hexdigest()
    return result


_SITES: dict[str, tuple[dict[str, str], dict[str, dict]]] = {}  # site content -> (fingerprints, resources per node)
SECONDS: dict[str, float] = {"synth": 0.0}
_OUTDIR: list[Path] = []


def platform_stacks(data: dict) -> dict[str, dict]:
    """The JSON of the site's platform layers (every Talos node's resources), from app.synth(): the safety rules
    run as they do for `cdktf synth`."""
    from cdktf import App

    site = support.site_from(data)
    if not _OUTDIR:
        _OUTDIR.append(Path(tempfile.mkdtemp(prefix="tv-sweep-")))
    app = App(outdir=str(_OUTDIR[0]))
    names = []
    for layer in site_layers(site):
        if layer.kind.name == "platform":
            layer.kind.stack_class()(app, site, layer, BuildOptions())
            names.append(layer.name)
    app.synth()
    return {name: json.loads((_OUTDIR[0] / "stacks" / name / "cdk.tf.json").read_text()) for name in names}


def synthesized(data: dict) -> tuple[dict[str, str], dict[str, dict]]:
    """(fingerprints, node -> its own resources) of the site, synthesized once per process."""
    key = json.dumps(data, sort_keys=True)
    if key not in _SITES:
        started = time.perf_counter()
        stacks = platform_stacks(data)
        own: dict[str, dict] = {}
        for name, doc in stacks.items():
            for address, body in addresses(doc).items():
                if not address.startswith(("data.", "output.")) and (node := owner_of(address.split(".", 1)[1])):
                    own.setdefault(node, {})[f"{name}:{address}"] = body
        _SITES[key] = (fingerprints(stacks), own)
        SECONDS["synth"] += time.perf_counter() - started
    return _SITES[key]


def changes(planes: int, pool: int) -> list[tuple[str, dict, dict, set[str]]]:
    """(what, site before, site after, the nodes the change names) for one size."""
    workers = WORKERS[:pool]
    base = site_data(planes, workers)
    found = [
        (f"add {FIRST} (sorts first)", base, site_data(planes, (*workers, FIRST)), {FIRST}),
        (f"add {WORKERS[pool]}", base, site_data(planes, WORKERS[: pool + 1]), {WORKERS[pool]}),
    ]
    if pool:
        # The pool's last worker leaving: a pool of 8, 16 or 50 steps down to 7, 15 or 49 too, so a count threshold
        # between the sizes above (7 → 8: a value switched once a pool reaches 8) is crossed as well.
        found.append((f"remove {WORKERS[pool - 1]}", base, site_data(planes, WORKERS[: pool - 1]), {WORKERS[pool - 1]}))
    target = sorted(workers)[len(workers) // 2] if workers else CONTROL_PLANES[planes // 2]
    found.append((f"rename {target} to {RENAMED}", base, site_data(planes, workers, renamed=target), {target}))
    if planes + 2 in PLANES:
        added = set(CONTROL_PLANES[planes : planes + 2])
        found.append((f"add control planes {sorted(added)}", base, site_data(planes + 2, workers), added))
    return found


def broken_promises(before: dict, after: dict, named: set[str]) -> list[str]:
    """Every node the change does not name whose resources differ, with the addresses that do (both directions:
    a node added here is one removed the other way)."""
    (old, old_own), (new, new_own) = synthesized(before), synthesized(after)
    problems = []
    for node in sorted((set(old) & set(new)) - named):
        if old[node] != new[node]:
            differing = sorted(
                a for a in set(old_own[node]) | set(new_own[node]) if old_own[node].get(a) != new_own[node].get(a)
            )
            problems.append(f"{node}: {differing or 'what its resources read (data sources, cluster resources)'}")
    missing = (set(old) | set(new)) - (set(old) & set(new)) - named
    problems += [f"{node}: its resources appear or go, and the change does not name it" for node in sorted(missing)]
    return problems


@pytest.mark.parametrize("planes", PLANES)
@pytest.mark.parametrize("pool", POOLS)
def test_one_node_changes_and_no_other_node_does(pool, planes):
    """Adding (or, read backwards, removing) a worker that sorts first, the pool's next worker, two control planes
    (one sorting first, one last), removing the pool's last worker, or renaming a node: every other node's
    fingerprint stays."""
    failures = []
    for what, before, after, named in changes(planes, pool):
        problems = broken_promises(before, after, named)
        if problems:
            failures.append(f"{planes} control planes + {pool} workers, {what}: " + "; ".join(problems))
    assert not failures, "the change touches other nodes:\n  " + "\n  ".join(failures)
    if (pool, planes) == (POOLS[-1], PLANES[-1]):
        SUMMARY_LINES.append(
            f"size sweep: {len(_SITES)} sites synthesized in {SECONDS['synth']:.0f} s (pools {POOLS}, control planes "
            f"{PLANES})"
        )


def test_the_fingerprint_sees_one_byte_of_a_node_and_what_it_reads():
    """The fingerprint is not blind: a byte of a node's own resource changes that node's fingerprint and no other;
    a byte of the role's machine configuration, which every worker's apply reads, changes every worker's."""
    stacks = platform_stacks(site_data(3, WORKERS[:2]))
    original = fingerprints(stacks)
    assert set(original) == {*CONTROL_PLANES[:3], *WORKERS[:2]}
    worker = WORKERS[0]
    changed = json.loads(json.dumps(stacks))
    changed["platform-prod"]["resource"]["proxmox_virtual_environment_vm"][f"node_{worker}_vm"]["vm_id"] += 1
    assert {n for n, f in fingerprints(changed).items() if f != original[n]} == {worker}
    changed = json.loads(json.dumps(stacks))
    changed["platform-prod"]["data"]["talos_machine_configuration"]["cluster_machine_configuration_worker"][
        "cluster_name"
    ] += "x"
    assert {n for n, f in fingerprints(changed).items() if f != original[n]} == set(WORKERS[:2])


def test_the_sweep_names_sort_as_the_docstring_says():
    for planes in PLANES[1:]:
        added = CONTROL_PLANES[planes - 2 : planes]
        assert sorted(CONTROL_PLANES[:planes])[0] == added[0] and sorted(CONTROL_PLANES[:planes])[-1] == added[1]
    for k in range(1, len(WORKERS)):
        so_far = sorted(WORKERS[: k + 1])
        assert so_far[0 if k % 2 else -1] == WORKERS[k]
    assert sorted((*WORKERS, FIRST, RENAMED))[0] == RENAMED and sorted((*WORKERS, FIRST))[0] == FIRST
    assert yaml.safe_dump(site_data(7, WORKERS))  # the largest site is a site


# ---------------------------------------------------------------------------------------- the sweep can fail
def position_tag(original):
    """A plausible bug: each VM is tagged with its node's index among the cluster's nodes sorted by name (planted in
    the tags a node's VM is written with, whether as an element or as a block from Python, ADR 0057)."""

    def tags(self):
        cluster_model = self.props.cluster
        index = sorted({**cluster_model.control_planes, **cluster_model.workers}).index(self.props.placed.name)
        return [*original(self), f"n{index}"]

    return tags


def caught(planes: int, pool: int) -> list[str]:
    """The sweep's first comparison for one size (a worker that sorts first joins), synthesized afresh: a planted bug
    must not reach the shared cache."""
    what, before, after, named = changes(planes, pool)[0]
    old, new = fingerprints(platform_stacks(before)), fingerprints(platform_stacks(after))
    return [f"{what}: {node}" for node in sorted((set(old) & set(new)) - named) if old[node] != new[node]]


def test_a_count_past_the_example_size_and_a_sorted_position_are_caught(monkeypatch):
    import terravixens.constructs.talos_node as talos_node

    monkeypatch.setattr(talos_node, "node_patch", pool_size_label(talos_node.node_patch))
    assert not caught(1, 2)  # the old walk's world: the defect is invisible at the example's size
    assert any(f"add {FIRST}" in problem for problem in caught(3, 4)), "a pool-size label past 3 workers"
    monkeypatch.undo()
    monkeypatch.setattr(talos_node.TalosNode, "_tags", position_tag(talos_node.TalosNode._tags))
    assert any(f"add {FIRST}" in problem for problem in caught(1, 2)), "a tag from the node's sorted position"
