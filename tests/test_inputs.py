"""Files from careless or hostile hands: every case ends in a short, located problem — no traceback, no hang,
no unbounded memory or output, no secret echoed, nothing silently overwritten (terravixens.inputs)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from terravixens.inputs import InputError, YamlLimits, load_json, load_yaml, read_text
from tests import support

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = (ROOT / "sites" / "example.yaml").read_text()


def yaml_problems(text: str, **limits) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_yaml(text, "f.yaml", limits=YamlLimits(**limits) if limits else YamlLimits())
    return [str(problem) for problem in caught.value.problems]


def json_problems(text: str) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_json(text, "plan.json")
    return [str(problem) for problem in caught.value.problems]


def cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "terravixens.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


# ------------------------------------------------------------------------------------------------ duplicate keys
def test_duplicate_node_key_names_both_lines():
    pasted = EXAMPLE.replace(
        "      wk-b:\n", "      wk-a:\n        hypervisor: pve1\n        vm_id: 1999\n      wk-b:\n"
    )
    [problem] = yaml_problems(pasted)
    first = EXAMPLE.splitlines().index("      wk-a:") + 1
    second = pasted.splitlines().index("      wk-a:", first) + 1
    assert problem == (
        f"line {second}, clusters.prod.workers.wk-a: appears twice in the same mapping (lines {first} "
        f"and {second}): YAML would keep only the second silently; remove or rename one"
    )


def test_duplicate_keys_at_any_depth_are_all_reported():
    text = "a:\n  b:\n    c: 1\n    c: 2\n  b2: {x: 1, x: 2}\nz: 1\nz: 2\n"
    assert [p.split(":")[0] for p in yaml_problems(text)] == ["line 4, a.b.c", "line 5, a.b2.x", "line 7, z"]


def test_an_integer_key_and_its_quoted_text_collide():
    # both become VLAN 111 once validated: the second would silently replace the first
    [problem] = yaml_problems("vlans:\n  111: {address: a}\n  '111': {address: b}\n")
    assert "vlans.111: appears twice in the same mapping (lines 2 and 3)" in problem


def test_merge_keys_work_and_explicit_keys_win():
    text = "base: &b {cpu: 2, memory_mib: 4096}\nnode:\n  <<: *b\n  cpu: 8\n"
    data, lines = load_yaml(text, "f.yaml")
    assert data["node"] == {"cpu": 8, "memory_mib": 4096}
    assert lines.of(("node", "cpu")) == 4


# ------------------------------------------------------------------------------------------------ limits
def test_deep_nesting_is_one_short_problem():
    started = time.monotonic()
    [problem] = yaml_problems("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert time.monotonic() - started < 2
    assert problem.startswith("line 1, a.0.0.0") and "is nested more than 32 levels deep" in problem


def test_billion_laughs_stops_at_the_alias_budget():
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    text = "\n".join(lines) + "\n"
    assert len(text) < 4000
    started = time.monotonic()
    [problem] = yaml_problems(text)
    assert time.monotonic() - started < 2
    assert "aliases expand to more than 10,000 values" in problem


def test_value_count_is_bounded():
    [problem] = yaml_problems("[" + ",".join(["1"] * 2000) + "]\n", max_values=1000)
    assert problem == "line 1: holds more than 1,000 values: check that this is the right file"


@pytest.mark.parametrize("number", ["1" * 400, "9223372036854775808", "-9223372036854775809"])
def test_huge_integers_are_refused(number):
    [problem] = yaml_problems(f"cpu: {number}\n")
    assert "is out of range: numbers here are finite and below 2^63" in problem and len(problem) < 200


@pytest.mark.parametrize("number", [".inf", "-.inf", ".nan"])
def test_non_finite_floats_are_refused(number):
    [problem] = yaml_problems(f"memory_mib: {number}\n")
    assert problem.startswith("line 1, memory_mib: number")


def test_one_document_per_file():
    [problem] = yaml_problems("site: a\n---\nsite: b\n")
    assert problem == "line 2: holds more than one YAML document ('---'): keep one document per file"


def test_unknown_tags_are_refused():
    problems = yaml_problems("a: !!python/object:os.system x\nb: !!set {x: null}\n")
    assert [p.split(":")[0] for p in problems] == ["line 1, a", "line 2, b"]


def test_dates_stay_text():
    data, _ = load_yaml("when: 2026-01-01\n", "f.yaml")
    assert data == {"when": "2026-01-01"}


# ------------------------------------------------------------------------------------------------ reading
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_not_read(device):
    with pytest.raises(InputError) as caught:
        read_text(device, limit=1024, what="site file")
    assert [str(p) for p in caught.value.problems] == [
        "(file): is a device, not a regular file: give the path of the site file"
    ]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "site.yaml"
    os.mkfifo(fifo)
    outcome: list = []

    def read() -> None:
        with pytest.raises(InputError) as caught:
            read_text(fifo, limit=10, what="x")
        outcome.append(caught)

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive(), "read_text waited on a FIFO"
    assert "is a FIFO, not a regular file" in str(outcome[0].value)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(InputError, match="is a directory, not a regular file"):
        read_text(tmp_path, limit=10, what="site file")


def test_size_cap_is_checked_before_reading(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a" * (10 * 1024 * 1024))
    with pytest.raises(InputError) as caught:
        read_text(big, limit=1024 * 1024, what="site file")
    assert str(caught.value).splitlines()[1] == (
        "  - (file): is 10,485,760 bytes, over the 1,048,576-byte limit for a site file: check that this is the right "
        "file"
    )


def test_invalid_utf8_is_located(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"site: a\nname: caf\xe9\n")
    with pytest.raises(InputError) as caught:
        read_text(path, limit=100, what="site file")
    assert str(caught.value.problems[0]) == "line 2, column 10: is not UTF-8 text (byte 0xe9): save the file as UTF-8"


# ------------------------------------------------------------------------------------------------ JSON (plans)
def test_json_duplicate_keys_are_located():
    [problem] = json_problems('{\n "a": 1,\n "b": {"c": 1,\n  "c": 2}\n}\n')
    assert problem == (
        "(file): key 'c' appears twice in one object (lines 3, 4): JSON readers would keep only one "
        "silently; regenerate the file"
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": NaN}', "number 'NaN' is out of range"),
        ('{"a": ' + "1" * 5000 + "}", "is out of range"),
        ("[" * 100000 + "]" * 100000, "is nested more than 100 levels deep"),
        ("[" * 150 + "]" * 150, "is nested more than 100 levels deep"),
        ('{"a": 1,}', "line 1: is not valid JSON: Expecting property name enclosed in double quotes (column 9)"),
    ],
)
def test_json_limits(text, expected):
    [problem] = json_problems(text)
    assert expected in problem and len(problem) < 200


# ------------------------------------------------------------------------------------------------ the CLI
HOSTILE_SITES = {
    "deep nesting": "a: " + "[" * 3000 + "]" * 3000 + "\n",
    "billion laughs": "\n".join(
        ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    )
    + "\n",
    "duplicate node": EXAMPLE.replace(
        "      wk-b:\n", "      wk-a:\n        hypervisor: pve1\n        vm_id: 1999\n      wk-b:\n"
    ),
    "binary": "site: \x00\x01\x02\n",
    "scalar document": "just a string\n",
    "empty": "",
    "secret under a mistyped key": EXAMPLE.replace(
        "  insecure: false\n", "  insecure: false\n  api_token: 'root@pam!x=0123456789abcdef-hunter2-SECRET'\n"
    ),
    "float for an integer": EXAMPLE.replace("cpu: 8", "cpu: 4.5", 1),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SITES))
def test_validate_ends_with_exit_2_and_a_short_report(tmp_path, name):
    site = tmp_path / "site.yaml"
    site.write_text(HOSTILE_SITES[name])
    started = time.monotonic()
    result = cli("validate", "--site", str(site))
    assert time.monotonic() - started < 10  # the interpreter's start included; the load itself is under 2 s
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert len(result.stderr) < 2000 and result.stderr.startswith(f"{site}: ")
    assert "SECRET" not in result.stderr and "hunter2" not in result.stderr


def test_secret_under_a_mistyped_key_is_named_not_shown(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(HOSTILE_SITES["secret under a mistyped key"])
    result = cli("validate", "--site", str(site))
    line = EXAMPLE.splitlines().index("  insecure: false") + 2
    assert (
        f"  - line {line}, proxmox.api_token: unknown key: remove it or check its spelling against docs/site-file.md"
    ) in result.stderr.splitlines()


def test_a_float_where_an_integer_belongs_names_the_value():
    data = support.example_data()
    data["clusters"]["prod"]["workers"]["wk-a"]["cpu"] = 4.5
    with pytest.raises(InputError) as caught:
        support.site_from(data)
    [problem] = caught.value.problems
    assert problem.field == "clusters.prod.workers.wk-a.cpu" and problem.message.endswith("(got 4.5)")


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/urandom"])
def test_validate_refuses_devices_at_once(special):
    result = cli("validate", special, timeout=10)
    assert result.returncode == 2 and "is a device, not a regular file" in result.stderr


def test_plan_guard_input_has_the_same_guarantees(tmp_path):
    deep = tmp_path / "plan.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    result = cli("plan-guard", str(deep))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is nested more than 100 levels deep" in result.stderr
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 * 1024 * 1024))
    result = cli("plan-guard", str(big), "--max-size-mib", "1")
    assert result.returncode == 2 and "over the 1,048,576-byte limit for a plan" in result.stderr


# ------------------------------------------------------------------------------------------------ keys equal once read
def test_an_integer_key_and_an_equal_float_collide():
    # a Python mapping holds 120 and 120.0 as one key: the second would silently replace the first
    [problem] = yaml_problems("vlans:\n  120: {address: a}\n  120.0: {address: b}\n")
    assert problem == (
        "line 3, vlans.120.0: appears twice in the same mapping (lines 2 and 3, written 120 and 120.0: "
        "one key once read): YAML would keep only the second silently; remove or rename one"
    )


def test_an_integer_key_and_a_boolean_collide():
    [problem] = yaml_problems("m:\n  1: a\n  yes: b\n")
    assert "(lines 2 and 3, written 1 and yes: one key once read)" in problem


def test_keys_written_in_other_bases_collide_with_the_number_they_are():
    [problem] = yaml_problems("vlans:\n  0x78: a\n  120: b\n")
    assert "vlans.120: appears twice in the same mapping (lines 2 and 3, written 0x78 and 120: one key" in problem


def test_a_merged_key_equal_to_an_explicit_one_gives_way_to_it():
    data, _ = load_yaml("base: &b {120: merged}\nnode:\n  <<: *b\n  120.0: explicit\n", "f.yaml")
    assert data["node"] == {120.0: "explicit"}


def test_lines_record_how_numbers_were_written_when_they_read_otherwise():
    data, lines = load_yaml("v:\n  0120: {vlan: 0x78, n: 7, s: '010'}\n  l: [1_2, 5, yes]\n", "f.yaml")
    assert data == {"v": {80: {"vlan": 120, "n": 7, "s": "010"}, "l": [12, 5, True]}}
    assert lines.written(("v", 80), key=True) == "0120" and lines.written(("v", 80)) is None
    assert lines.written(("v", 80, "vlan")) == "0x78"
    assert lines.written(("v", 80, "n")) is None and lines.written(("v", 80, "s")) is None
    assert [lines.written(("v", "l", index)) for index in range(3)] == ["1_2", None, "yes"]
