"""The stacks' requirement that only a guarded path plans and applies them, and `terravixens-terraform` (the Terraform
`npx cdktf` runs here) on everything but the guarded apply/destroy, which tests/integration/test_cdktf_path.py runs
end to end through the real cdktf CLI (ADR 0031)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cdktf import App

from terravixens import provider_install, tfwrap
from terravixens.exitcodes import ExitCode
from terravixens.guarded_path import ENV_NAME, VARIABLE
from terravixens.state_files import tighten_local_state, tighten_tree
from tests import support
from tests.test_library_use import EdgeStack

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = Path(sys.executable).parent / "terravixens-terraform"
CDKTF_HANDLERS = ROOT / "node_modules" / "cdktf-cli" / "bundle" / "bin" / "cmds" / "handlers.js"


def test_every_stack_of_the_app_carries_the_requirement(example_synth):
    assert len(example_synth) == 3
    for layer, stack in example_synth.items():
        variable = stack["variable"][VARIABLE]
        assert (variable["type"], variable["default"], variable["nullable"]) == ("bool", False, False)
        [rule] = variable["validation"]
        assert rule["condition"] == f"${{var.{VARIABLE}}}"
        for command in (
            f"`bin/cdktf deploy {layer}`",
            f"`bin/terravixens deploy {layer}`",
            f"`bin/terravixens destroy {layer}`",
            f"`bin/terravixens drift {layer}`",
            f"`bin/cdktf diff {layer}`",
        ):
            assert command in rule["error_message"], (layer, command)
        assert "${" not in rule["error_message"].replace(f"${{var.{VARIABLE}}}", "")


def test_standalone_stacks_carry_it_too(tmp_path):
    from tests.test_standalone_stacks import standalone_data  # the L2 example of those tests

    stacks = support.synth(support.site_from(standalone_data()), tmp_path)
    assert any(name.startswith("standalone") for name in stacks)
    assert {name for name, stack in stacks.items() if VARIABLE in stack.get("variable", {})} == set(stacks)


def test_a_library_users_own_stack_carries_nothing_of_it(tmp_path):
    app = App(outdir=str(tmp_path))
    EdgeStack(app, "edge")
    app.synth()
    stack = json.loads((tmp_path / "stacks" / "edge" / "cdk.tf.json").read_text())
    assert VARIABLE not in json.dumps(stack)


@pytest.fixture(scope="module")
def requirement_only(example_synth, tmp_path_factory, terraform_binary):
    """The hypervisors stack's requirement as synthesized, beside a built-in resource (no provider, no network),
    applied once by terravixens' own Terraform environment."""
    workdir = tmp_path_factory.mktemp("requirement")
    document = {
        "terraform": {"backend": {"local": {"path": "state/layer.tfstate"}}},
        "variable": example_synth["hypervisors"]["variable"],
        "resource": {"terraform_data": {"record": {"input": "one"}}},
    }
    (workdir / "cdk.tf.json").write_text(json.dumps(document))
    for args, env in ((["init"], terraform_env(without_guard=True)), (["apply", "-auto-approve"], terraform_env())):
        done = subprocess.run(
            [terraform_binary, *args, "-input=false", "-no-color"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    document["resource"]["terraform_data"]["record"]["input"] = "two"  # a change to plan
    (workdir / "cdk.tf.json").write_text(json.dumps(document))
    return workdir


def terraform_env(without_guard: bool = False) -> dict[str, str]:
    env = provider_install.terraform_env("registry")
    if without_guard:
        env.pop(ENV_NAME)
    return env


def serial(workdir: Path) -> int:
    return json.loads((workdir / "state" / "layer.tfstate").read_text())["serial"]


@pytest.mark.parametrize(
    "args",
    [
        ("plan",),
        ("apply", "-auto-approve"),
        ("destroy", "-auto-approve"),
        ("plan", "-destroy"),
        ("apply", "-refresh-only", "-auto-approve"),
    ],
)
def test_terraform_stops_every_unguarded_plan_with_the_commands_to_use(requirement_only, terraform_binary, args):
    before = serial(requirement_only)
    result = subprocess.run(
        [terraform_binary, args[0], "-input=false", "-no-color", *args[1:]],
        cwd=requirement_only,
        env=terraform_env(without_guard=True),
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, said
    assert "Layer hypervisors is planned and applied through terravixens only" in said
    assert "`bin/cdktf deploy hypervisors` from the repository" in said
    assert serial(requirement_only) == before


def test_terravixens_own_terraform_passes_and_validate_never_needs_it(requirement_only, terraform_binary):
    validate = subprocess.run(
        [terraform_binary, "validate", "-no-color"],
        cwd=requirement_only,
        env=terraform_env(without_guard=True),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert validate.returncode == 0, validate.stdout + validate.stderr
    plan = subprocess.run(
        [terraform_binary, "plan", "-input=false", "-no-color", "-detailed-exitcode"],
        cwd=requirement_only,
        env=terraform_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 2, plan.stdout + plan.stderr  # changes planned, no error


def test_the_environment_a_user_exports_never_holds_it():
    assert ENV_NAME in provider_install.terraform_env("mirror", {})
    for mode in provider_install.MODES:
        assert ENV_NAME not in provider_install.shell_exports(mode, {})


# --------------------------------------------------------------------------------------------- terravixens-terraform
FAKE_TERRAFORM = """#!{python}
import json, os, sys
args = sys.argv[1:]
record = {{"args": args, "cwd": os.getcwd(), "umask": oct(os.umask(0)),
           "guarded": os.environ.get("{guard}"), "checkpoint": os.environ.get("CHECKPOINT_DISABLE"),
           "plan_there": os.path.exists("plan")}}
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
if "-out" in args:
    open(args[args.index("-out") + 1], "w").write("a plan")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


@pytest.fixture
def layer(tmp_path):
    """A checkout with one synthesized layer (local backend), the state an older unguarded run left world-readable,
    and a fake Terraform that records how it was run."""
    stack_dir = tmp_path / "project" / "cdktf.out" / "stacks" / "hypervisors"
    stack_dir.mkdir(parents=True)
    (stack_dir / "cdk.tf.json").write_text(
        json.dumps({"terraform": {"backend": {"local": {"path": "../../../state/hypervisors.tfstate"}}}})
    )
    state = tmp_path / "project" / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    for name in ("hypervisors.tfstate", "hypervisors.tfstate.backup", "platform-prod.tfstate", "notes.txt"):
        (state / name).write_text("{}")
        os.chmod(state / name, 0o644)
    fake = tmp_path / "bin" / "terraform"
    fake.parent.mkdir()
    fake.write_text(FAKE_TERRAFORM.format(python=sys.executable, guard=ENV_NAME))
    fake.chmod(0o755)
    return stack_dir, fake, tmp_path / "log.jsonl"


def wrapper(stack_dir: Path, fake: Path, log: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in (ENV_NAME, "CHECKPOINT_DISABLE", tfwrap.ACTIVE_ENV, "TERRAVIXENS_CONFIRM", "TERRAVIXENS_PROVIDERS")
    }
    environ.update({"PATH": f"{fake.parent}{os.pathsep}{environ['PATH']}", "FAKE_LOG": str(log), **env})
    return subprocess.run(
        [str(WRAPPER), *args],
        cwd=stack_dir,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_everything_but_apply_and_destroy_is_terraform_itself(layer):
    stack_dir, fake, log = layer
    result = wrapper(stack_dir, fake, log, "output", "-json", FAKE_EXIT="3")
    assert result.returncode == 3  # Terraform's own exit code
    [call] = calls(log)
    assert call["args"] == ["output", "-json"] and call["cwd"] == str(stack_dir)
    assert call["umask"] == "0o77" and call["checkpoint"] == "1"
    assert call["guarded"] is None  # only what runs the guard, or only plans, meets the requirement


def test_state_left_world_readable_is_tightened_before_terraform_runs(layer):
    stack_dir, fake, log = layer
    state = stack_dir.parents[2] / "state"
    result = wrapper(stack_dir, fake, log, "init", "-no-color")
    assert result.returncode == 0, result.stderr
    mode = {path.name: stat.S_IMODE(path.stat().st_mode) for path in [state, *state.iterdir()]}
    assert mode == {
        "state": 0o700,
        "hypervisors.tfstate": 0o600,
        "hypervisors.tfstate.backup": 0o600,
        "platform-prod.tfstate": 0o600,
        "notes.txt": 0o644,
    }
    assert "terravixens-terraform: state/hypervisors.tfstate: mode tightened to 0600" in result.stderr
    assert wrapper(stack_dir, fake, log, "init").stderr == ""  # said once, when it changed something


def test_cdktf_diff_plan_is_written_0600_then_deleted(layer):
    stack_dir, fake, log = layer
    (stack_dir / "plan").write_text("an old plan, world-readable")
    os.chmod(stack_dir / "plan", 0o644)
    result = wrapper(stack_dir, fake, log, "plan", "-input=false", "-out", "plan")
    assert result.returncode == 0, result.stderr
    [call] = calls(log)
    assert call["args"] == ["plan", "-input=false", "-out", "plan"]
    assert call["plan_there"] is False  # the old file was removed: the new one is created under umask 077
    assert call["guarded"] == "true" and call["umask"] == "0o77"
    assert not (stack_dir / "plan").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("apply", "-refresh-only"),
        ("apply", "-var=x=1"),
        ("apply", "-target=a.b"),
        ("destroy", "-var-file=x.tfvars"),
        ("apply", "-parallelism=2"),
        ("apply", "saved.tfplan"),
    ],
)
def test_what_the_guarded_path_cannot_honour_is_refused_before_terraform(layer, args):
    stack_dir, fake, log = layer
    result = wrapper(stack_dir, fake, log, *args, "-auto-approve", TERRAVIXENS_CONFIRM="homelab/hypervisors")
    assert result.returncode == 2
    said = " ".join(result.stderr.split())
    assert "does not go through terravixens' guard" in said and "nothing was done" in said
    assert "`bin/terravixens deploy hypervisors`" in said
    assert calls(log) == []


def test_cdktf_destroy_without_the_typed_confirmation_is_declined_with_the_command(layer):
    stack_dir, fake, log = layer
    result = wrapper(stack_dir, fake, log, "destroy", "-auto-approve")
    assert result.returncode == 3
    said = " ".join(result.stderr.split())
    assert (
        "cdktf cannot ask for the typed confirmation a destroy needs: nothing was destroyed. Run `bin/terravixens "
        "destroy hypervisors` (it asks), or `TERRAVIXENS_CONFIRM=SITE/hypervisors bin/cdktf destroy "
        "hypervisors --ignore-missing-stack-dependencies`."
    ) in said
    assert calls(log) == []


def test_apply_outside_a_synthesized_layer_does_nothing(layer, tmp_path):
    _, fake, log = layer
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = wrapper(elsewhere, fake, log, "apply", "-auto-approve")
    assert result.returncode == 2
    assert "is not a layer cdktf synthesized" in result.stderr and calls(log) == []


def test_the_real_terraform_is_never_the_wrapper_itself(layer, tmp_path):
    stack_dir, fake, log = layer
    assert tfwrap.real_terraform({"PATH": str(fake.parent)}) == str(fake)
    assert tfwrap.real_terraform({"PATH": str(fake.parent), tfwrap.REAL_ENV: str(WRAPPER)}) == str(fake)
    assert tfwrap.real_terraform({"PATH": str(WRAPPER.parent), tfwrap.REAL_ENV: "terravixens-terraform"}) in (
        None,
        *[str(Path(p) / "terraform") for p in [WRAPPER.parent]],
    )
    tofu = tmp_path / "bin" / "tofu"
    tofu.symlink_to(fake)
    assert tfwrap.real_terraform({"PATH": str(fake.parent), tfwrap.REAL_ENV: "tofu"}) == str(tofu)
    result = wrapper(stack_dir, fake, log, "version", **{tfwrap.ACTIVE_ENV: "1"})
    assert result.returncode == 4 and "is terravixens-terraform itself" in result.stderr and calls(log) == []
    result = wrapper(stack_dir, fake, log, "version", PATH="/nonexistent")
    assert result.returncode == 4 and "no `terraform` on PATH" in result.stderr


def interrupted_wrapper(
    stack_dir: Path, tmp_path: Path, hang_on: str, signum: int, *args: str
) -> tuple[int, str, list[int]]:
    """The wrapper run as cdktf runs it, its Terraform hanging (tests/fake_hang.py) on `hang_on` holding its output
    through a child; `signum` sent to the wrapper once it hangs. Returns the exit status, stderr and the hung pids."""
    from tests import processes
    from tests.test_hangs import hanging_tool
    from tests.test_runner import pid_in

    terraform = hanging_tool(tmp_path / "hang-bin", "terraform")
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in (ENV_NAME, "CHECKPOINT_DISABLE", tfwrap.ACTIVE_ENV, "TERRAVIXENS_CONFIRM", "TERRAVIXENS_PROVIDERS")
    }
    environ.update(
        {
            "PATH": f"{terraform.parent}{os.pathsep}{environ['PATH']}",
            "FAKE_HANG_ON": hang_on,
            "FAKE_HANG_DIR": str(tmp_path),
            "TERRAVIXENS_SITE": str(ROOT / "sites" / "example.yaml"),
        }
    )
    process = subprocess.Popen(
        [str(WRAPPER), *args],
        cwd=stack_dir,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        pid_in(tmp_path / "hung", within=120)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    return process.returncode, stderr, processes.recorded(tmp_path / "hung")


def test_an_interrupted_cdktf_deploy_ends_terraform_and_says_what_is_done(layer, tmp_path):
    """cdktf stopping its Terraform (SIGTERM) during the guarded apply: the Terraform the operation started is ended
    with its process group (before, the wrapper died at once and left it running), one line, exit 130."""
    import signal

    from tests import processes

    stack_dir, _, _ = layer
    code, stderr, pids = interrupted_wrapper(stack_dir, tmp_path, "init", signal.SIGTERM, "apply", "-auto-approve")
    assert code == ExitCode.INTERRUPTED and "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (
        "terravixens-terraform: interrupted by SIGTERM (terraform init stopped with its process group) at hypervisors "
        "(init): done: nothing; not done: hypervisors; run `bin/cdktf deploy hypervisors` again, or `bin/terravixens "
        "drift hypervisors` to see where hypervisors stands"
    )
    assert len(pids) == 2 and processes.all_gone(pids)  # terraform and the child that held its output


def test_an_interrupted_cdktf_diff_ends_terraform_and_leaves_no_plan(layer, tmp_path):
    import signal

    from tests import processes

    stack_dir, _, _ = layer
    code, stderr, pids = interrupted_wrapper(
        stack_dir, tmp_path, "plan", signal.SIGHUP, "plan", "-input=false", "-out", "plan"
    )
    assert code == ExitCode.INTERRUPTED and "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (
        "terravixens-terraform: interrupted by SIGHUP (terraform plan stopped with its process group); nothing after "
        "it was started; the lines above say what is done"
    )
    assert len(pids) == 2 and processes.all_gone(pids) and not (stack_dir / "plan").exists()


def test_the_approval_question_is_the_one_cdktf_answers():
    """cdktf shows its Approve / Dismiss choice when Terraform's output says "Do you want to perform these actions"
    and then writes `yes` or `no` into the pty: the wrapper asks with that sentence, on a line of its own."""
    assert "Do you want to perform these actions" in CDKTF_HANDLERS.read_text()
    script = (
        "import sys; from terravixens.tfwrap import CdktfConsole; "
        "answer = CdktfConsole().ask('Apply these changes to hypervisors? '); print('ANSWER', answer)"
    )
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(sys.executable, [sys.executable, "-c", script])
    seen = b""
    while b"Enter a value:" not in seen:
        seen += os.read(fd, 1024)
    os.write(fd, b"yes\n")
    while b"ANSWER" not in seen or not seen.rstrip().endswith(b"yes"):
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.waitpid(pid, 0)
    text = seen.decode()
    assert "\nDo you want to perform these actions?\r\n" in "\n" + text.replace("\r\r", "\r")
    assert "ANSWER yes" in text


def test_state_files_are_only_state_files(tmp_path):
    stack = tmp_path / "cdktf.out" / "stacks" / "layer"
    stack.mkdir(parents=True)
    backend = {"terraform": {"backend": {"local": {"path": "../../../x.tfstate"}}}}
    (stack / "cdk.tf.json").write_text(json.dumps(backend))
    (tmp_path / "x.tfstate").write_text("{}")
    (tmp_path / "README.md").write_text("mine")
    os.chmod(tmp_path, 0o755)
    os.chmod(tmp_path / "x.tfstate", 0o644)
    os.chmod(tmp_path / "README.md", 0o644)
    assert tighten_local_state(stack, tmp_path) == [tmp_path / "x.tfstate"]  # the project folder keeps its mode
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "README.md").stat().st_mode) == 0o644
    (stack / "cdk.tf.json").write_text(json.dumps({"terraform": {"backend": {"s3": {"bucket": "b"}}}}))
    assert tighten_local_state(stack, tmp_path) == []
    backups = tmp_path / "state-backups" / "site" / "layer"
    backups.mkdir(parents=True)
    (backups / "one.tfstate").write_text("{}")
    os.chmod(backups / "one.tfstate", 0o644)
    changed = tighten_tree(tmp_path / "state-backups")
    assert backups / "one.tfstate" in changed
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "state-backups").rglob("*")} == {0o700, 0o600}


# --------------------------------------------------------------------------------------------------------- .npmrc
def npx_env(cwd: Path, **extra: str) -> dict:
    """What a process npx starts in this repository sees, from a shell that set nothing."""
    env = {"HOME": os.environ["HOME"], "PATH": os.environ["PATH"], **extra}
    shown = ("CHECKPOINT_DISABLE", "DISABLE_VERSION_CHECK", "TERRAFORM_BINARY_NAME", "TERRAVIXENS_TERRAFORM")
    script = f"console.log(JSON.stringify(Object.fromEntries({list(shown)!r}.map(k => [k, process.env[k] ?? null]))))"
    result = subprocess.run(
        ["npx", "--no-install", "node", "-e", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_npx_in_a_new_shell_gets_the_wrapper_and_no_call_home():
    """cdktf reads these once, when it loads (@cdktf/commons: `terraformBinaryName`, `CHECKPOINT_DISABLE`,
    `DISABLE_VERSION_CHECK`): the .npmrc sets them before, from the repository root and from a folder below it."""
    bundle = CDKTF_HANDLERS.read_text()
    for name in (
        "process.env.TERRAFORM_BINARY_NAME",
        "process.env.CHECKPOINT_DISABLE",
        "process.env.DISABLE_VERSION_CHECK",
    ):
        assert name in bundle, name
    for cwd in (ROOT, ROOT / "terravixens"):
        assert npx_env(cwd) == {
            "CHECKPOINT_DISABLE": "1",
            "DISABLE_VERSION_CHECK": "1",
            "TERRAFORM_BINARY_NAME": str(ROOT / "scripts" / "terravixens-terraform"),
            "TERRAVIXENS_TERRAFORM": None,
        }
    # A binary the user chose stays the one that runs, behind the wrapper.
    chosen = npx_env(ROOT, TERRAFORM_BINARY_NAME="tofu", CHECKPOINT_DISABLE="")
    assert chosen["TERRAFORM_BINARY_NAME"] == str(ROOT / "scripts" / "terravixens-terraform")
    assert chosen["TERRAVIXENS_TERRAFORM"] == "tofu" and chosen["CHECKPOINT_DISABLE"] == "1"
