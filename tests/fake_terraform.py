"""A stand-in for the Terraform CLI holding a platform layer's state with its Talos resources, for the operations
whose real run needs the talos provider (no binary here, ADR 0003): decommission and dead control plane removal.

It reads the synthesized cdk.tf.json of the layer (so the decommission settings really come from synth), plans
`-destroy -target=…` with Terraform's rule that dependents go with their dependency, refuses to destroy a resource
whose lifecycle says prevent_destroy ("Instance cannot be destroyed", as Terraform does), prints plans in the shape
`terraform show -json` prints, and records every command it was given.
"""

from __future__ import annotations

import json
from pathlib import Path

from terravixens.operations.terraform import Result, Terraform

APPLY = "talos_machine_configuration_apply"
ADDRESSES = {
    "cp-a": "10.11.1.11",
    "cp-b": "10.11.1.12",
    "cp-c": "10.11.1.13",
    "wk-a": "10.11.1.21",
    "wk-b": "10.11.1.22",
}

# The platform layer's `talosconfig` output as talosctl reads it (placeholders where the client certificate goes).
TALOSCONFIG = """context: prod
contexts:
    prod:
        endpoints:
            - 10.11.1.11
            - 10.11.1.12
            - 10.11.1.13
        ca: fake-ca
        crt: fake-client-certificate
        key: fake-client-key
"""


def platform_state(control_planes: list[str], workers: list[str], bootstrap: str) -> dict[str, dict]:
    """address -> {"values": …, "depends_on": […]} of a converged platform layer (normal on_destroy)."""
    state: dict[str, dict] = {
        "talos_machine_secrets.cluster_secrets": {"values": {"id": "machine_secrets"}, "depends_on": []}
    }
    for node in sorted(control_planes + workers):
        state[f"proxmox_virtual_environment_vm.node_{node}_vm"] = {"values": {"name": node}, "depends_on": []}
        state[f"{APPLY}.node_{node}_apply"] = {
            "values": {
                "node": ADDRESSES[node],
                "apply_mode": "staged_if_needing_reboot",
                "resolved_apply_mode": "auto",
                "on_destroy": {"reset": True, "graceful": True, "reboot": False},
            },
            "depends_on": [f"proxmox_virtual_environment_vm.node_{node}_vm", "talos_machine_secrets.cluster_secrets"],
        }
    state["talos_machine_bootstrap.cluster_bootstrap"] = {
        "values": {},
        "depends_on": [f"{APPLY}.node_{bootstrap}_apply"],
    }
    state["talos_cluster_kubeconfig.cluster_kubeconfig"] = {
        "values": {},
        "depends_on": ["talos_machine_bootstrap.cluster_bootstrap"],
    }
    state["terraform_data.cluster_membership"] = {
        "values": {
            "input": {
                "control_planes": {n: ADDRESSES[n] for n in control_planes},
                "workers": {n: ADDRESSES[n] for n in workers},
            }
        },
        "depends_on": [],
    }
    return state


class FakeTerraform(Terraform):
    def __init__(self, states: dict[str, dict[str, dict]]):
        super().__init__(binary="fake-terraform")
        self.states = states  # layer -> address -> resource
        self.serial = dict.fromkeys(states, 1)
        self.pending: dict[str, list[dict]] = {}
        self.calls: list[tuple[str, ...]] = []
        self.applied: list[list[str]] = []  # per apply: "action address"
        self.reset_with: dict[str, dict] = {}  # apply address -> the on_destroy in state when it was destroyed

    # ------------------------------------------------------------------------------------------------ plumbing
    def run(self, workdir: Path, *args: str) -> Result:
        layer = Path(workdir).name
        self.calls.append((layer, *args))
        command = args[0]
        state = self.states.setdefault(layer, {})
        if command == "init":
            return Result(0, "Terraform has been successfully initialized!", "")
        if args[:2] == ("state", "list"):
            return Result(0, "".join(f"{a}\n" for a in sorted(state)), "")
        if args[:2] == ("state", "pull"):
            return Result(0, json.dumps(self.raw_state(layer)) if state else "", "")
        if args[:2] == ("state", "rm"):
            for address in args[2:]:
                state.pop(address, None)
            self.serial[layer] = self.serial.get(layer, 1) + 1
            return Result(0, f"Removed {args[2]}", "")
        if args[:3] == ("output", "-raw", "kubeconfig"):
            if "talos_cluster_kubeconfig.cluster_kubeconfig" in state:
                return Result(0, "apiVersion: v1\nkind: Config\n", "")
            return Result(1, "", 'Error: Output "kubeconfig" not found')
        if args[:3] == ("output", "-raw", "talosconfig"):  # talos_client_configuration: there with the secrets
            if "talos_machine_secrets.cluster_secrets" in state:
                return Result(0, TALOSCONFIG, "")
            return Result(1, "", 'Error: Output "talosconfig" not found')
        if command == "show":
            target = args[-1]
            if target.endswith(".tfplan"):
                return Result(0, json.dumps(self.plan_json(layer)), "")
            return Result(0, json.dumps({"format_version": "1.0", "values": {"root_module": {}}}), "")
        raise AssertionError(f"fake terraform: unexpected command {args}")

    def run_json(self, workdir: Path, *args: str, on_message=None) -> Result:
        layer = Path(workdir).name
        self.calls.append((layer, *args))
        if args[0] == "plan":
            return self.plan(Path(workdir), layer, args)
        if args[0] == "apply":
            done = []
            for change in self.pending.pop(layer):
                if change["action"] == "delete":
                    gone = self.states[layer].pop(change["address"])
                    if change["address"].startswith(APPLY + "."):  # the provider resets with what the state says
                        self.reset_with[change["address"]] = gone["values"]["on_destroy"]
                else:
                    self.states[layer][change["address"]]["values"].update(change["after"])
                done.append(f"{change['action']} {change['address']}")
            self.applied.append(done)
            self.serial[layer] += 1
            return Result(0, "", "")
        raise AssertionError(f"fake terraform: unexpected command {args}")

    # ------------------------------------------------------------------------------------------------ model
    def raw_state(self, layer: str) -> dict:
        resources = []
        for address, resource in sorted(self.states[layer].items()):
            kind, name = address.split(".", 1)
            resources.append(
                {
                    "mode": "managed",
                    "type": kind,
                    "name": name,
                    "provider": "fake",
                    "instances": [{"attributes": resource["values"]}],
                }
            )
        return {
            "version": 4,
            "lineage": f"lineage-{layer}",
            "serial": self.serial.get(layer, 1),
            "resources": resources,
        }

    def plan(self, workdir: Path, layer: str, args: tuple[str, ...]) -> Result:
        document = json.loads((workdir / "cdk.tf.json").read_text())
        state = self.states[layer]
        targets = [a.split("=", 1)[1] for a in args if a.startswith("-target=")]
        changes = []
        if "-destroy" in args:
            doomed = set(targets or state)
            while True:  # dependents go with what they depend on
                more = {a for a, r in state.items() if a not in doomed and set(r["depends_on"]) & doomed}
                if not more:
                    break
                doomed |= more
            for address in sorted(doomed & set(state)):
                kind, name = address.split(".", 1)
                lifecycle = document.get("resource", {}).get(kind, {}).get(name, {}).get("lifecycle", {})
                if lifecycle.get("prevent_destroy"):
                    return Result(
                        1, "", f"Error: Instance cannot be destroyed: {address} has lifecycle.prevent_destroy"
                    )
                changes.append({"address": address, "action": "delete", "after": None})
        else:
            wanted = {f"{APPLY}.{name}" for name in document.get("resource", {}).get(APPLY, {})}
            for address in sorted(a for a in state if a.startswith(APPLY + ".") and a not in wanted):
                changes.append({"address": address, "action": "delete", "after": None})  # the node left the site
            for name, body in document.get("resource", {}).get(APPLY, {}).items():
                address = f"{APPLY}.{name}"
                if address in state and body["on_destroy"] != state[address]["values"]["on_destroy"]:
                    changes.append(
                        {"address": address, "action": "update", "after": {"on_destroy": body["on_destroy"]}}
                    )
        self.pending[layer] = changes
        (workdir / "terravixens.tfplan").write_text("fake plan")
        return Result(2 if changes else 0, "", "", [])

    def plan_json(self, layer: str) -> dict:
        state = self.states[layer]
        prior = [
            {
                "address": a,
                "mode": "managed",
                "type": a.split(".", 1)[0],
                "name": a.split(".", 1)[1],
                "values": r["values"],
            }
            for a, r in sorted(state.items())
        ]
        changes = []
        for change in self.pending.get(layer, []):
            kind, name = change["address"].split(".", 1)
            before = state[change["address"]]["values"]
            after = None if change["after"] is None else {**before, **change["after"]}
            changes.append(
                {
                    "address": change["address"],
                    "type": kind,
                    "name": name,
                    "mode": "managed",
                    "change": {"actions": [change["action"]], "before": before, "after": after, "after_unknown": {}},
                }
            )
        return {
            "format_version": "1.2",
            "terraform_version": "1.11.4",
            "planned_values": {},
            "resource_changes": changes,
            "prior_state": {"format_version": "1.0", "values": {"root_module": {"resources": prior}}},
        }
