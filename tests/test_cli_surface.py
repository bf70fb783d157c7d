"""The command line's shared surface (issue 18): --site everywhere (the positional site deprecated, ADR 0040),
`--version`, shell completion generated from COMMANDS, and an `Examples:` section plus the exit codes in every
`--help`."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from terravixens import cli
from terravixens.arguments import Definition

ROOT = Path(__file__).resolve().parent.parent
SITE = "sites/example.yaml"
NOTE = "deprecated: the site as a positional argument goes in the next release; write --site"


def run(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "terravixens.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


# ---------------------------------------------------------------------------------------------------- --site
@pytest.mark.parametrize("command", ["validate", "stacks"])
def test_the_positional_site_still_works_once_with_a_note(command, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main([command, "--site", SITE]) == 0
    by_option = capsys.readouterr()
    assert cli.main([command, SITE]) == 0
    by_position = capsys.readouterr()
    assert by_position.out == by_option.out
    # the note, then whatever the command says on stderr either way (validate: the site rules' warnings)
    assert by_position.err == f"terravixens {command}: {NOTE} {SITE}\n" + by_option.err


def test_two_different_sites_are_refused_before_anything_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["validate", str(tmp_path / "missing.yaml"), "--site", SITE]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == (
        f"terravixens validate: two sites given ({tmp_path / 'missing.yaml'} and --site {SITE}): give --site only\n"
    )
    assert cli.main(["stacks", SITE, "--site", SITE]) == 0  # the same file twice is one site
    assert capsys.readouterr().err == f"terravixens stacks: {NOTE} {SITE}\n"


def test_every_command_that_reads_a_site_takes_site_as_an_option():
    """Each command that reads a site has --site; none takes the site only as a positional argument (validate's and
    stacks' deprecated one is `site_positional`, turned into --site with a note). A new command (`show`) is held to
    the second rule without being listed."""
    top = cli.parser()
    takes_site = {"validate", "stacks", "plan-guard", "upgrade", "deploy", "destroy", "restore", "decommission"}
    takes_site |= {"remove-dead-member", "snapshot", "restore-etcd", "drift", "check", "review", "spec validate"}
    takes_site |= {"spec serve"}
    for entry in cli.COMMANDS:
        sub = _subparser(top, entry.name)
        options = {option for action in sub._actions for option in action.option_strings}
        positional = {action.dest for action in sub._actions if not action.option_strings}
        assert "site" not in positional, entry.name
        assert entry.name not in takes_site or "--site" in options, entry.name
    assert {e.name for e in cli.COMMANDS} >= takes_site


def _subparser(top, name: str):
    parser = top
    for word in name.split():
        action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = action.choices[word]
    return parser


# --------------------------------------------------------------------------------------------- examples, help
@pytest.mark.parametrize("entry", cli.COMMANDS, ids=lambda c: c.name)
def test_every_command_has_examples_that_parse(entry):
    assert entry.examples, f"{entry.name}: declare examples=(...) in its Definition (its module)"
    for example in entry.examples:
        words = shlex.split(example)
        start = words.index("terravixens") + 1
        end = next((i for i, word in enumerate(words) if i > start and word in ("|", ">", ";", "&&")), len(words))
        argv = words[start:end]
        assert " ".join(argv[: len(entry.name.split())]) == entry.name, (entry.name, example)
        args = cli.parser().parse_args(argv)  # argparse exits 2 (failing the test) on an example it refuses
        assert args.entry is entry


@pytest.mark.parametrize("entry", cli.COMMANDS, ids=lambda c: c.name)
def test_every_help_shows_its_examples_then_its_exit_codes(entry, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([*entry.name.split(), "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    examples = text.index("\nExamples:\n")
    codes = text.index("\nexit codes (docs/commands.md#exit-codes):\n")
    assert examples < codes
    shown = text[examples:codes].split("\n")[2:]
    assert [line.strip() for line in shown if line.strip()] == list(entry.examples)


def test_top_level_help_lists_completion_and_version(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert "--version" in text and re.search(
        r"^    completion +print a bash, zsh or fish completion script$", text, re.M
    )


def test_top_level_help_lists_every_subcommand_of_a_group(capsys, monkeypatch):
    """A group's line is derived from the table: `spec push` and `spec handoff` were missing from a hand-kept one."""
    monkeypatch.setenv("COLUMNS", "200")  # one line per command (argparse wraps at the terminal's width)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    for group in cli.GROUPS:
        under = [entry.name.split()[1] for entry in cli.COMMANDS if entry.name.split()[0] == group]
        [line] = [line for line in lines if re.match(rf"^    {group} ", line)]
        assert line.endswith(f"{cli.GROUPS[group]}: {', '.join(under)}"), line
    assert any(line.endswith("specs: validate, serve, get, push, handoff") for line in lines)


# ------------------------------------------------------------------------------------------- one command, one module
def _given_types() -> dict[cli.Gives, list[type]]:
    from terravixens.config.model import Site
    from terravixens.operations.console import Console
    from terravixens.operations.terraform import Terraform
    from terravixens.operations.workspace import Workspace

    return {
        cli.Gives.ARGUMENTS: [argparse.Namespace],
        cli.Gives.SITE: [argparse.Namespace, Site],
        cli.Gives.OPERATION: [argparse.Namespace, Workspace, Terraform, Console],
    }


@pytest.mark.parametrize("entry", cli.COMMANDS, ids=lambda c: c.name)
def test_each_run_function_takes_what_its_entry_gives_typed(entry):
    """One wrapper (cli._invoke) for every command: the run function a command's module declares takes exactly what
    its table entry says the wrapper gives, each parameter typed (no Any), and returns an exit code."""
    run = entry.declared.run
    hints = typing.get_type_hints(run)
    parameters = list(inspect.signature(run).parameters)
    assert [hints[name] for name in parameters] == _given_types()[entry.gives], entry.name
    assert hints["return"] is int, entry.name
    assert inspect.signature(entry.declared.arguments).parameters, entry.name


def test_the_command_line_imports_only_the_command_it_runs():
    """Each command's module is imported when it runs (its Definition named as "module:NAME", as a layer kind names
    its stack class): `validate` imports no operation of the cluster and no other command's module."""
    program = (
        "import sys, terravixens.cli as c\n"
        "code = c.main(['validate', '--site', 'sites/example.yaml'])\n"
        "import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('terravixens.'))))"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "terravixens.operations.validate" in loaded
    others = [entry.definition.partition(":")[0] for entry in cli.COMMANDS if entry.name != "validate"]
    assert sorted(set(loaded) & set(others)) == []


# ------------------------------------------------------------------------------------------------- --version
def _fake_terraform(folder: Path, script: str) -> Path:
    """A `terraform` on PATH answering `version -json` (Terraform 1.11's exact keys: terraform_version, platform,
    provider_selections, terraform_outdated; a real one also warns on stderr when ~/.terraformrc is missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / "terraform"
    binary.write_text(f"#!/bin/sh\n{script}\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary


def _env(path: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "TERRAFORM_BINARY_NAME"}
    env["PATH"] = f"{path}{os.pathsep}{Path(sys.executable).parent}"
    return env


def test_version_names_every_component(tmp_path):
    answer = (
        '{"terraform_version":"1.11.4","platform":"linux_amd64","provider_selections":{},"terraform_outdated":false}'
    )
    _fake_terraform(tmp_path / "bin", f"[ \"$*\" = 'version -json' ] || exit 9\necho '{answer}'")
    result = run("--version", env=_env(tmp_path / "bin"))
    assert result.returncode == 0, result.stderr
    from importlib import metadata

    lines = result.stdout.splitlines()
    assert lines[:4] == [
        f"terravixens {metadata.version('terravixens')}",
        f"cdktf (python) {metadata.version('cdktf')}",
        "cdktf-cli 0.21.0",
        "terraform 1.11.4 (terraform, linux_amd64)",
    ]
    assert lines[4] == "providers (providers.json):"
    import json

    pins = json.loads((ROOT / "providers.json").read_text())["providers"]
    assert [line.split() for line in lines[5:]] == [[p["source"], p["version"]] for p in pins.values()]


def test_version_without_terraform_says_so_and_exits_0(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run("--version", env=_env(tmp_path / "empty"))
    assert result.returncode == 0 and "Traceback" not in result.stderr
    [line] = [line for line in result.stdout.splitlines() if line.startswith("terraform ")]
    assert line.startswith("terraform not found (cannot run terraform: ") and "TERRAFORM_BINARY_NAME" in line
    assert "install Terraform: synth needs >= 1.5, deploying a gitops layer >= 1.11 (its write-only attributes)" in line


@pytest.mark.parametrize(
    "version, said",
    [
        ("1.11.4", ""),
        ("1.12.0", ""),
        ("1.9.8", " — synth: ok (>= 1.5); deploying a gitops layer needs >= 1.11 (its write-only attributes)"),
        ("1.4.7", " — too old: synth needs >= 1.5, deploying a gitops layer >= 1.11 (its write-only attributes)"),
    ],
)
def test_version_says_which_terraform_does_what(tmp_path, version, said):
    """Issue 26, item 6 (low): --version said `Terraform >= 1.11` where the README's prerequisite says >= 1.5: both
    now say >= 1.5 for synth and >= 1.11 to deploy a gitops layer (its write-only attributes)."""
    answer = f'{{"terraform_version":"{version}","platform":"linux_amd64"}}'
    _fake_terraform(tmp_path / "bin", f"echo '{answer}'")
    result = run("--version", env=_env(tmp_path / "bin"))
    assert f"terraform {version} (terraform, linux_amd64){said}" in result.stdout.splitlines()
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "a `terraform` ≥ 1.5 on `PATH` for `make synth`" in readme and "≥ 1.11 to deploy a gitops layer" in readme


def test_version_with_a_terraform_that_fails_or_hangs_is_bounded(tmp_path, monkeypatch):
    _fake_terraform(tmp_path / "bin", "echo 'Error: broken' >&2\nexit 3")
    result = run("--version", env=_env(tmp_path / "bin"))
    assert result.returncode == 0
    assert "terraform unknown (exit 3: Error: broken)" in result.stdout.splitlines()
    from terravixens import version

    _fake_terraform(tmp_path / "slow", "sleep 30")
    monkeypatch.setenv("PATH", f"{tmp_path / 'slow'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.delenv("TERRAFORM_BINARY_NAME", raising=False)
    monkeypatch.setattr(version, "TERRAFORM_TIMEOUT", 1.0)
    assert version.versions(ROOT).terraform.startswith("unknown (terraform did not finish within 1s")


def test_version_outside_the_project_reads_cdktf_json_or_says_none(tmp_path):
    (tmp_path / "cdktf.json").write_text('{"terraformProviders": ["bpg/proxmox@=0.111.1", "hashicorp/helm"]}')
    from terravixens.version import versions

    found = versions(tmp_path)
    assert found.providers == (("bpg/proxmox", "0.111.1"), ("hashicorp/helm", "not pinned"))
    assert found.providers_from == "cdktf.json"
    assert found.cdktf_cli.startswith("not installed here")
    (tmp_path / "cdktf.json").unlink()
    assert versions(tmp_path).providers_from == "no providers.json or cdktf.json in this folder"


# ------------------------------------------------------------------------------------------------ completion
def _complete(script: str, line: str) -> list[str]:
    """What bash offers for `line` (the cursor at its end) with the completion script loaded: COMP_WORDS and
    COMP_CWORD as bash sets them, then the function `complete -p` names."""
    words = line.split(" ")
    program = "\n".join(
        [
            script,
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})",
            f"COMP_CWORD={len(words) - 1}",
            "function=$(complete -p terravixens | sed -E 's/.* -F ([^ ]+) .*/\\1/')",
            '"$function"',
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ]
    )
    done = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [word for word in done.stdout.splitlines() if word]


@pytest.fixture(scope="module")
def bash_script() -> str:
    return run("completion", "bash").stdout


def test_bash_script_is_valid_bash(bash_script, tmp_path):
    path = tmp_path / "terravixens.bash"
    path.write_text(bash_script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True, timeout=30).returncode == 0


def test_bash_completes_command_names_from_the_table(bash_script):
    top = {entry.name.split()[0] for entry in cli.COMMANDS}
    assert set(_complete(bash_script, "terravixens ")) == top | {"--help", "--version"}
    assert _complete(bash_script, "terravixens dr") == ["drift"]
    assert sorted(_complete(bash_script, "terravixens de")) == ["decommission", "deploy", "destroy"]
    assert _complete(bash_script, "terravixens spec ") == ["validate", "serve", "get", "push", "handoff", "--help"]


def test_bash_completes_a_commands_options(bash_script):
    offered = _complete(bash_script, "terravixens drift --")
    assert {"--site", "--json", "--terraform-only", "--timeout"} <= set(offered)
    assert _complete(bash_script, "terravixens validate --si") == ["--site"]
    # after an option that takes a value, files (here: the example site)
    assert "sites/example.yaml" in _complete_in(bash_script, "terravixens validate --site sites/ex", ROOT)


def _complete_in(script: str, line: str, folder: Path) -> list[str]:
    words = line.split(" ")
    program = "\n".join(
        [
            f"cd {shlex.quote(str(folder))}",
            script,
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})",
            f"COMP_CWORD={len(words) - 1}",
            "_terravixens_complete",
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ]
    )
    done = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30)
    return done.stdout.splitlines()


# A command as a module declares one (tests/test_cli_surface.py:FROBNICATE is its "module:NAME").
FROBNICATE = Definition(lambda parser: parser.add_argument("--wobble"), lambda args: 0, (), ("terravixens frobnicate",))


def test_a_new_command_completes_without_touching_the_completion_module(monkeypatch):
    extra = cli.Command("frobnicate", "a test command", f"{__name__}:FROBNICATE")
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, extra))
    from terravixens.completion import parsed, script

    text = script("bash", parsed(cli.parser()))
    assert "frobnicate" in _complete(text, "terravixens frob") and _complete(text, "terravixens frobnicate --w") == [
        "--wobble"
    ]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_every_command(shell):
    result = run("completion", shell)
    assert result.returncode == 0 and result.stderr == ""
    for entry in cli.COMMANDS:
        assert entry.name.split()[-1] in result.stdout, (shell, entry.name)
    if shell == "fish":
        assert "complete -c terravixens -n __fish_use_subcommand -a validate" in result.stdout
    binary = shutil.which(shell)
    if binary:  # the shell's own parser, where it is installed (bash's is always checked above)
        check = [binary, "-n"] if shell == "zsh" else [binary, "--no-execute"]
        assert subprocess.run([*check], input=result.stdout, text=True, timeout=30).returncode == 0


def test_unknown_shell_is_argparses_usage_error():
    result = run("completion", "tcsh")
    assert result.returncode == 2 and "invalid choice: 'tcsh'" in result.stderr


# ---------------------------------------------------------------------------------------- deadlines (issue 26, item 6)
@pytest.mark.parametrize(
    "argv, said",
    [
        (["snapshot", "prod", "--timeout", "25h"], "argument --timeout: '25h' is longer than 24h"),
        (
            ["restore-etcd", "prod", "--from", "x", "--timeout", "99999999999999999999h"],
            "argument --timeout: '99999999999999999999h' is longer than 24h",
        ),
        (["restore-etcd", "prod", "--from", "x", "--poll", "86401"], "argument --poll: '86401' is longer than 24h"),
        (["upgrade", "prod", "--timeout", "1441m"], "argument --timeout: '1441m' is longer than 24h"),
        (["decommission", "prod", "--timeout", "48h"], "argument --timeout: '48h' is longer than 24h"),
        (["remove-dead-member", "prod", "cp-a", "--probe-window", "25h"], "argument --probe-window: '25h' is longer"),
        (["deploy", "--talosctl-timeout", "30h"], "argument --talosctl-timeout: '30h' is longer than 24h"),
        (["spec", "push", "dns1", "--timeout", "1e30"], "argument --timeout: '1e30' is not a number of seconds"),
    ],
)
def test_a_deadline_has_an_upper_bound(argv, said, capsys, monkeypatch):
    """Issue 26, item 6 (low): `--timeout` took any length on b4ffe4b (`--timeout 99999999h`: a hung talosctl is
    never stopped, the bounded runner unbounded). A deadline is at most 24h: argparse's exit 2, one error line."""
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--site", SITE])
    assert exited.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert said in error and "Traceback" not in error, error


@pytest.mark.parametrize(
    "argv, code, said",
    [
        (["drift", "platform-prod", "--timeout", "25h"], 1, "terravixens drift: --timeout: '25h' is longer than 24h"),
        (["check", "prod", "--timeout", "25h"], 1, "terravixens check: --timeout: '25h' is longer than 24h"),
        (
            ["deploy", "platform-prod", "--check", "--check-timeout", "25h"],
            2,
            "terravixens deploy: --check-timeout: '25h' is longer than 24h",
        ),
    ],
)
def test_a_deadline_read_by_the_operation_has_the_same_bound(argv, code, said, capsys, monkeypatch, tmp_path):
    """The monitors exit 1 for every error (2 means drift or a problem found); deploy exits 2 (BAD_INPUT)."""
    monkeypatch.chdir(tmp_path)
    assert cli.main([*argv, "--site", str(ROOT / SITE)]) == code
    printed = capsys.readouterr()
    assert printed.err.startswith(said) and len(printed.err.splitlines()) == 1, printed.err
    assert not (tmp_path / "cdktf.out").exists()  # refused before any synth
