"""A platform layer whose credentials can be renewed, for `terravixens renew-credentials`: tests/fake_terraform.py's
stand-in with the talos provider's renewal modelled from its source (siderolabs/terraform-provider-talos, the
`talos_machine_secrets` and `talos_cluster_kubeconfig` resources):

- `talos_cluster_kubeconfig` replaced (`-replace=`): its create asks a control plane for a new admin kubeconfig
  (machined signs a new client certificate, one year); delete does nothing;
- `talos_machine_secrets`: its ModifyPlan marks `client_configuration` unknown when the client certificate expires
  within a month (`NotAfter.Before(now.AddDate(0, 1, 0))`), and its Update then issues a new one (one year) from the
  secrets' OS CA — the machine secrets themselves unchanged;
- every `talos_machine_configuration_apply` holds that client configuration: unknown in the plan when the secrets'
  is, so each is updated in place (its configuration unchanged).

The state's client certificates are real X.509 certificates (tests/cluster_fakes.py), so the outputs read back
(`talosconfig`, `kubeconfig`) carry dates the code under test reads with the standard library. Plans are printed as
`terraform show -json` prints them (actions, before, after, after_unknown). A real Terraform and talos provider add
the calls to the node (the kubeconfig's create, each apply's ApplyConfiguration) that the fake only records.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from terravixens.operations.terraform import Result
from tests.cluster_fakes import certificate_pem, kubeconfig_text
from tests.fake_terraform import APPLY, FakeTerraform, platform_state

SECRETS = "talos_machine_secrets.cluster_secrets"
KUBECONFIG = "talos_cluster_kubeconfig.cluster_kubeconfig"
LAYER = "platform-prod"
ENDPOINTS = ["10.11.1.11", "10.11.1.12", "10.11.1.13"]


def client_configuration(days: float) -> dict[str, str]:
    return {
        "ca_certificate": base64.b64encode(certificate_pem(3650, organization="talos").encode()).decode(),
        "client_certificate": base64.b64encode(certificate_pem(days).encode()).decode(),
        "client_key": base64.b64encode(b"-----BEGIN ED25519 PRIVATE KEY-----\nnot a key\n").decode(),
    }


def expires_within_a_month(configuration: dict[str, str]) -> bool:
    """The provider's test: NotAfter before now + one month (Go's AddDate(0, 1, 0))."""
    from terravixens.operations.observe import not_after

    pem = base64.b64decode(configuration["client_certificate"]).decode()
    now = datetime.now(UTC)
    year, month = now.year + now.month // 12, now.month % 12 + 1
    # Go normalizes an overflowing day (Jan 31 + 1 month is Mar 3): the first of the month plus the days
    later = now.replace(year=year, month=month, day=1) + timedelta(days=now.day - 1)
    return not_after(pem) < later


class RenewableTerraform(FakeTerraform):
    """The platform layer of the example cluster, applied, with its credentials: the talosconfig's client certificate
    valid `talos_days` more, the kubeconfig's `kube_days`."""

    def __init__(self, talos_days: float = 200, kube_days: float = 20):
        state = platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")
        client = client_configuration(talos_days)
        state[SECRETS]["values"].update(
            machine_secrets={"cluster": {"id": "cluster-id", "secret": "cluster-secret"}}, client_configuration=client
        )
        for address, resource in state.items():
            if address.startswith(APPLY + "."):
                resource["values"].update(
                    client_configuration=dict(client), machine_configuration=f"configuration of {address}"
                )
        state[KUBECONFIG]["values"].update(kubeconfig_raw=kubeconfig_text("prod", "https://10.11.1.10:6443", kube_days))
        super().__init__({LAYER: state, "gitops-prod": {}})
        self.renewals: list[str] = []
        self._issued: dict[str, str] | None = None  # the client configuration the secrets' Update issues

    # ------------------------------------------------------------------------------------------------ outputs
    def talosconfig(self) -> str:
        client = self.states[LAYER][SECRETS]["values"]["client_configuration"]
        return yaml.safe_dump(
            {
                "context": "prod",
                "contexts": {
                    "prod": {
                        "endpoints": ENDPOINTS,
                        "nodes": ENDPOINTS,
                        "ca": client["ca_certificate"],
                        "crt": client["client_certificate"],
                        "key": client["client_key"],
                    }
                },
            }
        )

    def run(self, workdir: Path, *args: str) -> Result:
        layer = Path(workdir).name
        if layer == LAYER and args[:2] == ("output", "-raw") and self.states.get(LAYER):
            self.calls.append((layer, *args))
            if args[2] == "talosconfig":
                return Result(0, self.talosconfig(), "")
            if args[2] == "kubeconfig":
                return Result(0, self.states[LAYER][KUBECONFIG]["values"]["kubeconfig_raw"], "")
        return super().run(workdir, *args)

    # ------------------------------------------------------------------------------------------------ plan
    def plan(self, workdir: Path, layer: str, args: tuple[str, ...]) -> Result:
        result = super().plan(workdir, layer, args)
        if layer != LAYER or result.returncode not in (0, 2):
            return result
        state = self.states[layer]
        renewal = []
        if f"-replace={KUBECONFIG}" in args:
            renewal.append(
                {
                    "address": KUBECONFIG,
                    "action": "update",
                    "actions": ["delete", "create"],
                    "after": {"kubeconfig_raw": None},
                    "after_unknown": {"kubeconfig_raw": True},
                }
            )
        if expires_within_a_month(state[SECRETS]["values"]["client_configuration"]):
            unknown = {
                "client_configuration": dict.fromkeys(("ca_certificate", "client_certificate", "client_key"), True)
            }
            for address in sorted(a for a in state if a == SECRETS or a.startswith(APPLY + ".")):
                if any(c["address"] == address for c in self.pending[layer]):
                    continue
                renewal.append(
                    {
                        "address": address,
                        "action": "update",
                        "after": {"client_configuration": None},
                        "after_unknown": unknown,
                    }
                )
        self.pending[layer] = sorted(self.pending[layer] + renewal, key=lambda change: change["address"])
        return Result(2 if self.pending[layer] else 0, "", "", [])

    def plan_json(self, layer: str) -> dict:
        document = super().plan_json(layer)
        by_address = {change["address"]: change for change in self.pending.get(layer, [])}
        for change in document["resource_changes"]:
            ours = by_address[change["address"]]
            if "actions" in ours:
                change["change"]["actions"] = ours["actions"]
            if "after_unknown" in ours:
                change["change"]["after_unknown"] = ours["after_unknown"]
                for key in ours["after_unknown"]:
                    change["change"]["after"].pop(key, None)
        return document

    def run_json(self, workdir: Path, *args: str, on_message=None) -> Result:
        if args[0] == "apply":
            self._issued = None
        return super().run_json(workdir, *args, on_message=on_message)

    def applied_change(self, layer: str, change: dict) -> None:
        """What the provider does on apply: a new kubeconfig; the secrets' new client configuration, which every
        apply holding it takes (Terraform applies the secrets first: they are every apply's dependency)."""
        values = self.states[layer][change["address"]]["values"] if change["address"] in self.states[layer] else None
        if values is None:
            return
        if change["address"] == KUBECONFIG:
            values["kubeconfig_raw"] = kubeconfig_text("prod", "https://10.11.1.10:6443", 365)
            self.renewals.append("kubeconfig")
        elif "client_configuration" in (change.get("after_unknown") or {}):
            if self._issued is None:
                self._issued = client_configuration(365)
            values["client_configuration"] = dict(self._issued)
            self.renewals.append("talosconfig" if change["address"] == SECRETS else change["address"])
