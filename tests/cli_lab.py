"""The harness of the command-line walks (tests/test_exit_codes.py, tests/test_json_output.py): a folder, `run`
through `cli.main` in this process with the fake Terraform given at the command line's one seam (`cli._terraform`),
scripted failures and interrupts, the faithful talosctl and kubectl fakes on PATH, a running cluster's fakes, and
the sites the cases run on."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from terravixens import cli
from terravixens.operations.terraform import Result
from tests import etcd_tool, support
from tests.cluster_fakes import Cluster
from tests.fake_terraform import FakeTerraform, platform_state
from tests.tools_on_path import Tools
from tests.upgrade_fakes import site_data

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "tests" / "fixtures" / "plans"
TOKEN_LIKE = "abcdef.0123456789abcdef"  # a valid label value shaped like a bootstrap token: TV006 stops synth
GITOPS = {"helm_release.cluster_flux": {"values": {"name": "flux"}, "depends_on": []}}


@dataclass
class Ran:
    code: int
    out: str
    err: str


class Scripted(FakeTerraform):
    """The fake Terraform, told to fail (exit 1, as Terraform does) or to be interrupted at the n-th call of a
    command ("apply", "state pull", "plan", "state push"...)."""

    def __init__(
        self,
        states: dict[str, dict[str, dict]],
        fail: dict[str, int] | None = None,
        interrupt: dict[str, int] | None = None,
    ):
        super().__init__(states)
        self.fail, self.interrupt, self.seen = fail or {}, interrupt or {}, {}
        self.pushed: dict[str, dict] = {}

    def _trip(self, args: tuple[str, ...]) -> Result | None:
        for command in set(self.fail) | set(self.interrupt):
            if " ".join(args).startswith(command):
                self.seen[command] = self.seen.get(command, 0) + 1
                if self.interrupt.get(command) == self.seen[command]:
                    raise KeyboardInterrupt
                if self.fail.get(command) == self.seen[command]:
                    return Result(1, "", f"Error: {command} failed (scripted by the test)")
        return None

    def run(self, workdir: Path, *args: str) -> Result:
        tripped = self._trip(args)
        if tripped is not None:
            self.calls.append((Path(workdir).name, *args))
            return tripped
        if args[:2] == ("state", "push"):
            self.calls.append((Path(workdir).name, *args))
            self.pushed[Path(workdir).name] = json.loads(Path(args[-1]).read_text())
            return Result(0, "", "")
        return super().run(workdir, *args)

    def run_json(self, workdir: Path, *args: str, on_message=None) -> Result:
        tripped = self._trip(args)
        if tripped is not None:
            self.calls.append((Path(workdir).name, *args))
            return tripped
        return super().run_json(workdir, *args, on_message=on_message)


def platform(**script) -> Scripted:
    return Scripted(
        {"platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a"), "gitops-prod": {}},
        **script,
    )


def gitops(**script) -> Scripted:
    return Scripted({"gitops-prod": json.loads(json.dumps(GITOPS))}, **script)


def public_fleet(data: dict) -> None:
    """The example cluster's Flux repository as a public https one (`git_auth: none`): exit codes do not depend on
    Flux's git credentials, which would otherwise have to come from a secrets file (tests/test_flux_credentials.py
    walks that path)."""
    flux = data["clusters"]["prod"]["flux"]
    flux.pop("git_secret", None)
    flux.pop("git_credentials_revision", None)
    flux.update(url="https://git.lab.internal/platform/fleet.git", git_auth="none")


@dataclass
class Lab:
    folder: Path
    run: Callable[..., Ran]
    monkeypatch: pytest.MonkeyPatch

    def site(self, change: Callable[[dict], None] | None = None, name: str = "site.yaml") -> str:
        data = support.example_data()
        public_fleet(data)
        if change is not None:
            change(data)
        path = self.folder / name
        path.write_text(json.dumps(data))  # JSON is YAML
        return str(path)

    def token_site(self) -> str:
        def label(data: dict) -> None:
            data["clusters"]["prod"]["workers"]["wk-a"]["labels"] = {"node.kubernetes.io/pool": TOKEN_LIKE}

        return self.site(label, "token.yaml")

    def tools(self, **scenario) -> Tools:
        """The faithful fake talosctl (cp-a, 10.11.1.11, unreachable; `scenario` as tests/fake_talosctl.py reads it)
        and a kubectl that records its calls, first on PATH."""
        tools = Tools(self.folder, **scenario)
        self.monkeypatch.setenv("PATH", f"{tools.talosctl_path.parent}{os.pathsep}{os.environ['PATH']}")
        return tools

    def snapshot(self, data: bytes | None = None) -> str:
        """A genuine etcd snapshot (tests/etcd_tool.py) in the working folder, as an operator keeps one."""
        path = self.folder / "db.snapshot"
        path.write_bytes(etcd_tool.genuine_snapshot().read_bytes() if data is None else data)
        return "db.snapshot"

    def backup(self, layer: str = "gitops-prod", lineage: str | None = None) -> str:
        path = self.folder / "saved.tfstate"
        path.write_text(
            json.dumps({"version": 4, "lineage": lineage or f"lineage-{layer}", "serial": 1, "resources": []})
        )
        return str(path)


@pytest.fixture
def lab(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    umask = os.umask(0o022)  # the operations set 077 for the process: given back afterwards
    os.umask(umask)
    nothing = FakeTerraform({})

    def run(*argv: str, tf: FakeTerraform | None = None) -> Ran:
        monkeypatch.setattr(cli, "_terraform", lambda layer_env: tf if tf is not None else nothing)
        code = cli.main(list(argv))
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return Ran(code, captured.out, captured.err)

    yield Lab(tmp_path, run, monkeypatch)
    os.umask(umask)
    assert nothing.calls == []  # a case that gave no Terraform never reached one


def without(*workers: str, control_planes: tuple[str, ...] = ()) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        for name in workers:
            del data["clusters"]["prod"]["workers"][name]
        for name in control_planes:
            del data["clusters"]["prod"]["control_planes"][name]

    return change


def cluster_fakes(lab: Lab, change: Callable[[Cluster], None] | None = None) -> tuple[Cluster, str]:
    """The faithful fakes of a running cluster as the site says (tests/cluster_fakes.py), and the site file."""
    data = support.example_data()
    public_fleet(data)
    path = lab.folder / "check-site.yaml"
    path.write_text(json.dumps(data))
    folder = lab.folder / "cluster"
    folder.mkdir(exist_ok=True)
    fakes = Cluster(folder, support.site_from(data))
    if change is not None:
        change(fakes)
    return fakes, str(path)


def without_node(name: str) -> Callable[[Cluster], None]:
    return lambda c: c.kube(
        lambda s: s["objects"].update(nodes=[o for o in s["objects"]["nodes"] if o["metadata"]["name"] != name])
    )


def given(fakes: Cluster) -> tuple[str, ...]:
    return (
        "--talosconfig",
        str(fakes.talosconfig),
        "--kubeconfig",
        str(fakes.kubeconfig),
        "--talosctl",
        str(fakes.talosctl_path),
        "--kubectl",
        str(fakes.kubectl_path),
    )


SNAPSHOT = ("snapshot", "prod")


def kept_snapshots(lab: Lab) -> list[Path]:
    return sorted((lab.folder / "etcd-snapshots" / "homelab" / "prod").glob("*.snapshot"))


def upgrade_site(lab: Lab, talosconfig: bool = True, data: dict | None = None) -> str:
    """The tests' loopback site, and a ./talosconfig (the fake talosctl ignores it) unless `talosconfig` is False."""
    path = lab.folder / "upgrade.yaml"
    path.write_text(json.dumps(data or site_data()))
    if talosconfig:
        (lab.folder / "talosconfig").touch()
    return str(path)
