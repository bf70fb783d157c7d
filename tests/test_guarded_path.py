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
from tests.library_stacks import EdgeStack

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
    from tests.spec_support import standalone_data  # the shipped L2 example

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
out = [arg.split("=", 1)[1] for arg in args if arg.startswith("-out=")]
if "-out" in args:
    out.append(args[args.index("-out") + 1])
record = {{"args": args, "cwd": os.getcwd(), "umask": oct(os.umask(0)),
           "guarded": os.environ.get("{guard}"), "checkpoint": os.environ.get("CHECKPOINT_DISABLE"),
           "plan_there": os.path.exists("plan"),
           "out_folder_mode": oct(os.stat(os.path.dirname(out[0])).st_mode & 0o777) if out else None}}
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
for path in out:
    open(path, "w").write("a plan")
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


def test_cdktf_diff_plan_is_written_to_a_private_folder_then_deleted(layer, tmp_path):
    stack_dir, fake, log = layer
    (tmp_path / "tmp").mkdir()
    result = wrapper(stack_dir, fake, log, "plan", "-input=false", "-out", "plan", TMPDIR=str(tmp_path / "tmp"))
    assert result.returncode == 0, result.stderr
    [call] = calls(log)
    [out] = [arg for arg in call["args"] if arg.startswith("-out=")]
    written = Path(out.split("=", 1)[1])
    assert call["args"] == ["plan", "-input=false", out] and written.name == "plan"
    assert written.parent.parent == tmp_path / "tmp" and written.parent.name.startswith("terravixens-plan-")
    assert call["out_folder_mode"] == "0o700" and call["umask"] == "0o77" and call["guarded"] == "true"
    assert not written.parent.exists() and not (stack_dir / "plan").exists()
    assert result.stderr.splitlines()[-1] == (
        "terravixens-terraform: the plan file went to a private temporary folder, now deleted: hypervisors is "
        "applied only after the plan guard and a verified state backup (`bin/cdktf deploy hypervisors`)"
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (("plan", "-out=a", "-out=b"), "-out given 2 times: Terraform writes the last one"),
        (("plan", "-out", "a", "-out=b"), "-out given 2 times"),
        (("plan", "--out=b"), "'--out=b': write the plan file as -out=PATH (cdktf's form), not --out"),
        (("plan", "-out="), "'-out=': -out needs a path"),
        (("plan", "-out"), "'-out': the flag needs a value"),
        (("plan", "-input=false", "b"), "'b': `terraform plan` takes flags only"),
        (("plan", "-input=false", "--", "-out=b"), "'--': `terraform plan` takes flags only"),
        (("plan", "-o=b"), "'-o=b': not a flag of `terraform plan` this wrapper knows"),
        (("-chdir=../platform-prod", "plan", "-out=c"), "'-chdir=../platform-prod': a plan of another folder"),
        (("-chdir=..", "plan"), "a plan of another folder (..)"),
        (("-help", "plan"), "global option '-help'"),
    ],
)
def test_a_plan_file_that_could_escape_the_wrapper_is_refused(layer, args, words):
    """Issue 26, item 4 (medium): on b4ffe4b `plan -out=a -out=b` (Terraform writes b, the wrapper deleted a),
    `--out=b` (Go's flags take two dashes) and `-chdir=<another stack> plan -out=c` left a plan file recording
    terravixens_guarded=true, which a plain `terraform apply` then applied without the guard."""
    stack_dir, fake, log = layer
    (stack_dir.parent / "platform-prod").mkdir()
    result = wrapper(stack_dir, fake, log, *args)
    assert result.returncode == ExitCode.BAD_INPUT and calls(log) == []
    said = result.stderr.splitlines()[-1]  # after the state's modes tightened, said the first time only
    assert said.startswith("terravixens-terraform: `terraform plan`: ") and words in said, said
    assert "nothing was planned" in said and "`bin/cdktf deploy hypervisors` from the repository" in said
    assert sorted(p.name for p in stack_dir.iterdir()) == ["cdk.tf.json"]
    assert sorted(p.name for p in (stack_dir.parent / "platform-prod").iterdir()) == []


def test_the_flags_cdktf_passes_and_a_chdir_here_still_plan(layer):
    stack_dir, fake, log = layer
    args = (
        "-chdir=.", "plan", "-input=false", "-generate-config-out=generated_resources.tf", "-out", "plan", "-destroy",
        "-refresh-only", "-parallelism=3", "-no-color", "-var=a=1", "-var-file=x.tfvars", "-var", "-out=not-a-flag",
    )  # fmt: skip
    result = wrapper(stack_dir, fake, log, *args)
    assert result.returncode == 0, result.stderr
    [call] = calls(log)
    assert call["args"][0] == "-chdir=." and call["args"][-2:] == ["-var", "-out=not-a-flag"]  # -var's value
    assert [arg for arg in call["args"] if arg.startswith("-out=") and "terravixens-plan-" in arg]


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
    from tests.processes import hanging_tool, pid_in

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
            "TMPDIR": str(tmp_path / "tmp"),
        }
    )
    (tmp_path / "tmp").mkdir(exist_ok=True)
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
    assert list((tmp_path / "tmp").iterdir()) == []  # the private plan folder is gone too
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


# ----------------------------------------------------------------------- no plan escapes the guard (issue 26, item 4)
SHIM = """#!{python}
# The real Terraform, run for the wrapper; records where the plan file it wrote lives, and how private, while it does.
import json, os, stat, subprocess, sys
ran = subprocess.run([{real!r}, *sys.argv[1:]])
out = [arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith("-out=")]
if out:
    with open({log!r}, "a") as log:
        log.write(json.dumps({{"file": out[0], "exists": os.path.exists(out[0]),
                               "mode": oct(stat.S_IMODE(os.stat(out[0]).st_mode)) if os.path.exists(out[0]) else None,
                               "folder_mode": oct(stat.S_IMODE(os.stat(os.path.dirname(out[0])).st_mode))}}) + "\\n")
sys.exit(ran.returncode)
"""


@pytest.fixture
def guarded_stack(example_synth, tmp_path, terraform_binary):
    """A layer as cdktf synthesizes it (cdktf.out/stacks/hypervisors/: the app's `terravixens_guarded` requirement, a
    built-in resource: no provider, no network), applied once by terravixens' own Terraform environment, then changed;
    a second layer beside it; the real Terraform behind the wrapper through a shim that records the plan files."""
    stacks = tmp_path / "project" / "cdktf.out" / "stacks"
    document = {
        "terraform": {"backend": {"local": {"path": "state/layer.tfstate"}}},
        "variable": example_synth["hypervisors"]["variable"],
        "resource": {"terraform_data": {"record": {"input": "one"}}},
    }
    for name in ("hypervisors", "platform-prod"):
        (stacks / name).mkdir(parents=True)
        (stacks / name / "cdk.tf.json").write_text(json.dumps(document))
        for args, env in ((["init"], terraform_env(without_guard=True)), (["apply", "-auto-approve"], terraform_env())):
            done = subprocess.run(
                [terraform_binary, *args, "-input=false", "-no-color"],
                cwd=stacks / name,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
    document["resource"]["terraform_data"]["record"]["input"] = "two"  # a change to plan
    for name in ("hypervisors", "platform-prod"):
        (stacks / name / "cdk.tf.json").write_text(json.dumps(document))
    shim = tmp_path / "shim" / "terraform-shim"
    shim.parent.mkdir()
    shim.write_text(SHIM.format(python=sys.executable, real=terraform_binary, log=str(tmp_path / "plans.jsonl")))
    shim.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    return stacks / "hypervisors", shim, tmp_path


def plain(terraform_binary: str, stack_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """Terraform as a user runs it by hand: without the guard's value in the environment."""
    return subprocess.run(
        [terraform_binary, *args],
        cwd=stack_dir,
        env=terraform_env(without_guard=True),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_plan_file_made_through_the_wrapper_applies_without_the_guard(guarded_stack, terraform_binary):
    """Issue 26, item 4 (medium), with the real Terraform: on b4ffe4b `terravixens-terraform plan -out=a -out=b`,
    `plan --out=b` and `-chdir=<another stack> plan -out=c` each left a plan file recording terravixens_guarded=true,
    and a plain `terraform apply FILE` applied it with no guard and no backup. Now each is refused before Terraform
    runs, and the one plan file the wrapper lets Terraform write (cdktf's `-out plan`) lives in a private folder
    that is gone when the wrapper ends: no file named on its command line can be applied."""
    stack_dir, shim, tmp_path = guarded_stack
    serials = {name: serial(stack_dir.parent / name) for name in ("hypervisors", "platform-prod")}
    attempts = [
        (("plan", "-input=false", "-no-color", "-out=a", "-out=b"), ExitCode.BAD_INPUT),
        (("plan", "-input=false", "-no-color", "--out=b"), ExitCode.BAD_INPUT),
        (("-chdir=../platform-prod", "plan", "-input=false", "-no-color", "-out=c"), ExitCode.BAD_INPUT),
        (("plan", "-input=false", "-no-color", "-out", "plan"), 0),  # cdktf diff's own
    ]
    for argv, code in attempts:
        result = subprocess.run(
            [str(WRAPPER), *argv],
            cwd=stack_dir,
            env={
                **terraform_env(without_guard=True),
                tfwrap.REAL_ENV: str(shim),
                "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
                "TMPDIR": str(tmp_path / "tmp"),
            },
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == code, result.stdout + result.stderr
    said = " ".join(result.stdout.split())
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in said  # the real plan ran, guard value met
    [written] = [json.loads(line) for line in (tmp_path / "plans.jsonl").read_text().splitlines()]
    assert written["exists"] and written["mode"] == "0o600" and written["folder_mode"] == "0o700"
    assert Path(written["file"]).parent.parent == tmp_path / "tmp" and not Path(written["file"]).exists()
    assert list((tmp_path / "tmp").iterdir()) == []
    for folder in (stack_dir, stack_dir.parent / "platform-prod"):
        assert sorted(p.name for p in folder.iterdir()) == [".terraform", "cdk.tf.json", "state"]
    for name in ("a", "b", "c", "plan", "../platform-prod/c", written["file"]):
        applied = plain(terraform_binary, stack_dir, "apply", "-input=false", "-no-color", "-auto-approve", name)
        assert applied.returncode == 1, applied.stdout + applied.stderr
    assert {name: serial(stack_dir.parent / name) for name in serials} == serials
    assert recorded_input(stack_dir) == recorded_input(stack_dir.parent / "platform-prod") == "one"


def test_the_escape_was_real_a_guarded_plan_file_applies_without_the_guard(guarded_stack, terraform_binary):
    """Why no plan file may outlive the wrapper: a plan saved with terravixens_guarded=true records it, and Terraform
    applies a saved plan with the values it records — a plain `terraform apply FILE` needs no guard (what the
    escapes above left behind on b4ffe4b). The stacks' requirement stops only what plans."""
    stack_dir, _, _ = guarded_stack
    before = serial(stack_dir)
    planned = subprocess.run(
        [terraform_binary, "plan", "-input=false", "-no-color", "-out=escaped"],
        cwd=stack_dir,
        env=terraform_env(),  # the wrapper's environment: the requirement met
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    unguarded = plain(terraform_binary, stack_dir, "apply", "-input=false", "-no-color", "-auto-approve", "escaped")
    assert unguarded.returncode == 0 and serial(stack_dir) > before, unguarded.stdout + unguarded.stderr
    assert recorded_input(stack_dir) == "two"  # applied, with no guard, no backup


def recorded_input(stack_dir: Path) -> str:
    state = json.loads((stack_dir / "state" / "layer.tfstate").read_text())
    [resource] = state["resources"]
    return str(resource["instances"][0]["attributes"]["input"]["value"])  # terraform_data keeps a dynamic value


# ------------------------------------------------------------------- terraform init's backend record (issue 26, item 6)
def _loose_backend_record(stack_dir: Path) -> Path:
    """What an init run outside terravixens (umask 022) leaves: .terraform 0755, its backend record 0644 — which
    Terraform rewrites in place, keeping that mode, at every later init (seen with Terraform 1.11.4)."""
    folder = stack_dir / ".terraform"
    folder.mkdir(exist_ok=True)
    record = folder / "terraform.tfstate"
    if not record.exists():
        record.write_text('{"version": 3, "backend": {"type": "local", "config": {"path": "state/layer.tfstate"}}}')
    os.chmod(folder, 0o755)
    os.chmod(record, 0o644)
    return record


def test_the_wrappers_init_leaves_the_backend_record_private(layer):
    """Issue 26, item 6 (low): `.terraform/terraform.tfstate` stayed 0644 through every init on b4ffe4b."""
    stack_dir, fake, log = layer
    record = _loose_backend_record(stack_dir)
    result = wrapper(stack_dir, fake, log, "init", "-no-color")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    tightened = "cdktf.out/stacks/hypervisors/.terraform/terraform.tfstate: mode tightened to 0600"
    assert f"terravixens-terraform: {tightened} (it holds the layer's secrets)" in result.stderr.splitlines()


def test_the_operations_init_leaves_the_backend_record_private(requirement_only, terraform_binary, monkeypatch):
    """The real `terraform init` through the operations' Terraform, over a record an outside init left 0644."""
    from terravixens.operations.terraform import Terraform

    record = _loose_backend_record(requirement_only)
    monkeypatch.setenv("TERRAFORM_BINARY_NAME", terraform_binary)
    monkeypatch.delenv("TERRAVIXENS_PROVIDERS", raising=False)
    Terraform(env={ENV_NAME: "true"}).init(requirement_only, "hypervisors")
    assert json.loads(record.read_text())["backend"]["type"] == "local"  # Terraform's own record, rewritten
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE(record.parent.stat().st_mode) == 0o700
