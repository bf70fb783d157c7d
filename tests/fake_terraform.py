"""A stand-in for the Terraform CLI holding a platform layer's state with its Talos resources, for the operations
whose real run needs the talos provider (no binary here, ADR 0003): decommission, dead control plane removal, and the
deploys that add or remove nodes (a scale-in, terravixens.operations.scale_in).

It reads the synthesized cdk.tf.json of the layer (so the decommission settings and the site's nodes really come
from synth) and plans:

- `-destroy -target=…` with Terraform's rule that dependents go with their dependency, refusing to destroy a
  resource whose lifecycle says prevent_destroy ("Instance cannot be destroyed", as Terraform does);
- a normal plan, as Terraform plans the site's nodes: the VM and apply of a node that left the configuration are
  deleted, those of a new node created (the apply after its VM), the membership record updated when the site's
  member list changed, an apply's `on_destroy` updated in place. With `-target=…` only the targeted resources and
  what they depend on (Terraform's targeting: a targeted apply brings its VM) are planned.

Plans are printed in the shape `terraform show -json` prints (planned_values: every object kept or created); every
command it was given is recorded. A real
Terraform would add the data sources (machine configurations, talosconfig, the health gate read during apply) and
the provider's own reset of each deleted apply, which the tests model where they need it (tests/test_scale_in.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from terravixens.logical_ids import owner_of
from terravixens.operations.terraform import Result, Terraform

# What `terraform output -raw NAME` prints on stdout, exit 0, for a state without any output (Terraform 1.11.4,
# captured from a layer never applied; its colours included: Terraform colours it without a terminal too).
NO_OUTPUTS_WARNING = (
    "\x1b[33m╷\x1b[0m\x1b[0m\n"
    "\x1b[33m│\x1b[0m \x1b[0m\x1b[1m\x1b[33mWarning: \x1b[0m\x1b[0m\x1b[1mNo outputs found\x1b[0m\n"
    "\x1b[33m│\x1b[0m \x1b[0m\n"
    "\x1b[33m│\x1b[0m \x1b[0m\x1b[0mThe state file either has no outputs defined, or all the defined outputs\n"
    "\x1b[33m│\x1b[0m \x1b[0mare empty. Please define an output in your configuration with the `output`\n"
    "\x1b[33m│\x1b[0m \x1b[0mkeyword and run `terraform refresh` for it to become available. If you are\n"
    "\x1b[33m│\x1b[0m \x1b[0musing interpolation, please verify the interpolated value is not empty. You\n"
    "\x1b[33m│\x1b[0m \x1b[0mcan use the `terraform console` command to assist.\n"
    "\x1b[33m╵\x1b[0m\x1b[0m\n"
)
# `terraform state list` where the local backend has no state file yet (Terraform 1.11.4, captured): exit 1, stderr.
NO_STATE_FILE_ERROR = (
    "\x1b[31mNo state file was found!\n\nState management commands require a state file. Run this command\n"
    "in a directory where Terraform has been run or use the -state flag\nto point the command to a specific state "
    "location.\x1b[0m\x1b[0m\n"
)
# What an operator exports for bpg/proxmox (README): the operations check it is there before Terraform plans.
OPERATOR_CREDENTIALS = {"PROXMOX_VE_API_TOKEN": "terravixens@pve!terravixens=not-a-secret"}
APPLY = "talos_machine_configuration_apply"
VM = "proxmox_virtual_environment_vm"
MEMBERSHIP = "terraform_data.cluster_membership"
SECRETS = "talos_machine_secrets.cluster_secrets"
ADDRESSES = {
    "cp-a": "10.11.1.11",
    "cp-b": "10.11.1.12",
    "cp-c": "10.11.1.13",
    "cp-d": "10.11.1.14",
    "cp-e": "10.11.1.15",
    "wk-a": "10.11.1.21",
    "wk-b": "10.11.1.22",
    "wk-c": "10.11.1.23",
    "wk-d": "10.11.1.24",
}
# What `terraform output -raw talosconfig` prints for an applied platform layer (a stand-in: talosctl is a fake too).
TALOSCONFIG = "context: prod\ncontexts:\n    prod:\n        endpoints: []\n"

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
    def __init__(self, states: dict[str, dict[str, dict]], outputs: dict[str, dict[str, str | None]] | None = None):
        super().__init__(binary="fake-terraform", env=OPERATOR_CREDENTIALS)
        self.states = states  # layer -> address -> resource
        # layer -> output name -> value (`terraform output -raw NAME`): a platform layer's talosconfig and kubeconfig
        # for the check and drift tests (None: not there); otherwise talosconfig and kubeconfig are there once their
        # resources are
        self.outputs = outputs or {}
        self.serial = dict.fromkeys(states, 1)
        self.pending: dict[str, list[dict]] = {}
        self.calls: list[tuple[str, ...]] = []
        self.applied: list[list[str]] = []  # per apply: "action address"
        self.reset_with: dict[str, dict] = {}  # apply address -> the on_destroy in state when it was destroyed
        # `terraform output -raw kubeconfig` while talos_cluster_kubeconfig is in state: a test against a real API
        # server (tests/control_plane.py) puts that server's admin kubeconfig here
        self.kubeconfig = "apiVersion: v1\nkind: Config\n"

    # ------------------------------------------------------------------------------------------------ plumbing
    def run(self, workdir: Path, *args: str) -> Result:
        layer = Path(workdir).name
        self.calls.append((layer, *args))
        command = args[0]
        if command == "init":  # writes no state
            return Result(0, "Terraform has been successfully initialized!", "")
        if args[:2] == ("state", "list") and layer not in self.states:  # never applied: no local state file
            return Result(1, "", NO_STATE_FILE_ERROR)
        state = self.states.setdefault(layer, {})
        if args[:2] == ("state", "list"):
            return Result(0, "".join(f"{a}\n" for a in sorted(state)), "")
        if args[:2] == ("state", "pull"):
            return Result(0, json.dumps(self.raw_state(layer)) if state else "", "")
        if args[:2] == ("state", "rm"):
            for address in args[2:]:
                state.pop(address, None)
            self.serial[layer] = self.serial.get(layer, 1) + 1
            return Result(0, f"Removed {args[2]}", "")
        if args[:2] == ("output", "-raw") and not state and layer not in self.outputs:
            return Result(0, NO_OUTPUTS_WARNING, "")  # as Terraform 1.11 answers a state without any output
        if args[:2] == ("output", "-raw") and args[2] in self.outputs.get(layer, {}):
            value = self.outputs[layer][args[2]]
            if value is None:  # the output is not there (a layer projected without Talos, or destroyed)
                return Result(1, "", f'Error: Output "{args[2]}" not found')
            return Result(0, value, "")
        if args[:3] == ("output", "-raw", "kubeconfig"):
            if "talos_cluster_kubeconfig.cluster_kubeconfig" in state:
                return Result(0, self.kubeconfig, "")
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
            for change in sorted(self.pending.pop(layer), key=apply_order):
                if change["action"] == "delete":
                    gone = self.states[layer].pop(change["address"])
                    if change["address"].startswith(APPLY + "."):  # the provider resets with what the state says
                        self.reset_with[change["address"]] = gone["values"]["on_destroy"]
                elif change["action"] == "create":
                    self.states[layer][change["address"]] = {
                        "values": dict(change["after"]),
                        "depends_on": list(change["depends_on"]),
                    }
                else:
                    self.states[layer][change["address"]]["values"].update(change["after"])
                self.applied_change(layer, change)
                done.append(f"{change['action']} {change['address']}")
            self.applied.append(done)
            self.serial[layer] += 1
            return Result(0, "", "")
        raise AssertionError(f"fake terraform: unexpected command {args}")

    def applied_change(self, layer: str, change: dict) -> None:
        """Called after each change is applied (a hook: what the provider does to the machines, e.g. a reset that
        leaves etcd, is the tests' business)."""

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
        state = self.states.setdefault(layer, {})
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
            changes = self.site_changes(document, state)
            if targets:
                changes = targeted(changes, targets)
        self.pending[layer] = changes
        (workdir / "terravixens.tfplan").write_text("fake plan")
        return Result(2 if changes else 0, "", "", [])

    def site_changes(self, document: dict, state: dict[str, dict]) -> list[dict]:
        """What a normal plan changes: nodes that left (VM and apply deleted), new nodes (created), the membership
        record, an apply's on_destroy."""
        resources = document.get("resource", {})
        wanted = {f"{kind}.{name}": body for kind in (APPLY, VM) for name, body in resources.get(kind, {}).items()}
        changes: list[dict] = []
        for address in sorted(a for a in state if a.split(".", 1)[0] in (APPLY, VM) and a not in wanted):
            changes.append({"address": address, "action": "delete", "after": None})  # the node left the site
        record = resources.get("terraform_data", {}).get(MEMBERSHIP.split(".", 1)[1], {}).get("input") or {}
        addresses = {**record.get("control_planes", {}), **record.get("workers", {})}
        for address, body in sorted(wanted.items()):
            kind, name = address.split(".", 1)
            if address not in state:
                node = owner_of(name) or name
                if kind == APPLY:
                    after = {
                        "node": addresses.get(node, body.get("node")),
                        "apply_mode": body.get("apply_mode"),
                        "resolved_apply_mode": "auto",
                        "on_destroy": body["on_destroy"],
                    }
                    depends_on = [*body.get("depends_on", []), SECRETS]
                else:
                    after, depends_on = {"name": body.get("name", node)}, []
                changes.append({"address": address, "action": "create", "after": after, "depends_on": depends_on})
            elif kind == APPLY and body["on_destroy"] != state[address]["values"]["on_destroy"]:
                changes.append({"address": address, "action": "update", "after": {"on_destroy": body["on_destroy"]}})
        if record and MEMBERSHIP in state and state[MEMBERSHIP]["values"].get("input") != record:
            changes.append({"address": MEMBERSHIP, "action": "update", "after": {"input": record}})
        return sorted(changes, key=lambda change: change["address"])

    def plan_json(self, layer: str) -> dict:
        state = self.states.setdefault(layer, {})
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
            before = state[change["address"]]["values"] if change["action"] != "create" else None
            after = None if change["after"] is None else {**(before or {}), **change["after"]}
            changes.append(
                {
                    "address": change["address"],
                    "type": kind,
                    "name": name,
                    "mode": "managed",
                    "change": {"actions": [change["action"]], "before": before, "after": after, "after_unknown": {}},
                }
            )
        # planned_values, as Terraform writes them: every object the plan keeps or creates, with its values after it.
        planned = {address: r["values"] for address, r in state.items()}
        for change in changes:
            if change["change"]["actions"] == ["delete"]:
                planned.pop(change["address"], None)
            else:
                planned[change["address"]] = change["change"]["after"]
        planned_resources = [
            {"address": a, "mode": "managed", "type": a.split(".", 1)[0], "name": a.split(".", 1)[1], "values": v}
            for a, v in sorted(planned.items())
        ]
        return {
            "format_version": "1.2",
            "terraform_version": "1.11.4",
            "planned_values": {"root_module": {"resources": planned_resources}},
            "resource_changes": changes,
            "prior_state": {"format_version": "1.0", "values": {"root_module": {"resources": prior}}},
        }


def targeted(changes: list[dict], targets: list[str]) -> list[dict]:
    """Terraform's `-target`: the targeted resources and, for what is created or updated, what they depend on."""
    by_address = {change["address"]: change for change in changes}
    keep, todo = set(), list(targets)
    while todo:
        address = todo.pop()
        if address in keep or address not in by_address:
            continue
        keep.add(address)
        todo += by_address[address].get("depends_on", [])
    return [change for change in changes if change["address"] in keep]


def apply_order(change: dict) -> tuple[int, str]:
    """The order Terraform applies them in: dependents are destroyed first — an apply before its VM (the reset needs
    the machine) —, a VM created before its apply, updates last."""
    kind = change["address"].split(".", 1)[0]
    if change["action"] == "delete":
        return (1 if kind == VM else 0, change["address"])
    if change["action"] == "create":
        return (2 if kind == VM else 3, change["address"])
    return (4, change["address"])


class Outputs(Terraform):
    """A Terraform stand-in answering only `output -raw NAME`, from a table (what a platform layer's state holds):
    for the steps that read the talosconfig and nothing else."""

    def __init__(self, outputs: dict[str, str]):
        super().__init__(binary="fake-terraform")
        self.outputs = outputs
        self.calls: list[tuple[str, ...]] = []

    def run(self, workdir: Path, *args: str) -> Result:
        self.calls.append((Path(workdir).name, *args))
        if args[:2] == ("output", "-raw") and args[2] in self.outputs:
            return Result(0, self.outputs[args[2]], "")
        return Result(1, "", f'Error: Output "{args[-1]}" not found')
