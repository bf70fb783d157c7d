"""Kubernetes' syntax for labels and taints (terravixens.config.kubernetes_names), held to Talos' own validation.

The site rules refuse a label or taint at `validate` only if Talos would refuse it in the machine configuration (and
Kubernetes on the Node): the table below is judged by both, our functions and Talos' machinery (tools/talos-validate,
the tool of each supported minor, on the example site's wk-a with one more patch), and the two verdicts must agree.
NodeRestriction is not Talos' to judge (it is the API server's, at apply): its rule is tested against the plugin's
own cases, quoted from plugin/pkg/admission/noderestriction and k8s.io/kubelet/pkg/apis.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from terravixens.config.kubernetes_names import kubelet_refuses, label_value_problem, qualified_name_problem
from tests import talos_tool

KEYS = {
    "a": True,
    "example.com/pool": True,
    "a.b_c-d": True,
    "x" * 63: True,
    "node.kubernetes.io/pool": True,
    "a" * 253 + "/x": True,
    "a-b.c-d.e/x": True,
    "9/x": True,
    "a/b/c": False,
    "/x": False,
    "x/": False,
    "Example.com/x": False,
    "x" * 64: False,
    "-a": False,
    "a-": False,
    "a b": False,
    "é": False,
    "a" * 254 + "/x": False,
    "a..b/x": False,
    "-a.com/x": False,
    "a_b.com/x": False,
}
VALUES = {
    "": True,
    "gpu": True,
    "a.b_c-d": True,
    "v" * 63: True,
    "0": True,
    "v" * 64: False,
    "-a": False,
    "a.": False,
    "a b": False,
    "a/b": False,
    "a:b": False,
    "ü": False,
}


def test_qualified_names_as_kubernetes_defines_them():
    assert {key: qualified_name_problem(key) is None for key in KEYS} == KEYS


def test_label_values_as_kubernetes_defines_them():
    assert {value: label_value_problem(value) is None for value in VALUES} == VALUES


def test_what_node_restriction_lets_a_kubelet_set():
    """The plugin's rule: kubernetes.io and k8s.io namespaces (and subdomains) are refused but the kubelet's own
    labels and the [*.]kubelet.kubernetes.io / [*.]node.kubernetes.io namespaces; node-restriction.kubernetes.io
    never."""
    verdicts = {
        key: kubelet_refuses(key)
        for key in (
            "kubernetes.io/hostname",
            "kubernetes.io/arch",
            "kubernetes.io/os",
            "beta.kubernetes.io/arch",
            "beta.kubernetes.io/os",
            "beta.kubernetes.io/instance-type",
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/region",
            "topology.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/region",
            "kubelet.kubernetes.io/x",
            "a.kubelet.kubernetes.io/x",
            "node.kubernetes.io/x",
            "a.node.kubernetes.io/x",
            "example.com/x",
            "x",
            "kubernetes.io.example.com/x",
            "notkubernetes.io/x",
            "kubernetes.io/role",
            "node-role.kubernetes.io/worker",
            "a.k8s.io/x",
            "k8s.io/x",
            "topology.kubernetes.io/rack",
            "node-restriction.kubernetes.io/x",
            "a.node-restriction.kubernetes.io/x",
            "anode.kubernetes.io/x",
        )
    }
    assert {key for key, refused in verdicts.items() if refused is None} == {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "kubelet.kubernetes.io/x",
        "a.kubelet.kubernetes.io/x",
        "node.kubernetes.io/x",
        "a.node.kubernetes.io/x",
        "example.com/x",
        "x",
        "kubernetes.io.example.com/x",
        "notkubernetes.io/x",
    }
    assert verdicts["a.k8s.io/x"] == verdicts["k8s.io/x"] == "k8s.io"
    assert verdicts["anode.kubernetes.io/x"] == verdicts["node-role.kubernetes.io/worker"] == "kubernetes.io"
    assert verdicts["a.node-restriction.kubernetes.io/x"] == "node-restriction.kubernetes.io"


# ---------------------------------------------------------------------------------------------- Talos agrees
def _with_patch(node: dict, name: str, machine: dict) -> dict:
    changed = copy.deepcopy(node)
    changed["name"] = name
    changed["config_patches"] = [*changed["config_patches"], yaml.safe_dump({"machine": machine})]
    return changed


@pytest.fixture(scope="module")
def worker_request(variant_stacks) -> dict:
    [node] = [node for node in talos_tool.requests(variant_stacks("example")) if node["name"].endswith("wk-a_apply")]
    return node


@pytest.mark.parametrize("minor", talos_tool.supported_minors())
def test_talos_takes_exactly_the_labels_and_taints_we_take(minor, worker_request):
    cases: dict[str, tuple[bool, dict]] = {}
    for index, (key, ok) in enumerate(KEYS.items()):
        cases[f"label-key-{index}"] = (ok, {"nodeLabels": {key: "x"}})
        cases[f"taint-key-{index}"] = (ok, {"nodeTaints": {key: "x:NoSchedule"}})
    for index, (value, ok) in enumerate(VALUES.items()):
        cases[f"label-value-{index}"] = (ok, {"nodeLabels": {"example.com/v": value}})
        if ":" not in value:  # Talos splits a taint's "value:effect" at the first ':'
            cases[f"taint-value-{index}"] = (ok, {"nodeTaints": {"example.com/v": f"{value}:NoExecute"}})
    report = talos_tool.validate(
        minor, [_with_patch(worker_request, name, machine) for name, (_, machine) in cases.items()]
    )
    talos = {verdict.name: verdict.ok for verdict in report.verdicts}
    assert talos == {name: ok for name, (ok, _) in cases.items()}, [
        (name, cases[name][1], verdict.errors)
        for verdict in report.verdicts
        for name in [verdict.name]
        if verdict.ok != cases[name][0]
    ]
