"""`terravixens renew-credentials CLUSTER` (ADR 0056): the plan changes only the credentials (attribute by attribute,
terravixens.guard.credentials), the new talosconfig and kubeconfig are written 0600, and `check` reads the cluster with
them. Terraform is tests/renewal_fakes.RenewableTerraform (the talos provider's renewal modelled from its source: the
kubeconfig replaced, the secrets' client certificate re-issued only in its last month, every apply then taking it);
talosctl and kubectl for the check are tests/cluster_fakes.py's. The example site is synthesized once for the module.
"""

from __future__ import annotations

import io
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.operations.console import Console
from terravixens.operations.observe import client_certificates
from terravixens.operations.outcome import OperationError
from terravixens.operations.renew_credentials import RenewOptions, renew_credentials
from terravixens.operations.workspace import Workspace
from tests import support
from tests.cluster_fakes import Cluster
from tests.fake_terraform import APPLY
from tests.renewal_fakes import KUBECONFIG, LAYER, SECRETS, RenewableTerraform


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    site = support.site_from(support.example_data())
    folder = tmp_path_factory.mktemp("renew-synth")
    Workspace(site, root=folder).synth()
    return site, folder / "cdktf.out"


def run(tmp_path: Path, synthesized, tf: RenewableTerraform, **changes) -> tuple[int | OperationError, str, Cluster]:
    site, out = synthesized
    (tmp_path / "fakes").mkdir(exist_ok=True)
    cluster = Cluster(tmp_path / "fakes", site)
    shutil.copytree(out, tmp_path / "cdktf.out", dirs_exist_ok=True)
    ws = Workspace(site, root=tmp_path)
    ws.synth = lambda: ws.layers()  # type: ignore[method-assign]  # synthesized once for the module
    console = Console(out=io.StringIO())
    options = RenewOptions(**{"yes": True, "talosctl": str(cluster.talosctl_path), "timeout": 30, **changes})
    try:
        code: int | OperationError = renew_credentials(ws, tf, "prod", options, console, cluster.kubectl())
    except OperationError as error:
        code = error
    return code, console.out.getvalue(), cluster


def days_left(text: str, which: str) -> int:
    found = client_certificates({which: text})
    assert isinstance(found, list)
    return (found[0].not_after - datetime.now(UTC)).days


def written(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "credentials" / "homelab" / "prod"
    return {name: folder / name for name in ("talosconfig", "kubeconfig")}


def plan_addresses(tf: RenewableTerraform) -> list[tuple[str, tuple[str, ...]]]:
    return [(c["address"], tuple(c["change"]["actions"])) for c in tf.last_plan["resource_changes"]]


class Recording(RenewableTerraform):
    def plan_json(self, layer: str) -> dict:
        self.last_plan = super().plan_json(layer)
        return self.last_plan


# ------------------------------------------------------------------------------------------------ renewals
def test_outside_its_last_month_only_the_kubeconfig_changes(tmp_path, synthesized):
    tf = Recording(talos_days=200, kube_days=20)
    applies_before = {a: dict(r["values"]) for a, r in tf.states[LAYER].items() if a.startswith(APPLY + ".")}
    code, out, _ = run(tmp_path, synthesized, tf)
    assert code == ExitCode.OK, out
    assert plan_addresses(tf) == [(KUBECONFIG, ("delete", "create"))]
    assert tf.renewals == ["kubeconfig"]
    assert {a: r["values"] for a, r in tf.states[LAYER].items() if a.startswith(APPLY + ".")} == applies_before
    files = written(tmp_path)
    assert days_left(files["kubeconfig"].read_text(), "kubeconfig") >= 364
    assert 198 <= days_left(files["talosconfig"].read_text(), "talosconfig") <= 200
    for path in (*files.values(), files["kubeconfig"].parent):
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600)
    assert "talosconfig: kept (the talos provider issues a new one only in the certificate's last month)" in out
    assert "check prod: every check passed" in out
    assert [call[1] for call in tf.calls if call[0] == LAYER and call[1] in ("plan", "apply")] == ["plan", "apply"]
    assert any(f"-replace={KUBECONFIG}" in call for call in tf.calls)
    backups = list((tmp_path / "state-backups" / "homelab" / LAYER).glob("*-renew-credentials.tfstate"))
    assert len(backups) == 1


def test_in_its_last_month_the_talosconfig_and_every_apply_s_copy_renew_and_nothing_else(tmp_path, synthesized):
    tf = Recording(talos_days=20, kube_days=20)
    configurations = {a: r["values"]["machine_configuration"] for a, r in tf.states[LAYER].items() if "apply" in a}
    code, out, _ = run(tmp_path, synthesized, tf)
    assert code == ExitCode.OK, out
    changes = plan_addresses(tf)
    assert (KUBECONFIG, ("delete", "create")) in changes and (SECRETS, ("update",)) in changes
    applies = [address for address, actions in changes if address.startswith(APPLY + ".")]
    assert len(applies) == 5 and all(actions == ("update",) for a, actions in changes if a in applies)
    for change in tf.last_plan["resource_changes"]:
        unknown = set(change["change"]["after_unknown"])
        assert unknown <= {"client_configuration", "kubeconfig_raw"}
    secrets = tf.states[LAYER][SECRETS]["values"]
    assert secrets["machine_secrets"] == {"cluster": {"id": "cluster-id", "secret": "cluster-secret"}}
    for address, values in ((a, r["values"]) for a, r in tf.states[LAYER].items() if "apply" in a):
        assert values["client_configuration"] == secrets["client_configuration"]  # each apply's copy is the new one
        assert values["machine_configuration"] == configurations[address]
    files = written(tmp_path)
    assert days_left(files["talosconfig"].read_text(), "talosconfig") >= 364
    assert "5 node applies take the new client configuration" in out and "check prod: every check passed" in out


def test_a_plan_with_another_change_is_refused_and_nothing_is_applied(tmp_path, synthesized):
    """The state still holds a worker the site dropped: deploying that is not a renewal."""
    tf = Recording(talos_days=200, kube_days=20)
    tf.states[LAYER]["proxmox_virtual_environment_vm.node_wk-c_vm"] = {"values": {"name": "wk-c"}, "depends_on": []}
    code, out, _ = run(tmp_path, synthesized, tf)
    assert isinstance(code, OperationError) and code.code == ExitCode.REFUSED
    assert "  not a credential: proxmox_virtual_environment_vm.node_wk-c_vm: delete" in out
    assert "deploy them first (`bin/terravixens deploy platform-prod`" in str(code)
    assert tf.renewals == [] and not any(call[1] == "apply" for call in tf.calls)
    assert not (tmp_path / "credentials").exists()


def test_the_dry_run_applies_nothing(tmp_path, synthesized):
    tf = Recording(talos_days=20, kube_days=20)
    code, out, _ = run(tmp_path, synthesized, tf, dry_run=True)
    assert code == ExitCode.OK and "dry run — nothing applied" in out
    assert tf.renewals == [] and not (tmp_path / "credentials").exists()


def test_a_credentials_folder_that_is_a_link_is_refused(tmp_path, synthesized):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "credentials").symlink_to(tmp_path / "elsewhere")
    code, _, _ = run(tmp_path, synthesized, Recording())
    assert isinstance(code, OperationError) and code.code == ExitCode.FAILED
    assert "is a symbolic link: refusing to write credentials through it" in str(code)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_files_are_replaced_whole_on_a_second_renewal(tmp_path, synthesized):
    tf = Recording(talos_days=200, kube_days=20)
    assert run(tmp_path, synthesized, tf)[0] == ExitCode.OK
    first = written(tmp_path)["kubeconfig"].read_text()
    assert run(tmp_path, synthesized, tf)[0] == ExitCode.OK
    assert written(tmp_path)["kubeconfig"].read_text() != first
    assert sorted(p.name for p in written(tmp_path)["kubeconfig"].parent.iterdir()) == ["kubeconfig", "talosconfig"]


def test_expiry_window_is_the_provider_s_month():
    from tests.renewal_fakes import client_configuration, expires_within_a_month

    assert expires_within_a_month(client_configuration(27))
    assert not expires_within_a_month(client_configuration(32))
