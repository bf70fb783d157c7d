"""`terravixens-terraform`: the Terraform that `bin/cdktf` (and `npx cdktf`) runs in this repository (docs/adr/0031).

cdktf 0.21 runs `$TERRAFORM_BINARY_NAME` (else `terraform`) in `cdktf.out/stacks/<layer>/`: `version`, `init`,
`providers lock`, `plan -input=false -out plan` (`cdktf diff`), `apply [-auto-approve]` (`cdktf deploy`, in a pty,
answering Terraform's "Do you want to perform these actions?" with its own Approve/Dismiss prompt), `destroy
[-auto-approve]` and `output -json`. `bin/cdktf` (and the repository's .npmrc, for `npx cdktf`) points
TERRAFORM_BINARY_NAME at scripts/terravixens-terraform, which runs this:

- `apply` is `terravixens deploy LAYER` without its synth (cdktf just synthesized): plan -out → guard → per-node
  summary → cdktf's approval (or -auto-approve) → verified state backup → apply of that saved plan.
- `destroy` is `terravixens destroy LAYER`: it needs the typed confirmation SITE/LAYER in $TERRAVIXENS_CONFIRM (cdktf's
  prompt can only answer yes or no), else it refuses and prints the exact command.
- `init` runs as asked through the one bounded runner, its output passed on; when it cannot install a provider, one
  line more names the fix (the mirror's two commands when the registry is unreachable, the provider the mirror lacks).
- `plan` runs with the stacks' `terravixens_guarded` requirement met, through the one bounded runner (its deadline
  $TERRAVIXENS_TERRAFORM_TIMEOUT, its process group ended on a stop), its output passed on. A plan file records
  that requirement as met, and a saved plan is applied with the values it records: so no plan file it writes may
  outlive it (docs/adr/0053-snapshot-identity-and-plan-files.md). Its options are read as Terraform's own parser
  (Go's flag package) reads them: one `-out PATH` or `-out=PATH` at most, written instead to a private temporary
  folder (0700, the file 0600) removed once Terraform has ended; a repeated `-out`, `--out`, a flag Terraform's plan
  does not have, an argument after the flags, or a global option other than a `-chdir` to this very folder is
  refused before Terraform runs (BAD_INPUT): nothing is planned.
- anything else is Terraform itself (exec), after the same umask.

`apply`, `destroy` and `plan` run inside terravixens.runner.handle_signals(), as `terravixens` does: SIGINT, SIGTERM
and SIGHUP (cdktf stopping its child, a closed terminal) end the Terraform the runner started with its process group,
then one line says which signal, what was stopped and what is done and not (the operation's journal), exit 130. The
wrapper's own exit codes are those of the one table (terravixens.exitcodes.ExitCode); `plan` and the commands passed
through return Terraform's own.

Whatever runs: umask 077, HashiCorp's checkpoint off, and the layer's local state folder 0700 and its files 0600
before Terraform starts (terravixens.state_files). The real binary is $TERRAVIXENS_TERRAFORM (`bin/cdktf` and the .npmrc
keep a TERRAFORM_BINARY_NAME the user had set there), else `terraform` on PATH. The commands its refusals name are
spelled once, in terravixens.guarded_path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from terravixens import runner
from terravixens.exitcodes import ExitCode
from terravixens.guarded_path import CDKTF, CONFIRM_ENV, ENV_NAME, TERRAVIXENS, WRAPPER, commands
from terravixens.operations.console import Console
from terravixens.state_files import tighten_backend_state, tighten_local_state, tighten_tree

REAL_ENV = "TERRAVIXENS_TERRAFORM"
ACTIVE_ENV = "TERRAVIXENS_WRAPPED"  # set for the real Terraform: the wrapper never runs itself
PROJECT_FROM_STACK = 3  # cdktf.out/stacks/<layer>/ (terravixens.stacks.backend.PROJECT_ROOT_FROM_STACK)
GUARDED = ("apply", "destroy")
# What cdktf passes to `apply`/`destroy` that the guarded path honours; -no-color and -input change nothing here.
ACCEPTED = {"-auto-approve", "-no-color", "-input=false", "-input=true"}
# The wrapper's own stops (the one table): bad input, not confirmed, an external step failed or is missing,
# interrupted. The guarded path returns the operation's own code.
BAD_INPUT, DECLINED, FAILED, INTERRUPTED = (
    ExitCode.BAD_INPUT,
    ExitCode.DECLINED,
    ExitCode.FAILED,
    ExitCode.INTERRUPTED,
)


def say(text: str) -> None:
    print(f"{WRAPPER}: {text}", file=sys.stderr, flush=True)


def split_command(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """(global options, subcommand, its arguments): `-chdir=D plan -out x` → (['-chdir=D'], 'plan', ['-out', 'x'])."""
    for index, arg in enumerate(argv):
        if not arg.startswith("-"):
            return list(argv[:index]), arg, list(argv[index + 1 :])
    return list(argv), None, []


def _is_wrapper(path: str) -> bool:
    return Path(path).name == WRAPPER or Path(path).resolve().name == WRAPPER


def real_terraform(environ: Mapping[str, str] = os.environ) -> str | None:
    """The Terraform (or OpenTofu) to run: $TERRAVIXENS_TERRAFORM, else `terraform`; never this wrapper."""
    for wanted in (environ.get(REAL_ENV), "terraform"):
        if not wanted:
            continue
        found = shutil.which(wanted, path=environ.get("PATH"))
        if found and not _is_wrapper(found):
            return found
    return None


def terraform_environment(guarded: bool, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The real Terraform's environment: the provider installation mode's, checkpoint off; the stacks' requirement
    met only for what runs the guard itself or only plans."""
    from terravixens import provider_install

    env = provider_install.terraform_env(environ=environ)
    if not guarded:
        env.pop(ENV_NAME, None)
    env[ACTIVE_ENV] = "1"
    return env


def project_of(stack_dir: Path) -> Path:
    return stack_dir.parents[PROJECT_FROM_STACK - 1]


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if root in path.parents else str(path)


def tighten(stack_dir: Path) -> None:
    """The layer's local state folder 0700 and files 0600, and what `terraform init` recorded of its backend
    (.terraform 0700, .terraform/terraform.tfstate 0600), saying what changed (nothing, usually)."""
    if (stack_dir / "cdk.tf.json").is_file():
        root = project_of(stack_dir)
        for path in [*tighten_local_state(stack_dir, root), *tighten_backend_state(stack_dir)]:
            say(
                f"{_shown(path, root)}: mode tightened to {'0700' if path.is_dir() else '0600'} (it holds the layer's "
                f"secrets)"
            )


# `terraform plan`'s flags (`terraform plan -help`, Terraform 1.5 to 1.11): those that take no value, and those that
# take one (`-name=value`, or `-name value` with the next argument, whatever it looks like: Go's flag package).
PLAN_SWITCHES = frozenset(
    {"destroy", "refresh-only", "refresh", "compact-warnings", "detailed-exitcode", "input", "json", "lock", "no-color"}
)
PLAN_VALUES = frozenset(
    {"replace", "target", "var", "var-file", "generate-config-out", "lock-timeout", "out", "parallelism", "state"}
)
PLAN_FILE_NAME = "plan"  # the plan file's name inside the private folder


class PlanRefused(ValueError):
    """A `plan` the wrapper does not run: the message says which argument and why."""


def plan_out(args: Sequence[str]) -> tuple[int, int] | None:
    """Where `plan`'s arguments give the plan file: (index of the `-out` argument, how many arguments it spans: 1 for
    `-out=PATH`, 2 for `-out PATH`), None without one. PlanRefused for anything that could hide a second plan file
    or is not a flag of Terraform's plan, read as Go's flag package reads it (one or two leading dashes, `=value`
    or the next argument as the value of a flag that takes one, the first non-flag argument ending the flags)."""
    found: list[tuple[int, int]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            raise PlanRefused(f"{arg!r}: `terraform plan` takes flags only (no argument after them)")
        dashes = 2 if arg.startswith("--") else 1
        name, equals, value = arg[dashes:].partition("=")
        if name in PLAN_SWITCHES:
            index += 1
            continue
        if name not in PLAN_VALUES:
            raise PlanRefused(f"{arg!r}: not a flag of `terraform plan` this wrapper knows")
        if not equals:
            if index + 1 >= len(args):
                raise PlanRefused(f"{arg!r}: the flag needs a value")
            value = args[index + 1]
        if name == "out":
            if dashes != 1:
                raise PlanRefused(f"{arg!r}: write the plan file as -out=PATH (cdktf's form), not --out")
            if not value:
                raise PlanRefused(f"{arg!r}: -out needs a path")
            found.append((index, 1 if equals else 2))
        index += 1 if equals else 2
    if len(found) > 1:
        raise PlanRefused(
            f"-out given {len(found)} times: Terraform writes the last one; one plan file at most, which this "
            f"wrapper keeps private"
        )
    return found[0] if found else None


def plan_options(options: Sequence[str], stack_dir: Path) -> None:
    """Global options before `plan`: only a `-chdir` to the folder the wrapper runs in (PlanRefused otherwise): a
    plan of another folder would escape what the wrapper tightens and deletes."""
    for option in options:
        name, equals, value = option.partition("=")
        if name == "-chdir" and equals and value:
            target = (stack_dir / value).resolve()
            if target == stack_dir.resolve():
                continue
            raise PlanRefused(
                f"{option!r}: a plan of another folder ({value}) goes through the wrapper run there, not -chdir"
            )
        raise PlanRefused(f"global option {option!r}: `plan` takes none here but -chdir to this folder")


def run_plan(binary: str, options: Sequence[str], args: Sequence[str], stack_dir: Path) -> int:
    """`cdktf diff`: the plan as asked, through the one bounded runner (stdout passed on line by line as Terraform
    writes it, stderr once it ends); its plan file, if one is asked, written to a private temporary folder removed
    afterwards (cdktf never reads it). Terraform's own exit code; refused arguments are BAD_INPUT, a Terraform that
    cannot start or passes its deadline is a stop (FAILED) naming why."""
    from terravixens.operations.outcome import OperationError
    from terravixens.operations.terraform import STOP_GRACE, terraform_timeout

    try:
        plan_options(options, stack_dir)
        out = plan_out(args)
    except PlanRefused as error:
        say(
            f"`terraform plan`: {error}; nothing was planned. A plan to apply is made by the guarded path: "
            f"{commands(stack_dir.name)}."
        )
        return int(BAD_INPUT)
    try:
        timeout = terraform_timeout()
    except OperationError as error:
        say(str(error))
        return int(error.code)
    with contextlib.ExitStack() as stack:
        planned = list(args)
        if out is not None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="terravixens-plan-")))
            os.chmod(folder, 0o700)
            index, span = out
            planned[index : index + span] = [f"-out={folder / PLAN_FILE_NAME}"]
        ran = runner.run(
            [binary, *options, "plan", *planned],
            timeout=timeout,
            env=terraform_environment(guarded=True),
            on_stdout_line=lambda line: print(line, flush=True),
            label="terraform plan",
            grace=STOP_GRACE,
        )
    if ran.stderr:
        sys.stderr.write(ran.stderr)
        sys.stderr.flush()
    if out is not None and ran.returncode is not None:
        say(
            f"the plan file went to a private temporary folder, now deleted: {stack_dir.name} is applied only after "
            f"the plan guard and a verified state backup (`{CDKTF} deploy {stack_dir.name}`)"
        )
    if ran.returncode is not None:
        return ran.returncode
    say(f"{ran.reason}; nothing was planned")
    return int(FAILED)


def run_init(binary: str, argv: Sequence[str]) -> int:
    """`terraform init` (cdktf runs it before every diff and deploy): as asked, its output passed on, through the one
    bounded runner; when it could not install a provider, one more line naming the fix (the mirror's commands when
    the registry is unreachable, the provider the mirror lacks in the mirror mode). Terraform's own exit code."""
    from terravixens import provider_install
    from terravixens.operations.outcome import OperationError
    from terravixens.operations.terraform import STOP_GRACE, terraform_timeout

    try:
        timeout = terraform_timeout()
    except OperationError as error:
        say(str(error))
        return int(error.code)
    env = terraform_environment(guarded=False)
    ran = runner.run(
        [binary, *argv],
        timeout=timeout,
        env=env,
        on_stdout_line=lambda line: print(line, flush=True),
        label="terraform init",
        grace=STOP_GRACE,
    )
    if ran.stderr:
        sys.stderr.write(ran.stderr)
        sys.stderr.flush()
    tighten(Path.cwd())  # the backend record init may have rewritten in place, keeping an old 0644
    if ran.returncode is None:
        say(f"{ran.reason}; nothing was initialised")
        return int(FAILED)
    if ran.returncode != 0:
        fix = provider_install.init_failure(f"{ran.stderr}\n{ran.stdout}", env)
        if fix is not None:
            say(f"{Path.cwd().name}: terraform init failed: {fix}")
    return ran.returncode


def refuse_options(command: str, layer: str, args: Sequence[str]) -> str | None:
    unknown = [arg for arg in args if arg not in ACCEPTED]
    if not unknown:
        return None
    return (
        f"`terraform {command} {' '.join(unknown)}` does not go through terravixens' guard (cdktf option "
        f"--refresh-only, --var, --var-file, --terraform-parallelism or a target): nothing was done. Use "
        f"{commands(layer)}."
    )


def site_path(root: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The site cdktf synthesized: $TERRAVIXENS_SITE relative to the project (cdktf ran the app there)."""
    from terravixens.config.loader import SITE_ENV

    named = environ.get(SITE_ENV)
    if not named:
        return None
    path = Path(named).expanduser()
    return path if path.is_absolute() else root / path


class CdktfConsole(Console):
    """terravixens' progress lines for cdktf's log, and its confirmation asked the way Terraform asks, so that cdktf
    shows its own Approve / Dismiss choice and answers `yes` or `no` in the pty."""

    def ask(self, prompt: str) -> str | None:
        if not sys.stdin.isatty():
            return None
        self.say("Do you want to perform these actions?")
        self.say(f"  terravixens: {prompt.strip()}")
        try:
            return input("  Enter a value: ")
        except EOFError:
            return None


def guarded(command: str, args: Sequence[str], stack_dir: Path, binary: str) -> int:
    """cdktf's `apply` / `destroy` of one layer, through terravixens' deploy / destroy."""
    layer = stack_dir.name
    root = project_of(stack_dir)
    if stack_dir.parent.name != "stacks" or not (stack_dir / "cdk.tf.json").is_file():
        say(
            f"`{command}` here ({stack_dir}) is not a layer cdktf synthesized (cdktf.out/stacks/<layer>/): nothing "
            f"was done. Run terravixens' commands from the repository: `{TERRAVIXENS} deploy LAYER`."
        )
        return BAD_INPUT
    problem = refuse_options(command, layer, args)
    if problem:
        say(problem)
        return BAD_INPUT
    confirmation = os.environ.get(CONFIRM_ENV)
    if command == "destroy" and not confirmation:
        say(
            f"cdktf cannot ask for the typed confirmation a destroy needs: nothing was destroyed. Run `{TERRAVIXENS} "
            f"destroy {layer}` (it asks), or `{CONFIRM_ENV}=SITE/{layer} {CDKTF} destroy {layer} "
            f"--ignore-missing-stack-dependencies`."
        )
        return DECLINED

    from terravixens.config.loader import SiteError, load_site
    from terravixens.operations.deploy import DeployOptions, deploy
    from terravixens.operations.destroy import DestroyOptions, destroy
    from terravixens.operations.outcome import OperationError
    from terravixens.operations.standalone_env import standalone_layer_env
    from terravixens.operations.terraform import Terraform
    from terravixens.operations.workspace import Workspace

    path = site_path(root)
    try:
        site = load_site(path)
    except SiteError as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    from terravixens.operations.journal import interrupted_line

    console = CdktfConsole()
    again = (
        f"run `{CDKTF} {'deploy' if command == 'apply' else 'destroy'} {layer}` again, or `{TERRAVIXENS} drift "
        f"{layer}` to see where {layer} stands"
    )
    try:
        ws = Workspace(site, root=root, outdir=stack_dir.parent.parent)
        tf = Terraform(
            binary=binary,
            env={ACTIVE_ENV: "1"},
            layer_env=standalone_layer_env(site, str(path) if path else None, None, [layer], ws.site_layers),
        )
        if command == "apply":
            return int(deploy(ws, [layer], tf, DeployOptions(yes="-auto-approve" in args, synth=False), console))
        return int(destroy(ws, layer, tf, DestroyOptions(confirm=confirmation, synth=False), console))
    except OperationError as error:
        say(str(error))
        line = console.journal.line(interrupted=False)
        if line:
            say(line)
        return int(error.code)
    except KeyboardInterrupt as error:
        say(f"{interrupted_line(error, console.journal)}; {again}")
        return int(INTERRUPTED)
    finally:
        tighten(stack_dir)
        from terravixens.operations.backup import BACKUP_DIR

        tighten_tree(root / BACKUP_DIR)


def main(argv: Sequence[str] | None = None) -> int:
    """The wrapper: its own stops, the guarded path and the plan inside runner.handle_signals() (an interrupt ends
    the Terraform the runner started, then one line), everything else exec'd. A plain number for the shell."""
    argv = list(sys.argv[1:] if argv is None else argv)
    with runner.handle_signals():
        try:
            return int(_main(argv))
        except KeyboardInterrupt as error:  # outside an operation (its own line is said in `guarded`)
            say(runner.interrupted_line(error))
            return int(INTERRUPTED)


def _main(argv: list[str]) -> int:
    os.umask(0o077)
    if os.environ.get(ACTIVE_ENV):
        say(f"the Terraform {WRAPPER} found is {WRAPPER} itself: set {REAL_ENV} to the real terraform (or tofu)")
        return FAILED
    from terravixens.provider_install import ProviderModeError, mode

    try:
        mode()
    except ProviderModeError as error:
        say(str(error))
        return BAD_INPUT
    binary = real_terraform()
    if binary is None:
        wanted = os.environ.get(REAL_ENV) or "terraform"
        say(
            f"no `{wanted}` on PATH: install Terraform >= 1.11 (deploying a gitops layer needs its write-only "
            f"attributes; synth alone needs >= 1.5), or set {REAL_ENV} to an OpenTofu binary"
        )
        return FAILED
    options, command, args = split_command(argv)
    stack_dir = Path.cwd()
    try:
        tighten(stack_dir)
    except OSError as error:
        say(f"cannot tighten the local state's modes: {error}")
        return FAILED
    if command in GUARDED:
        if options:
            say(f"global options {' '.join(options)} with `{command}` do not go through the guard: nothing was done")
            return BAD_INPUT
        return guarded(command, args, stack_dir, binary)
    if command == "init" and not options:
        try:
            return run_init(binary, argv)
        except OSError as error:
            say(f"{binary}: {error.strerror}")
            return FAILED
    if command == "plan":
        try:
            return run_plan(binary, options, args, stack_dir)
        except OSError as error:
            say(f"{binary}: {error.strerror}")
            return FAILED
    try:
        os.execve(binary, [binary, *argv], terraform_environment(guarded=False))
    except OSError as error:
        say(f"{binary}: {error.strerror}")
    return FAILED


if __name__ == "__main__":
    sys.exit(main())
