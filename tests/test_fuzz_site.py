"""Fuzzing `terravixens validate` with mutated copies of the example site (hypothesis).

Every run of `validate`, whatever the file holds, must end with exit 0 (a valid site) or 2 (problems listed), never
a traceback, with bounded output, in under 2 s of CPU (10 s of wall time: the machine is shared), and without
echoing a value planted under a secret-looking key.

Mutations: structural (drop, duplicate, rename or retype keys, random or hostile scalars, nested containers, deep
nesting, a planted secret) on the parsed example, dumped back to YAML; then textual (duplicated or dropped lines,
anchors and aliases, merge keys, deep brackets, random bytes, truncation) on the file itself.

Runs in-process (the CLI's `main()` with captured output) so that `make test` affords FUZZ_EXAMPLES examples;
`pytest -m fuzz_nightly` runs NIGHTLY_EXAMPLES (or $TERRAVIXENS_FUZZ_EXAMPLES) with fresh randomness; a few examples
also go through a real `python -m terravixens.cli` process.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from terravixens.cli import main
from tests.support import EXAMPLE_SITE

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_TEXT = EXAMPLE_SITE.read_text()
EXAMPLE = yaml.safe_load(EXAMPLE_TEXT)
FUZZ_EXAMPLES = 2000
NIGHTLY_EXAMPLES = int(os.environ.get("TERRAVIXENS_FUZZ_EXAMPLES", "25000"))
MAX_SECONDS = 2.0  # CPU time of one validate: what the input costs, whatever else runs on the machine
MAX_WALL_SECONDS = 10.0  # a hang (waiting, not computing) fails too
MAX_OUTPUT = 20_000  # 40 problems of at most 400 characters, the header and the "… and N more" line
SECRET = "SECRET-canary-7d1f"
SECRET_KEYS = ["api_token", "password", "secret_key", "private_key", "token", "credentials"]

HOSTILE_TEXT = [
    '${file("/proc/self/environ")}',
    "%{ for k in [1] }x%{ endfor }",
    "$${x}",
    "a\nb",
    "nul\x00",
    "\x7f",
    "",
    " ",
    "~",
    "../../etc",
    "/abs",
    "http://insecure.lab",
    "https://",
    "ssh://",
    "10.11.1.999/24",
    "10.11.1.50",
    "10.11.1.50/24",
    "fd00::1/64",
    "::",
    "0.0.0.0/0",
    "v1.12.0",
    "v1.11.6",
    "1.2",
    "latest",
    "pve1",
    "pve3",
    "vmbr1",
    "vmbr9",
    "controlplane",
    "worker",
    "NoExecute",
    "CP-X",
    "x" * 5000,
    "é" * 300,
    "\U0001f600",
    "null",
    "yes",
    "0x1F",
    "1e400",
    "-.inf",
    "!!python/object:os.system",
    "*alias",
    "&anchor",
    "<<",
    "0120",
    " 120 ",
    "+120",
    "120.0",
    "node-role.kubernetes.io/worker",
    "example.com/a b",
    "-x",
]
NEAR_VALID = [
    111,
    120,
    4094,
    4095,
    0,
    -1,
    99,
    100,
    1101,
    1201,
    2**31,
    2**63 - 1,
    512,
    513,
    1024,
    4_194_304,
    4_194_305,
    16_384,
    16_385,
    4.5,
    120.0,
    1e40,
    True,
    False,
    None,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=60),
    st.sampled_from(HOSTILE_TEXT),
    st.sampled_from(NEAR_VALID),
)
keys = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-5, max_value=5000),
    st.sampled_from(
        [
            "cpu",
            "vm_id",
            "hypervisor",
            "networks",
            "vlans",
            "address",
            "gateway",
            "url",
            "api_token",
            "<<",
            "labels",
            "taints",
            120.0,
            "0120",
            True,
            "node-restriction.kubernetes.io/x",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)


def _paths(value, prefix: tuple = ()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _parent(data, path: tuple):
    for part in path[:-1]:
        data = data[part]
    return data


def _nested(depth: int, leaf=1):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@st.composite
def structural(draw) -> dict:
    data = copy.deepcopy(EXAMPLE)
    for _ in range(draw(st.integers(0, 4))):
        path = draw(st.sampled_from(list(_paths(data))))
        operation = draw(st.sampled_from(["drop", "retype", "add", "nest", "rename", "duplicate", "secret"]))
        if not path:
            if operation == "retype":
                data = draw(values)
                break
            path = (draw(st.sampled_from(list(data))),) if isinstance(data, dict) and data else path
            if not path:
                continue
        parent, last = _parent(data, path), path[-1]
        if operation == "drop":
            del parent[last]
        elif operation == "retype":
            parent[last] = draw(values)
        elif operation == "nest":
            parent[last] = _nested(draw(st.integers(1, 150)), parent[last])
        elif isinstance(parent, dict) and operation == "rename":
            parent[draw(keys)] = parent.pop(last)
        elif isinstance(parent, dict) and operation == "duplicate":
            parent[f"{last}-copy"] = copy.deepcopy(parent[last])
        elif isinstance(parent, dict) and operation == "secret":
            parent[draw(st.sampled_from(SECRET_KEYS))] = SECRET
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(values)
        else:
            parent.append(draw(values))
    return data


def _dumped(data) -> str:
    try:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    except (yaml.YAMLError, RecursionError, ValueError):
        return EXAMPLE_TEXT


@st.composite
def site_files(draw) -> bytes:
    text = _dumped(draw(structural())) if draw(st.booleans()) else EXAMPLE_TEXT
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 3))):
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        operation = draw(
            st.sampled_from(["duplicate", "drop", "anchor", "merge", "deep", "laughs", "secret", "indent", "truncate"])
        )
        if operation == "duplicate":  # a pasted block: duplicate keys
            lines[index:index] = lines[index : index + draw(st.integers(1, 12))]
        elif operation == "drop":
            del lines[index]
        elif operation in ("anchor", "merge"):
            target = draw(st.integers(0, len(lines) - 1))
            lines[index] = re.sub(r":\s*$", ": &a1\n", lines[index], count=1)
            indent = re.match(r"\s*", lines[target]).group()
            alias = f"{indent}<<: *a1\n" if operation == "merge" else re.sub(r":\s.*$", ": *a1", lines[target]) + "\n"
            lines.insert(target + 1, alias)
        elif operation == "deep":
            depth = draw(st.integers(1, 6000))
            lines.insert(index, f"deep{index}: {'[' * depth}{']' * depth}\n")
        elif operation == "laughs":
            lines += ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'] + [
                f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, draw(st.integers(2, 9)))
            ]
        elif operation == "secret":
            indent = re.match(r"\s*", lines[index]).group()
            lines.insert(index, f"{indent}{draw(st.sampled_from(SECRET_KEYS))}: {SECRET}\n")
        elif operation == "indent":
            lines[index] = draw(st.sampled_from(["\t", " ", "   "])) + lines[index]
        else:
            lines = lines[:index]
    raw = "".join(lines).encode()
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 4)) == 0 else 0):
        where = draw(st.integers(0, len(raw)))
        raw = raw[:where] + draw(st.binary(min_size=1, max_size=16)) + raw[where:]
    if draw(st.integers(0, 200)) == 0:
        raw = raw + b"# padding\n" * 120_000  # over the 1 MiB cap
    return raw


class Stats:
    runs = 0
    exits: ClassVar[dict[int, int]] = {}
    slowest = 0.0
    slowest_wall = 0.0
    slowest_case = b""


WORKDIR = Path(tempfile.mkdtemp(prefix="tv-fuzz-"))


def validate_in_process(raw: bytes) -> tuple[int, str, str, float, float]:
    """Exit code, stdout, stderr, CPU seconds and wall seconds of `terravixens validate` on `raw`."""
    site = WORKDIR / "site.yaml"
    site.write_bytes(raw)
    out, err = io.StringIO(), io.StringIO()
    cpu, started = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["validate", "--site", str(site)])
        except SystemExit as stopped:  # argparse; never expected with these arguments
            code = stopped.code if isinstance(stopped.code, int) else 1
    return code, out.getvalue(), err.getvalue(), time.process_time() - cpu, time.perf_counter() - started


def check(raw: bytes) -> None:
    code, out, err, seconds, wall = validate_in_process(raw)
    Stats.runs += 1
    Stats.exits[code] = Stats.exits.get(code, 0) + 1
    if seconds > Stats.slowest:
        Stats.slowest, Stats.slowest_case = seconds, raw[:200]
        (WORKDIR / "slowest.yaml").write_bytes(raw)  # kept for a look after the run
    Stats.slowest_wall = max(Stats.slowest_wall, wall)
    assert code in (0, 2), f"exit {code}\n{out}\n{err}"
    assert "Traceback" not in out + err
    assert len(out) + len(err) <= MAX_OUTPUT, len(out) + len(err)
    assert all(len(line) <= 600 for line in (out + err).splitlines())
    assert SECRET not in out + err
    assert seconds < MAX_SECONDS, f"validate took {seconds:.2f} s of CPU"
    assert wall < MAX_WALL_SECONDS, f"validate took {wall:.2f} s"
    if code == 0:  # on stderr, only the site rules' warnings of a valid site (terravixens.config.site_rules.cautions)
        assert out.endswith("nodes\n")
        assert err == "" or (err.startswith(f"{WORKDIR / 'site.yaml'}: ") and " warning" in err.splitlines()[0])
    else:
        assert out == "" and err.startswith(f"{WORKDIR / 'site.yaml'}: ") and " problem" in err.splitlines()[0]


@pytest.fixture(scope="module", autouse=True)
def _fuzz_summary():
    """After the module: how many validate runs, their exit codes and the slowest, in the run's summary."""
    from tests.conftest import SUMMARY_LINES

    yield
    for name in ("site.yaml", "process-site.yaml"):  # the slowest input stays for a look
        (WORKDIR / name).unlink(missing_ok=True)
    if Stats.runs:
        SUMMARY_LINES.append(
            f"fuzz: {Stats.runs} in-process validate runs, exits {dict(sorted(Stats.exits.items()))}, slowest "
            f"{Stats.slowest * 1000:.0f} ms CPU ({Stats.slowest_case[:40]!r}…), slowest wall "
            f"{Stats.slowest_wall * 1000:.0f} ms; slowest input kept in "
            # pasted in docs/commands.md: no path of this machine
            f"$TMPDIR/{(WORKDIR / 'slowest.yaml').relative_to(tempfile.gettempdir())}"
        )


FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
NIGHTLY = settings(FUZZ, max_examples=NIGHTLY_EXAMPLES, derandomize=False)


def test_the_unmutated_example_validates():
    check(EXAMPLE_TEXT.encode())
    assert Stats.exits.get(0)


@FUZZ
@given(site_files())
def test_validate_never_crashes_on_a_mutated_site(raw):
    check(raw)


def test_fuzzing_reached_both_outcomes():
    """The fuzz above must have produced valid sites and refused ones: otherwise it explores nothing."""
    if Stats.runs < FUZZ_EXAMPLES // 2:
        pytest.skip("run together with the fuzz test")  # e.g. `-k` selected this test alone
    assert Stats.exits.get(0, 0) >= 20 and Stats.exits.get(2, 0) >= FUZZ_EXAMPLES // 4, Stats.exits


@settings(FUZZ, max_examples=6)
@given(site_files())
def test_validate_as_a_process_never_crashes(raw):
    site = WORKDIR / "process-site.yaml"
    site.write_bytes(raw)
    result = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "validate", "--site", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr and len(result.stdout) + len(result.stderr) <= MAX_OUTPUT
    assert SECRET not in result.stdout + result.stderr


@pytest.mark.fuzz_nightly
@NIGHTLY
@given(site_files())
def test_validate_never_crashes_nightly(raw):
    check(raw)
