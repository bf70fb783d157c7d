"""`npx cdktf deploy|diff|destroy hypervisors` exactly as a user runs them in a new shell, against the fake Proxmox VE
on loopback (ADR 0031): the real cdktf CLI (node_modules), the repository's .npmrc, the app (`pipenv run python -O
main.py`), scripts/terravixens-terraform, the real Terraform and bpg/proxmox from the offline mirror.

The project is a copy of the checkout's own files (cdktf.json, main.py, Pipfile, .npmrc, the wrapper script) with
its environments linked (node_modules, .venv), so the app imports the bindings from the installed environment, as
after `make setup`. The shell is new: no variable of the Makefile, a HOME of its own, every HTTP(S) request sent to a
dead proxy except loopback; only the fake's credentials and the mirror's CLI config (`make -s provider-env
TERRAVIXENS_PROVIDERS=mirror`) are set.

The layers are first deployed the way the operations test does (terravixens deploy on their projection onto the
providers with a binary here, ADR 0003): the platform layer's VMs then stand on the hypervisors' bridges, its state
is what the guard reads, and its directory is initialized (a real site's platform layer is initialized by its own
deploy; talos has no binary here). A real cluster would add Talos machines answering on those VMs: nothing on the
cdktf path talks to them.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import site
import socket
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from terravixens import provider_install
from terravixens.exitcodes import ExitCode
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.files import private_process
from tests import support
from tests.fakepve_ext import FakePveServer
from tests.fakepve_operations import Recorder, inventory, terraform_for, workspace
from tests.loopback import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.48"
L0, L1 = "hypervisors", "platform-prod"
COPIED = ("cdktf.json", "main.py", "Pipfile", "Pipfile.lock", "package.json", ".npmrc", "scripts/terravixens-terraform")
LINKED = ("node_modules", ".venv")
SITE = "sites/cdktf-path.yaml"


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    server = FakePveServer(HOST, free_port(HOST), tmp_path_factory.mktemp("pki-cdktf")).start()
    yield server
    server.stop()


def checkout(root: Path) -> Path:
    for name in COPIED:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    for name in LINKED:
        (root / name).symlink_to(REPO / name)
    return root


def dead_proxy() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def new_shell(fake: FakePveServer, home: Path, terraform_binary: str) -> dict[str, str]:
    """A login shell's environment: PATH with terraform, pipenv, npx; the fake's credentials; the mirror's exports."""
    path = [str(Path(found).parent) for found in (terraform_binary, shutil.which("pipenv"), shutil.which("npx"))]
    path += ["/usr/local/bin", "/usr/bin", "/bin"]
    dead = dead_proxy()
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(path)),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        # pipenv, installed with `pip --user`, is found in the user's own site (HOME is the test's).
        "PYTHONUSERBASE": site.getuserbase(),
        "TERRAVIXENS_SITE": SITE,
        "TERRAVIXENS_CACHE": str(provider_install.cache_dir()),
        "HTTPS_PROXY": dead,
        "HTTP_PROXY": dead,
        "https_proxy": dead,
        "http_proxy": dead,
        "NO_PROXY": "127.0.0.0/8,localhost",
        "no_proxy": "127.0.0.0/8,localhost",
        **provider_install.environment_for("mirror"),
        **fake.provider_env(),
    }
    return env


def write_site(root: Path, data: dict) -> None:
    (root / SITE).parent.mkdir(parents=True, exist_ok=True)
    (root / SITE).write_text(yaml.safe_dump(data, sort_keys=False))


def run(root: Path, env: dict[str, str], *argv: str, **extra: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        list(argv),
        cwd=root,
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    result.output = result.stdout + result.stderr  # cdktf prints the layer's lines on either
    return result


def flat(text: str) -> str:
    """The output as one line of words: no colour codes, no Terraform diagnostic frame (its lines are wrapped)."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*[A-Za-z]|[│╷╵]", " ", text).split())


def modes(root: Path) -> dict[str, str]:
    """Every state and backup file under the project, and every folder holding one, with its mode."""
    found = {}
    for path in [
        *root.glob("state/*"),
        *root.rglob("state-backups/**/*"),
        *root.glob("state"),
        *root.glob("state-backups"),
    ]:
        found[str(path.relative_to(root))] = oct(stat.S_IMODE(path.stat().st_mode))
    return found


def assert_private(root: Path) -> dict[str, str]:
    found = modes(root)
    assert any(name.endswith(".tfstate.backup") for name in found), found
    assert {mode for name, mode in found.items() if (root / name).is_dir()} == {"0o700"}, found
    assert {mode for name, mode in found.items() if (root / name).is_file()} == {"0o600"}, found
    return found


@pytest.fixture(scope="module")
def project(fake, terraform_binary, tmp_path_factory):
    """The checkout, its site on the fake, both Proxmox-side layers deployed by terravixens."""
    root = checkout(tmp_path_factory.mktemp("cdktf-checkout"))
    data = support.loopback_data(fake.url)
    # pve1 pins its image's SHA-256: bpg/proxmox sends it with the download (the fake checks the parameters against
    # Proxmox' API schema; a real Proxmox VE also hashes the file it downloaded and fails the task on a mismatch).
    data["hypervisors"]["pve1"]["talos_image"]["sha256"] = {"v1.11.5": "9f2c" * 16}
    write_site(root, data)
    previous = private_process()
    try:
        code = deploy(
            workspace(root, data), [L0, L1], terraform_for(fake, terraform_binary), DeployOptions(yes=True), Recorder()
        )
    finally:
        os.umask(previous)
    assert code == ExitCode.OK
    state = json.loads((root / "state" / f"{L0}.tfstate").read_text())
    checked = {
        instance["attributes"]["node_name"]: instance["attributes"]["checksum"]
        for resource in state["resources"]
        if resource["type"] == "proxmox_download_file"
        for instance in resource["instances"]
    }
    assert checked == {"pve1": "9f2c" * 16, "pve2": None, "pve3": None}
    home = tmp_path_factory.mktemp("home")
    return root, data, new_shell(fake, home, terraform_binary), home


def test_npx_cdktf_deploy_runs_the_guard_and_the_verified_backup(project, fake):
    """A change the guard allows: applied by `npx cdktf deploy`, after the guard and a verified backup; the state an
    older, unguarded deploy left 0644 in a 0755 folder is tightened, and Terraform's own .backup is 0600."""
    root, data, env, home = project
    os.chmod(root / "state", 0o755)
    for state in (root / "state").iterdir():
        os.chmod(state, 0o644)
    changed = copy.deepcopy(data)
    changed["hypervisors"]["pve1"]["bridges"]["vmbr1"]["vlans"] = [111, 120, 130]
    write_site(root, changed)

    result = run(root, env, "npx", "cdktf", "deploy", L0, "--auto-approve")

    assert result.returncode == 0, result.output[-6000:]
    for line in (
        "terravixens-terraform: state: mode tightened to 0700",
        "terravixens-terraform: state/hypervisors.tfstate: mode tightened to 0600",
        "hypervisors: guard — ok",
        "hypervisors: summary — 1 to update",
        "hypervisors: backup — state-backups/homelab/hypervisors/",
        "verified)",
        "hypervisors: apply — the saved plan",
        "hypervisors: done",
    ):
        assert line in result.output, line
    assert fake.call(lambda: fake.pve.tv_net["pve1"]["vmbr1"].get("bridge_vids")) == "111 120 130"
    assert_private(root)
    assert not list((root / "cdktf.out").rglob("*.tfplan")) and not (root / "cdktf.out/stacks" / L0 / "plan").exists()
    # No call home: cdktf creates its anonymous user id file only to send telemetry.
    assert not (home / ".cdktf" / "config.json").exists()


def test_npx_cdktf_deploy_of_a_change_the_guard_refuses_applies_nothing(project, fake):
    """pve2 loses bridge vmbr1 while VMs of the platform layer stand on it: PG008, exit non-zero, nothing applied."""
    root, data, env, _ = project
    before = inventory(fake)
    serial = json.loads((root / "state" / f"{L0}.tfstate").read_text())["serial"]
    refused = copy.deepcopy(data)
    refused["hypervisors"]["pve2"]["bridges"] = {}
    write_site(root, refused)

    result = run(root, env, "npx", "cdktf", "deploy", L0, "--auto-approve")

    assert result.returncode != 0
    refusals = [line for line in flat(result.output).split("[PG") if line.startswith("008 ")]
    assert len(refusals) == 1, result.output[-6000:]
    assert "proxmox_network_linux_bridge.hv_pve2_bridge_vmbr1" in refusals[0]
    assert "would delete bridge 'vmbr1' on 'pve2', used by VM cp-b in platform-prod (deployed)" in refusals[0]
    assert "hypervisors: plan refused by the guard (1 problem); nothing was applied" in result.output
    assert inventory(fake) == before
    assert json.loads((root / "state" / f"{L0}.tfstate").read_text())["serial"] == serial
    assert_private(root)


def test_cdktf_without_the_repository_npmrc_is_refused_with_the_command_to_use(project, fake):
    """cdktf run directly (no npx: no .npmrc, so no wrapper): Terraform itself stops on the stack's requirement,
    before refreshing anything into the state, and names the guarded commands."""
    root, data, env, _ = project
    before = inventory(fake)
    serial = json.loads((root / "state" / f"{L0}.tfstate").read_text())["serial"]
    refused = copy.deepcopy(data)
    refused["hypervisors"]["pve2"]["bridges"] = {}
    write_site(root, refused)
    direct = dict(env, PATH=f"{root / 'node_modules' / '.bin'}{os.pathsep}{env['PATH']}", CHECKPOINT_DISABLE="1")

    result = run(root, direct, str(root / "node_modules" / ".bin" / "cdktf"), "deploy", L0, "--auto-approve")

    assert result.returncode != 0
    said = flat(result.output)
    assert "Layer hypervisors is planned and applied through terravixens only" in said, result.output[-4000:]
    assert "`bin/cdktf deploy hypervisors` from the repository" in said
    assert "`bin/terravixens deploy hypervisors`" in said
    assert inventory(fake) == before
    assert json.loads((root / "state" / f"{L0}.tfstate").read_text())["serial"] == serial


def test_npx_cdktf_diff_leaves_no_plan_file(project):
    root, data, env, _ = project
    write_site(root, data)
    result = run(root, env, "npx", "cdktf", "diff", L0, "--skip-synth")
    assert result.returncode == 0, result.output[-4000:]
    assert "Plan:" in result.output or "No changes" in result.output
    assert not (root / "cdktf.out" / "stacks" / L0 / "plan").exists()


def test_npx_cdktf_destroy_asks_for_the_typed_confirmation_then_runs_the_guard(project, fake):
    root, data, env, _ = project
    before = inventory(fake)
    write_site(root, data)
    argv = ("npx", "cdktf", "destroy", L0, "--auto-approve", "--ignore-missing-stack-dependencies", "--skip-synth")

    result = run(root, env, *argv)
    assert result.returncode != 0
    assert (
        "cdktf cannot ask for the typed confirmation a destroy needs: nothing was destroyed. Run `bin/terravixens "
        "destroy hypervisors`"
    ) in flat(result.output)

    result = run(root, env, *argv, TERRAVIXENS_CONFIRM="homelab/hypervisors")
    assert result.returncode != 0
    refusals = [line for line in flat(result.output).split("[PG") if line.startswith("008 ")]
    assert any(
        "proxmox_user_token.hv_pve1_token" in line and "would be deleted while the platform layers manage 5 VMs" in line
        for line in refusals
    ), result.output[-8000:]
    assert "hypervisors: plan refused by the guard (6 problems); nothing was applied" in result.output
    assert "hypervisors: backup — state-backups/homelab/hypervisors/" in result.output
    assert inventory(fake) == before
    assert_private(root)


def in_a_terminal(
    root: Path, env: dict[str, str], argv: list[str], answer_when: str, answer: bytes, deadline: float = 600
) -> tuple[int, str]:
    """Runs `argv` on a terminal of its own (cdktf draws its prompts only there), presses `answer` once the screen
    shows `answer_when`; returns the exit status and everything the terminal showed."""
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(root)
        os.execvpe(argv[0], argv, env)
    seen, answered, ends = b"", False, time.monotonic() + deadline
    try:
        while time.monotonic() < ends:
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and answer_when in flat(seen.decode(errors="replace")):
                time.sleep(0.5)  # let the prompt take its keys
                os.write(fd, answer)
                answered = True
        else:
            os.kill(pid, 9)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def test_npx_cdktf_deploy_asks_through_cdktfs_own_approval(project, fake):
    """Without --auto-approve: the wrapper asks the way Terraform asks, cdktf shows its Approve / Dismiss choice,
    Enter approves, and only then the state is backed up and the saved plan applied."""
    root, data, env, _ = project
    changed = copy.deepcopy(data)
    changed["hypervisors"]["pve1"]["bridges"]["vmbr1"]["vlans"] = [111, 120, 140]
    write_site(root, changed)
    env = dict(env, TERM="xterm", COLUMNS="200", LINES="50")

    code, screen = in_a_terminal(root, env, ["npx", "cdktf", "deploy", L0], "Approve", b"\r")

    said = flat(screen)
    assert code == 0, said[-6000:]
    assert "Approve" in said and "Dismiss" in said  # cdktf's own choice, drawn when the wrapper asked
    assert said.index("hypervisors: summary — 1 to update") < said.index("hypervisors: backup — state-backups")
    assert "hypervisors: done" in said
    assert fake.call(lambda: fake.pve.tv_net["pve1"]["vmbr1"].get("bridge_vids")) == "111 120 140"
    assert_private(root)
