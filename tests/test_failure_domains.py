"""Hypervisors as failure domains: the control-plane spread rule (terravixens.config.site_rules.failure_domains, ADR
0054) at every size the site allows (1, 3, 5, 7 control planes) on 1, 2 and 3 hypervisors, an errors test per message,
the warning seam (a `Caution` the loader does not refuse; validate and show print it) and synth refusing.

Each case changes a copy of the example site (tests.support.example_data): hypervisors added as copies of pve2,
control planes added as copies of cp-c with their own VM id and address.
"""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from terravixens.config import site_rules
from terravixens.config.loader import SiteError, load_checked, parse_site, warnings
from terravixens.config.site_rules.failure_domains import hypervisors_needed, majority
from terravixens.exitcodes import ExitCode
from terravixens.operations.show import show, to_json, view
from terravixens.operations.validate import validate_report
from terravixens.output import render
from tests import support

ROOT = Path(__file__).resolve().parent.parent
ACCEPT = "clusters.prod.placement: {allow_control_plane_majority_on: pve1, reason: …}"


# ---------------------------------------------------------------------------------------------------------- helpers
def site_with(hosts: int, placement: dict[str, str]) -> dict:
    """The example with `hosts` hypervisors (pve1, pve2, pve3, then copies of pve2) and its control planes exactly
    `placement` (name -> hypervisor): cp-a and cp-b as in the example, the others copies of cp-c."""
    data = copy.deepcopy(support.example_data())
    hypervisors = data["hypervisors"]
    for number in range(3, hosts + 1):
        hypervisors[f"pve{number}"] = {**copy.deepcopy(hypervisors["pve2"]), "node_name": f"pve{number}"}
    for name in [name for name in hypervisors if int(name.removeprefix("pve")) > hosts]:
        hypervisors.pop(name)  # the example has pve1-pve3
    prod = data["clusters"]["prod"]
    template = prod["control_planes"]["cp-c"]
    planes = {}
    for index, (name, where) in enumerate(sorted(placement.items())):
        node = copy.deepcopy(prod["control_planes"].get(name) or template)
        node["vm_id"] = 1101 + index
        node["networks"] = {
            "maintenance_ip": f"10.0.0.{51 + index}",
            "vlans": {111: {"address": f"10.11.1.{11 + index}/24", "gateway": "10.11.1.1"}},
        }
        node["hypervisor"] = where
        planes[name] = node
    prod["control_planes"] = planes
    for worker in prod["workers"].values():
        worker["hypervisor"] = "pve1"  # workers are not the rule's business: all on one host, never a finding
    return data


def names(count: int) -> list[str]:
    return [f"cp-{chr(ord('a') + i)}" for i in range(count)]


def spread(count: int, counts: list[int]) -> dict[str, str]:
    """`count` control planes by name, the first counts[0] on pve1, the next counts[1] on pve2, …"""
    hosts = [f"pve{i + 1}" for i, n in enumerate(counts) for _ in range(n)]
    assert len(hosts) == count
    return dict(zip(names(count), hosts, strict=True))


def problems_of(data: dict) -> list:
    with pytest.raises(SiteError) as caught:
        parse_site(data, "site.yaml")
    return caught.value.problems


def loads(data: dict) -> tuple[object, list]:
    """The site (it must load) and its warnings."""
    site = parse_site(data, "site.yaml")
    return site, warnings(site)


def accept(data: dict, host: str = "pve1", reason: str = "one rack until the second PDU is installed") -> dict:
    data["clusters"]["prod"]["placement"] = {"allow_control_plane_majority_on": host, "reason": reason}
    return data


# ------------------------------------------------------------------------------------------------------- arithmetic
@pytest.mark.parametrize(
    ("count", "quorum", "needed"),
    [(1, 1, None), (2, 2, 2), (3, 2, 3), (4, 3, 2), (5, 3, 3), (6, 4, 2), (7, 4, 3)],
)
def test_majority_and_hypervisors_needed(count, quorum, needed):
    assert majority(count) == quorum
    assert hypervisors_needed(count) == needed
    if needed is not None:  # `needed` hosts holding at most count // 2 each do hold them all, one fewer do not
        assert needed * (count // 2) >= count > (needed - 1) * (count // 2)


# ------------------------------------------------------------------------------------------------- valid placements
@pytest.mark.parametrize(
    ("count", "hosts", "counts"),
    [
        (3, 3, [1, 1, 1]),
        (5, 3, [2, 2, 1]),
        (5, 3, [1, 2, 2]),
        (7, 3, [3, 3, 1]),
        (7, 4, [2, 2, 2, 1]),
        (3, 4, [1, 0, 1, 1]),
    ],
)
def test_no_majority_on_any_host_loads_without_a_word(count, hosts, counts):
    _, found = loads(site_with(hosts, spread(count, counts)))
    assert found == []


@pytest.mark.parametrize("hosts", [1, 2, 3])
def test_one_control_plane_is_outside_the_rule(hosts):
    """One control plane is a majority of one wherever it runs: no error, no warning, on any number of hosts."""
    _, found = loads(site_with(hosts, {"cp-a": "pve1"}))
    assert found == []


# ---------------------------------------------------------------------------------------------------- refused
def test_a_majority_on_one_host_with_a_free_host_is_refused_with_the_move():
    (problem,) = problems_of(site_with(3, {"cp-a": "pve1", "cp-b": "pve2", "cp-c": "pve1"}))
    assert problem.field == "clusters.prod.control_planes.cp-c.hypervisor"
    assert problem.message == (
        "pve1 holds 2 of prod's 3 control planes (cp-a, cp-c): losing pve1 loses etcd's quorum and the API, and the "
        f"site's 3 hypervisors can avoid it: move cp-c to pve3, or accept it knowingly with {ACCEPT}"
    )


def test_all_three_on_one_host_move_two_and_the_bootstrap_node_stays():
    (problem,) = problems_of(site_with(3, spread(3, [3])))
    assert problem.field == "clusters.prod.control_planes.cp-b.hypervisor"
    assert "move cp-b to pve2 and cp-c to pve3," in problem.message


def test_the_bootstrap_node_is_not_the_one_moved():
    data = site_with(3, {"cp-a": "pve1", "cp-b": "pve2", "cp-c": "pve1"})
    data["clusters"]["prod"]["bootstrap_node"] = "cp-c"
    (problem,) = problems_of(data)
    assert problem.field == "clusters.prod.control_planes.cp-a.hypervisor"
    assert "move cp-a to pve3," in problem.message


@pytest.mark.parametrize(
    ("count", "counts", "moves"),
    [
        (5, [3, 1, 1], "move cp-c to pve2"),
        (5, [4, 1, 0], "move cp-c to pve3 and cp-d to pve2"),
        (5, [5, 0, 0], "move cp-c to pve2 and cp-d to pve3 and cp-e to pve2"),
        (7, [4, 2, 1], "move cp-d to pve3"),
        (7, [7, 0, 0], "move cp-d to pve2 and cp-e to pve3 and cp-f to pve2 and cp-g to pve3"),
    ],
)
def test_five_and_seven_control_planes_on_three_hosts(count, counts, moves):
    (problem,) = problems_of(site_with(3, spread(count, counts)))
    assert moves in problem.message
    assert f"pve1 holds {counts[0]} of prod's {count} control planes" in problem.message
    # the fix is right: applying it leaves no host with a majority
    data = site_with(3, spread(count, counts))
    fix = problem.message.split(": move ", 1)[1].split(", or accept", 1)[0]
    for move in fix.split(" and "):
        name, target = move.split(" to ")
        data["clusters"]["prod"]["control_planes"][name]["hypervisor"] = target
    assert loads(data)[1] == []


def test_the_target_declares_the_node_s_bridge_when_one_does():
    data = site_with(3, spread(5, [3, 1, 1]))  # cp-d alone on pve2, cp-e alone on pve3
    data["hypervisors"]["pve2"]["bridges"] = {"vmbr9": {"ports": ["enp3s0"], "vlan_aware": True, "vlans": [111]}}
    data["clusters"]["prod"]["control_planes"]["cp-d"]["bridge"] = "vmbr9"
    (problem,) = problems_of(data)
    assert "move cp-c to pve3" in problem.message  # pve2 holds as few, but lacks vmbr1: cp-c's bridge


# ---------------------------------------------------------------------------------------------------------- warned
@pytest.mark.parametrize(
    ("count", "hosts", "counts", "moved"),
    [
        (3, 2, [2, 1], "cp-b"),
        (3, 2, [3, 0], "cp-b and cp-c"),
        (3, 1, [3], "cp-b and cp-c"),
        (5, 2, [3, 2], "cp-c"),
        (5, 1, [5], "cp-c and cp-d and cp-e"),
        (7, 2, [4, 3], "cp-d"),
    ],
)
def test_too_few_hypervisors_is_a_warning_not_an_error(count, hosts, counts, moved):
    _, found = loads(site_with(hosts, spread(count, counts)))
    (warning,) = found
    assert warning.field == "clusters.prod.control_planes"
    plural = "s" if hosts != 1 else ""
    assert (
        f"; the site's {hosts} hypervisor{plural} cannot avoid it ({count} control planes need "
        f"{hypervisors_needed(count)}): add hypervisors and move {moved} off pve1, or acknowledge it with {ACCEPT}"
    ) in warning.message


def test_the_example_warns_until_it_has_a_third_hypervisor():
    site, found = loads(copy.deepcopy(support.example_data()))
    assert [w.field for w in found] == (["clusters.prod.control_planes"] if len(site.hypervisors) < 3 else [])


# ---------------------------------------------------------------------------------------------------- accepted
def test_an_exemption_accepts_an_avoidable_majority():
    _, found = loads(accept(site_with(3, {"cp-a": "pve1", "cp-b": "pve2", "cp-c": "pve1"})))
    assert found == []


def test_an_exemption_silences_the_warning():
    _, found = loads(accept(site_with(2, spread(3, [2, 1]))))
    assert found == []


def test_an_exemption_for_another_host_accepts_nothing_and_the_majority_is_still_refused():
    problems = problems_of(accept(site_with(3, spread(3, [1, 2, 0])), host="pve1"))
    assert [p.field for p in problems] == [
        "clusters.prod.placement.allow_control_plane_majority_on",
        "clusters.prod.control_planes.cp-c.hypervisor",
    ]
    assert problems[0].message == (
        "pve1 holds 1 of cluster prod's 3 control planes, no majority: there is nothing to accept there, and kept, it "
        "would accept a majority moved there later without a word; remove placement (it is pve2 that holds a majority)"
    )


def test_an_exemption_where_no_host_holds_a_majority_is_refused():
    (problem,) = problems_of(accept(site_with(3, spread(3, [1, 1, 1]))))
    assert problem.field == "clusters.prod.placement.allow_control_plane_majority_on"
    assert problem.message.endswith("without a word; remove placement")


def test_an_exemption_for_one_control_plane_is_refused():
    (problem,) = problems_of(accept(site_with(2, {"cp-a": "pve1"})))
    assert problem.field == "clusters.prod.placement.allow_control_plane_majority_on"
    assert problem.message == (
        "cluster prod has one control plane: no placement spreads one (losing its hypervisor stops the cluster's API "
        "wherever it runs), so there is nothing to accept; remove placement"
    )


def test_an_exemption_naming_an_unknown_hypervisor():
    problems = problems_of(accept(site_with(3, spread(3, [1, 1, 1])), host="pve7"))
    assert [(p.field, p.message) for p in problems] == [
        (
            "clusters.prod.placement.allow_control_plane_majority_on",
            "unknown hypervisor 'pve7': use one of pve1, pve2, pve3",
        )
    ]


@pytest.mark.parametrize("reason", ["", "   ", "ok", "because"])
def test_an_exemption_needs_a_reason_in_a_sentence(reason):
    (problem,) = problems_of(accept(site_with(2, spread(3, [2, 1])), reason=reason))
    assert problem.field == "clusters.prod.placement.reason"
    assert "is not a reason: say in a sentence why this host may hold a majority" in problem.message


def test_an_exemption_needs_both_fields():
    data = site_with(2, spread(3, [2, 1]))
    data["clusters"]["prod"]["placement"] = {"allow_control_plane_majority_on": "pve1"}
    (problem,) = problems_of(data)
    assert (problem.field, problem.message) == ("clusters.prod.placement.reason", "is required: add it")


# ---------------------------------------------------------------------------------------------------- the seam
def test_a_caution_is_not_a_refusal_and_check_never_returns_one():
    site = parse_site(site_with(2, spread(3, [2, 1])), "site.yaml")
    assert site_rules.check(site) == []
    (caution,) = site_rules.cautions(site)
    assert isinstance(caution, site_rules.Caution)


def test_validate_prints_the_warning_with_its_line_and_exits_ok(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(site_with(2, spread(3, [3, 0]))))
    site, located = load_checked(path)
    assert [(w.field, w.line is not None) for w in located] == [("clusters.prod.control_planes", True)]
    out, err = io.StringIO(), io.StringIO()
    assert render(validate_report(site, str(path), located), False, out, err) == ExitCode.OK
    assert out.getvalue().startswith(f"{path}: ok — ")
    assert err.getvalue().splitlines()[0] == f"{path}: 1 warning in the site file"
    assert f"  - line {located[0].line}, clusters.prod.control_planes: pve1 holds 3 of prod's 3" in err.getvalue()
    document = io.StringIO()
    render(validate_report(site, str(path), located), True, document, io.StringIO())
    body = json.loads(document.getvalue())
    assert body["valid"] is True
    assert [w["field"] for w in body["warnings"]] == ["clusters.prod.control_planes"]


def test_show_prints_the_warning_last_and_in_its_json():
    site = parse_site(site_with(2, spread(3, [2, 1])), "site.yaml")
    out = io.StringIO()
    show(site, "table", out)
    before, _, after = out.getvalue().partition("\nWARNINGS\n")
    assert "STANDALONE (L2)" in before  # last, after every table
    assert " ".join(after.split()).startswith(
        "clusters.prod.control_planes: pve1 holds 2 of prod's 3 control planes (cp-a, cp-b): losing pve1"
    )
    document = to_json(view(site))
    assert [w["field"] for w in document["warnings"]] == ["clusters.prod.control_planes"]
    clean = parse_site(site_with(3, spread(3, [1, 1, 1])), "site.yaml")
    out = io.StringIO()
    show(clean, "table", out)
    assert "WARNINGS" not in out.getvalue()
    assert to_json(view(clean))["warnings"] == []


def test_synth_refuses_an_avoidable_majority(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(site_with(3, spread(3, [2, 1, 0]))))
    ran = subprocess.run(
        [sys.executable, "-c", "import sys; from terravixens.synth import synth_main; sys.exit(synth_main())"],
        env={**os.environ, "TERRAVIXENS_SITE": str(path)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.BAD_INPUT, ran.stderr
    assert "clusters.prod.control_planes.cp-b.hypervisor: pve1 holds 2 of prod's 3 control planes" in ran.stderr
    assert not (tmp_path / "cdktf.out").exists()
