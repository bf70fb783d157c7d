"""`--json`: each reporting command's real output is one document, alone on stdout, of its versioned shape.

Every case runs the command through `terravixens.cli.main` (the same lab and faithful fakes as tests/test_exit_codes.py:
Terraform's JSON plans, the cluster's talosctl and kubectl), parses stdout as one JSON value, checks it against
docs/json/<command>.v1.schema.json (tests/json_shapes.py) and against what the text output says. With
TERRAVIXENS_JSON_SAMPLES=DIR each document is also written there (docs/json-output.md shows them)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from terravixens import cli
from terravixens.exitcodes import ExitCode, MonitorExit
from tests import cli_lab, json_shapes
from tests.cli_lab import (
    PLANS,
    SNAPSHOT,
    Lab,
    cluster_fakes,
    given,
    kept_snapshots,
    platform,
    upgrade_site,
    without,
    without_node,
)
from tests.upgrade_fakes import FIVE, Fake

ROOT = Path(__file__).resolve().parent.parent


# The lab fixture (tests/cli_lab.py): a folder, `run` through cli.main with a fake Terraform, the fakes.
lab = cli_lab.lab


def document(ran: Any, command: str, sample: str | None = None) -> dict[str, Any]:
    """stdout as exactly one JSON document of `command`'s shape (its exit code is the process's)."""
    found = json.loads(ran.out)  # one value: trailing text would fail here
    assert ran.out.endswith("}\n") and ran.out.count("\n}\n") == 1
    assert found["schema"] == f"terravixens/{'-'.join(command.split())}/v1"
    assert json_shapes.conforms(found, command) == []
    if "exit_code" in found:
        assert found["exit_code"] == ran.code
    folder = os.environ.get("TERRAVIXENS_JSON_SAMPLES")
    if folder:
        Path(folder, f"{sample or command}.json").write_text(ran.out)
    return found


# ------------------------------------------------------------------------------------------ the checker itself
def test_the_shape_checker_can_fail():
    good = {"schema": "terravixens/stacks/v1", "site": "homelab", "stacks": []}
    assert json_shapes.conforms(good, "stacks") == []
    assert json_shapes.conforms({**good, "extra": 1}, "stacks") == ["$: 'extra' is not in the schema"]
    assert json_shapes.conforms({"schema": "terravixens/stacks/v2", "site": 1}, "stacks") == [
        "$: 'stacks' is missing",
        "$.schema: 'terravixens/stacks/v2' is not 'terravixens/stacks/v1'",
        "$.site: 1 is not string",
    ]
    bad_layer = {**good, "stacks": [{"name": "x", "level": "L9", "kind": "k", "cluster": None, "after": None}]}
    assert json_shapes.conforms(bad_layer, "stacks") == ["$.stacks[0].level: 'L9' is not one of ['L0', 'L1', 'L2']"]
    assert json_shapes.mismatches(True, {"type": "integer"}) == ["$: True is not integer"]
    assert json_shapes.mismatches(1, {"minimum": 0}) == [
        "$: the schema uses ['minimum'], which this checker does not know"
    ]


def test_every_json_command_has_a_schema_and_every_schema_a_command():
    flagged = {e.name for e in cli.COMMANDS for a in _actions(e.name) if "--json" in a.option_strings}
    shapes = {path.name.removesuffix(".v1.schema.json") for path in json_shapes.SHAPES.glob("*.schema.json")}
    shapes |= set(json_shapes.PACKAGED)
    named = {
        "snapshot": "snapshot-list",
        "upgrade": "upgrade-dry-run",
        "maintain": "maintain-dry-run",
        "spec push": "agent-result",  # the node agent's own result, carried back over ssh
        "spec handoff": "agent-result",
    }
    assert {named.get(name, name) for name in flagged} == shapes
    for name in shapes:
        assert json_shapes.shape(name)["properties"]["schema"] == {"const": f"terravixens/{name}/v1"}


def _actions(name: str) -> list[Any]:
    parser = cli.parser()
    for word in name.split():
        action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = action.choices[word]
    return parser._actions


# ----------------------------------------------------------------------------------------- site and plan
def test_validate_ok_and_with_problems(lab: Lab) -> None:
    ran = lab.run("validate", "--site", lab.site(), "--json")
    found = document(ran, "validate")
    assert ran.code == ExitCode.OK and ran.err == ""
    assert (found["valid"], found["site"], found["problems"]) == (True, "homelab", [])
    assert found["counts"] == {"hypervisors": 3, "clusters": 1, "nodes": 5, "standalone_nodes": 0}

    def broken(data: dict) -> None:
        data["clusters"]["prod"]["workers"]["wk-b"]["hypervisor"] = "pve9"
        prod = data["clusters"]["prod"]["control_planes"]
        prod["cp-b"]["vm_id"] = prod["cp-a"]["vm_id"]

    text = lab.run("validate", "--site", lab.site(broken, "broken.yaml"))
    ran = lab.run("validate", "--site", lab.site(broken, "broken.yaml"), "--json")
    found = document(ran, "validate", "validate-problems")
    assert ran.code == ExitCode.BAD_INPUT and ran.err == "" and found["valid"] is False and found["counts"] is None
    assert len(found["problems"]) == 2 == len(text.err.splitlines()) - 1
    for problem in found["problems"]:
        assert problem["file"].endswith("broken.yaml")
        assert f"{problem['field']}: {problem['message']}" in text.err  # the same problems as the text says
    fields = {"clusters.prod.control_planes.cp-b.vm_id", "clusters.prod.workers.wk-b.hypervisor"}
    assert {p["field"] for p in found["problems"]} == fields


def test_stacks(lab: Lab) -> None:
    ran = lab.run("stacks", "--site", lab.site(), "--json")
    found = document(ran, "stacks")
    text = lab.run("stacks", "--site", lab.site())
    assert [s["name"] for s in found["stacks"]] == text.out.split()
    assert found["stacks"][1] == {
        "name": "platform-prod",
        "level": "L1",
        "kind": "platform",
        "cluster": "prod",
        "after": "hypervisors",
    }


def test_plan_guard_ok_refused_and_bad_input(lab: Lab) -> None:
    ran = lab.run("plan-guard", str(PLANS / "hand-ok-staged-change.json"), "--site", lab.site(), "--json")
    found = document(ran, "plan-guard")
    text = lab.run("plan-guard", str(PLANS / "hand-ok-staged-change.json"), "--site", lab.site())
    assert ran.code == ExitCode.OK and found["result"] == "ok"
    assert text.out.strip() == f"{found['plan']}: ok — {found['summary']}"

    refused = str(PLANS / "hand-pg002-two-control-planes-leave.json")
    ran = lab.run("plan-guard", refused, "--site", lab.site(), "--json")
    found = document(ran, "plan-guard", "plan-guard-refused")
    assert ran.code == ExitCode.REFUSED and ran.err == "" and found["result"] == "refused"
    assert [v["code"] for v in found["violations"] if not v["waived"]] == ["PG002"]
    assert found["why"][0].startswith("PG002 ")
    text = lab.run("plan-guard", refused, "--site", lab.site())
    assert text.err.splitlines()[0] == "[{code} {name}] {message}".format(**found["violations"][0])

    ran = lab.run("plan-guard", lab.site(), "--site", lab.site(), "--json")
    found = document(ran, "plan-guard", "plan-guard-bad-input")
    assert ran.code == ExitCode.BAD_INPUT and found["result"] == "bad input" and found["problems"]


def test_review_lists_every_changed_address(lab: Lab) -> None:
    def stacks(name: str, cpu: int) -> str:
        folder = lab.folder / name / "stacks" / "platform-prod"
        folder.mkdir(parents=True)
        vm = {"node_cp-a_vm": {"cpu": {"cores": cpu}}, "node_wk-a_vm": {"cpu": {"cores": 2}}}
        (folder / "cdk.tf.json").write_text(json.dumps({"resource": {"proxmox_virtual_environment_vm": vm}}))
        return str(lab.folder / name)

    before, after = stacks("before", 2), stacks("after", 4)
    ran = lab.run("review", "--before", before, "--after", after, "--json")
    found = document(ran, "review")
    assert ran.code == ExitCode.OK and found["flagged"] == 0
    assert [(c["stack"], c["address"], c["change"], c["attributes"]) for c in found["changes"]] == [
        ("platform-prod", "proxmox_virtual_environment_vm.node_cp-a_vm", "changed", ["cpu.cores"])
    ]
    assert found["markdown"] + "\n" == lab.run("review", "--before", before, "--after", after).out


# ------------------------------------------------------------------------------------------ operations
def test_drift_in_sync_and_found_with_progress_on_stderr(lab: Lab) -> None:
    ran = lab.run("drift", "platform-prod", "--terraform-only", "--site", lab.site(), "--json", tf=platform())
    found = document(ran, "drift", "drift-in-sync")
    assert ran.code == MonitorExit.IN_SYNC and found["result"] == "in sync"
    assert "platform-prod: drift — in sync" in ran.err  # the progress lines, on stderr
    assert found["layers"] == [
        {
            "layer": "platform-prod",
            "status": "in sync",
            "plan_changes": False,
            "changes": [],
            "changed_outside_terraform": [],
            "talos": None,
        }
    ]
    site = lab.site(without("wk-b"))
    ran = lab.run("drift", "platform-prod", "--terraform-only", "--site", site, "--json", tf=platform())
    found = document(ran, "drift")
    text = lab.run("drift", "platform-prod", "--terraform-only", "--site", site, tf=platform())
    assert ran.code == MonitorExit.FOUND and found["result"] == "drift"
    [layer] = found["layers"]
    assert layer["status"] == "drift" and layer["plan_changes"] is True and layer["changes"]
    deleted = [c["address"] for c in layer["changes"] if c["action"] == "delete"]
    assert deleted and all("wk-b" in address for address in deleted)
    for change in layer["changes"]:
        assert change["address"] in text.out
    assert text.out.splitlines()[-1] == "drift in: platform-prod"


def test_drift_error_leaves_stdout_empty(lab: Lab) -> None:
    ran = lab.run("drift", "--site", lab.site(), "--json", tf=platform(fail={"plan": 2}))
    assert ran.code == MonitorExit.ERROR and ran.out == ""
    assert ran.err.splitlines()[-1].startswith("stopped at platform-prod (plan): done: synth, hypervisors")


def test_snapshot_list_empty_then_one(lab: Lab) -> None:
    lab.tools()
    ran = lab.run(*SNAPSHOT, "--list", "--json", "--site", lab.site())
    found = document(ran, "snapshot-list", "snapshot-list-empty")
    assert found["snapshots"] == [] and found["folder"] == "etcd-snapshots/homelab/prod"
    assert lab.run(*SNAPSHOT, "--site", lab.site(), tf=platform()).code == ExitCode.OK
    ran = lab.run(*SNAPSHOT, "--list", "--json", "--site", lab.site())
    found = document(ran, "snapshot-list")
    [kept] = kept_snapshots(lab)
    [shown] = found["snapshots"]
    assert shown["file"] == f"etcd-snapshots/homelab/prod/{kept.name}" and shown["size"] == kept.stat().st_size
    assert (shown["node"], shown["reason"], shown["verified"], shown["not_verified_because"]) == (
        "cp-b",
        "manual",
        "etcd",
        None,
    )
    assert len(shown["sha256"]) == 64


def test_snapshot_json_goes_with_list(lab: Lab) -> None:
    ran = lab.run(*SNAPSHOT, "--json", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and ran.out == ""
    assert ran.err.splitlines()[0] == (
        "terravixens snapshot: --json goes with --list (a snapshot being taken prints its progress)"
    )


@pytest.mark.parametrize("problem", [False, True], ids=["passes", "finds"])
def test_check(lab: Lab, problem: bool) -> None:
    fakes, site = cluster_fakes(lab, without_node("wk-b") if problem else None)
    ran = lab.run("check", "prod", *given(fakes), "--site", site, "--json")
    found = document(ran, "check", "check-problems" if problem else "check")
    assert ran.err == ""
    assert found["result"] == ("problems" if problem else "ok")
    assert ran.code == (MonitorExit.FOUND if problem else MonitorExit.IN_SYNC)


def test_upgrade_dry_run_plan_refusal_and_text(lab: Lab) -> None:
    site = upgrade_site(lab)
    fake = Fake(lab.folder, {**dict.fromkeys(FIVE, "v1.11.5"), "cp-b": "v1.11.6"})
    ran = lab.run("upgrade", "prod", "--dry-run", "--json", "--talosctl", str(fake.path), "--site", site)
    found = document(ran, "upgrade dry-run", "upgrade-dry-run")
    text = lab.run("upgrade", "prod", "--dry-run", "--talosctl", str(fake.path), "--site", site)
    assert ran.code == text.code == ExitCode.OK and fake.upgraded() == []
    assert found["lines"] == ran.err.splitlines()  # the plan's lines, on stderr as they are decided
    assert found["lines"] == text.out.splitlines()[-len(found["lines"]) :]
    assert {n["node"]: n["action"] for n in found["nodes"]} == {
        "cp-a": "upgrade",
        "cp-b": "skip",
        "cp-c": "upgrade",
        "wk-a": "upgrade",
        "wk-b": "upgrade",
    }
    assert [(u["kind"], u["nodes"]) for u in found["units"]] == [
        ("upgrade", ["cp-a"]),
        ("skip", ["cp-b"]),
        ("health", ["cp-b"]),
        ("upgrade", ["cp-c"]),
        ("upgrade", ["wk-a"]),
        ("upgrade", ["wk-b"]),
    ]
    assert (found["target"], found["result"], found["reason"]) == ("v1.11.6", "ok", None)

    (lab.folder / "newer").mkdir()
    fake = Fake(lab.folder / "newer", {**dict.fromkeys(FIVE, "v1.11.6"), "wk-b": "v1.11.7"})
    ran = lab.run("upgrade", "prod", "--dry-run", "--json", "--talosctl", str(fake.path), "--site", site)
    found = document(ran, "upgrade dry-run", "upgrade-dry-run-refused")
    assert ran.code == ExitCode.REFUSED and found["result"] == "refused" and found["nodes"] == []
    assert found["reason"].startswith("wk-b runs v1.11.7, newer than the target v1.11.6: that is a downgrade")


def test_maintain_dry_run_steps_and_refusal(lab: Lab) -> None:
    ran = lab.run("maintain", "pve2", "--dry-run", "--json", "--site", lab.site())
    text = lab.run("maintain", "pve2", "--dry-run", "--site", lab.site())
    found = document(ran, "maintain dry-run")
    assert ran.code == text.code == ExitCode.OK and (found["result"], found["refused"]) == ("ok", [])
    assert [
        f"  {s['unit']} ({s['what']}): {' → '.join(s['actions'])}" for s in found["steps"]
    ] == text.out.splitlines()[1:]
    assert [s["unit"] for s in found["steps"]] == ["prod/wk-b", "prod/cp-b", "the host"]

    def majority(data: dict) -> None:
        planes = data["clusters"]["prod"]["control_planes"]
        planes["cp-b"]["hypervisor"] = planes["cp-c"]["hypervisor"] = "pve2"
        data["clusters"]["prod"]["placement"] = {"allow_control_plane_majority_on": "pve2", "reason": "one host now"}

    site = lab.site(majority, "majority.yaml")
    ran = lab.run("maintain", "pve2", "--dry-run", "--json", "--site", site)
    found = document(ran, "maintain dry-run", "maintain-dry-run-refused")
    assert ran.code == ExitCode.REFUSED and found["result"] == "refused" and found["exit_code"] == 1
    assert found["refused"][0].startswith("prod: emptying pve2 shuts down cp-b, cp-c: 1 of 3 etcd members")
    ran = lab.run("maintain", "pve2", "--json", "--site", site)
    assert ran.code == ExitCode.BAD_INPUT and ran.err == "terravixens maintain: --json goes with --dry-run\n"


def test_upgrade_json_goes_with_dry_run(lab: Lab) -> None:
    site = upgrade_site(lab)
    for extra in ([], ["--dry-run", "--kubernetes"]):
        ran = lab.run("upgrade", "prod", "--json", *extra, "--site", site)
        assert ran.code == ExitCode.BAD_INPUT and ran.out == ""
        assert ran.err == "terravixens upgrade: --json goes with --dry-run (without --kubernetes)\n"
