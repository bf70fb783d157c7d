import contextlib
import os
import shutil
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT_NODE = ROOT / "node_modules" / ".bin" / "node"

# jsii runs its kernel on `node`: use the project's pinned Node.js (22) when present, as `make` does.
if PROJECT_NODE.exists() and "JSII_NODE" not in os.environ:
    os.environ["JSII_NODE"] = str(PROJECT_NODE)
os.environ.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")

from tests import support  # noqa: E402


@pytest.fixture(scope="session")
def example_site():
    return support.site_from(support.example_data())


@pytest.fixture(scope="session")
def example_synth(example_site, tmp_path_factory):
    """The example site synthesized once per session (read-only for tests)."""
    return support.synth(example_site, tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="session")
def variant_stacks(tmp_path_factory):
    """The conformance site variants (tests/variants.py: VARIANTS), each synthesized once per session and
    shared read-only by the tests that judge them (schemas, Talos' validator)."""
    from tests.variants import VARIANTS, variant_data

    cache: dict[str, dict[str, dict]] = {}

    def get(name: str) -> dict[str, dict]:
        if name not in cache:
            site = support.site_from(variant_data(VARIANTS[name]))
            cache[name] = support.synth(site, tmp_path_factory.mktemp(f"variant-{name}"))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def terraform_binary():
    """The CLI scripts/providers.py chose: $TERRAFORM_BINARY_NAME, else terraform, else the OpenTofu it built."""
    from terravixens.provider_install import cache_dir

    cache_bin = cache_dir() / "bin"
    wanted = os.environ.get("TERRAFORM_BINARY_NAME")
    candidates = [wanted] if wanted else ["terraform", "tofu"]
    for name in candidates:
        found = shutil.which(name) or (str(cache_bin / name) if (cache_bin / name).exists() else None)
        if found:
            return found
    pytest.fail(f"no {' or '.join(candidates)} CLI: run `make mirror` (it builds OpenTofu when terraform is missing)")


@pytest.fixture(scope="session")
def control_plane():
    """A real control plane for this test process (tests/control_plane.py): three etcd members and kube-apiserver on
    loopback, the Flux and Cilium CRDs served, stopped by PID at the end whatever happens. One per pytest-xdist worker
    (docs/adr/0058-real-control-plane-in-tests.md: a worker freezes its API server and empties it between tests; a
    shared one would need every test of every worker to wait for the others). A control plane that cannot start fails
    the tests that need it: it is never a skip."""
    from tests.control_plane import ControlPlane, new_folder

    folder = new_folder("tv-control-plane-")
    plane = ControlPlane(folder)
    try:
        plane.start()
    except Exception as error:  # whatever stopped it is the failure's text
        plane.close()
        pytest.fail(f"the real control plane did not start: {error}", pytrace=False)
    SUMMARY_LINES.append(
        f"control plane: etcd (3 members) and kube-apiserver started in {plane.started_in:.1f}s "
        f"(load average {os.getloadavg()[0]:.1f})"
    )
    try:
        yield plane
    finally:
        plane.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def kube(control_plane):
    """The control plane with its CRDs all there, emptied of what an earlier test left (tests/control_plane.py:
    RESET) — unless that test left the baseline it was given untouched (a cluster as its site says, which the next
    test would write again: `prepare`)."""
    control_plane.prepare()
    return control_plane


@pytest.fixture
def empty_kube(control_plane):
    """The control plane with its CRDs all there and none of the objects tests write (tests/control_plane.py: RESET),
    even when the last test left a cluster as its site says (`kube` keeps that baseline for the next test that reads
    one): for tests whose objects would meet it — a server-side apply of an object another field manager wrote
    conflicts on every field they share."""
    control_plane.prepare()
    if control_plane.items():
        control_plane.reset()
    return control_plane


# Lines for the end of the run (the fuzz module's summary); with pytest-xdist (`make test`) each worker hands its
# lines and its count of validated configurations to the controller, which prints them.
SUMMARY_LINES: list[str] = []
_FROM_WORKERS: dict[str, list] = {"lines": [], "validated": [], "judged": [], "accepted": [], "leftovers": []}


def _leftovers() -> list[str]:
    """Processes the real control plane code started that still run (each stopped here by its PID, and named)."""
    import sys

    module = sys.modules.get("tests.control_plane")
    if module is None:
        return []
    found = module.leftovers()
    for entry in found:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(entry.split()[0]), signal.SIGKILL)
    return found


def pytest_sessionfinish(session):
    """Fails the run when a process a test started is still running (this process's, or a worker's)."""
    leftovers = _leftovers()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is None and (leftovers or _FROM_WORKERS["leftovers"]):
        SUMMARY_LINES.append(f"LEFT RUNNING (now killed): {'; '.join(leftovers + _FROM_WORKERS['leftovers'])}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if workeroutput is not None:  # an xdist worker
        workeroutput["terravixens_leftovers"] = leftovers
        from tests.gitops_tool import JUDGED, SERVER_ACCEPTED
        from tests.talos_tool import VALIDATED

        workeroutput["terravixens_lines"] = list(SUMMARY_LINES)
        workeroutput["terravixens_validated"] = dict(VALIDATED)
        workeroutput["terravixens_judged"] = dict(JUDGED)
        workeroutput["terravixens_accepted"] = dict(SERVER_ACCEPTED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", {})
    _FROM_WORKERS["lines"] += output.get("terravixens_lines", [])
    _FROM_WORKERS["validated"].append(output.get("terravixens_validated", {}))
    _FROM_WORKERS["judged"].append(output.get("terravixens_judged", {}))
    _FROM_WORKERS["accepted"].append(output.get("terravixens_accepted", {}))
    _FROM_WORKERS["leftovers"] += output.get("terravixens_leftovers", [])


def pytest_terminal_summary(terminalreporter):
    """The fuzz summary, how many machine configurations Talos' own library judged in this run
    (tests/test_talos_validate.py), how many gitops objects k8s-decode judged and how many a real kube-apiserver
    accepted in a server-side dry run (tests/test_gitops_judges.py)."""
    from collections import Counter

    from tests.talos_tool import VALIDATED

    for line in SUMMARY_LINES + _FROM_WORKERS["lines"]:
        terminalreporter.write_line(line)
    validated = Counter(VALIDATED)
    for counts in _FROM_WORKERS["validated"]:
        validated.update(counts)
    if validated:
        by_version = ", ".join(f"{version}: {count}" for version, count in sorted(validated.items()))
        terminalreporter.write_line(
            f"talos-validate: {sum(validated.values())} machine configurations validated ({by_version})"
        )
    from tests.gitops_tool import JUDGED

    judged = Counter(JUDGED)
    for counts in _FROM_WORKERS["judged"]:
        judged.update(counts)
    if judged:
        by_kind = ", ".join(f"{kind}: {count}" for kind, count in sorted(judged.items()))
        terminalreporter.write_line(f"k8s-decode: {sum(judged.values())} gitops objects decoded ({by_kind})")
    from tests.gitops_tool import SERVER_ACCEPTED

    accepted = Counter(SERVER_ACCEPTED)
    for counts in _FROM_WORKERS["accepted"]:
        accepted.update(counts)
    if accepted:
        by_kind = ", ".join(f"{kind}: {count}" for kind, count in sorted(accepted.items()))
        terminalreporter.write_line(
            f"kube-apiserver: {sum(accepted.values())} gitops objects accepted by a server-side dry run ({by_kind})"
        )
