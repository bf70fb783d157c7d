"""Talos' own library judges every machine configuration terravixens renders (tools/talos-validate, ADR 0014).

For every node of every test site (the conformance variants), the tool built for the cluster's Talos minor
generates the role's configuration as the provider's `talos_machine_configuration` data source does, applies the
node's `config_patches` as `talos_machine_configuration_apply` does, and validates the result in metal mode
(install instructions required). The requests come from the synthesized JSON. The binaries are built by
`make tools` (part of `make setup`); a missing one fails these tests with the command that builds it.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess

import pytest
import yaml

from terravixens import talos_versions as versions
from terravixens.config.loader import SiteError
from terravixens.config.model import NEWEST_SUPPORTED_TALOS
from tests import support, talos_tool
from tests.variants import VARIANTS, variant_data

MINORS = {"1.11": "v1.11.6", "1.12": "v1.12.7", "1.13": "v1.13.0"}
# siderolabs/talos v0.11.0 (the provider terravixens pins) is built with machinery v1.13.0: that is what really
# generates every node's configuration, under the version contract of the site's talos_version.
PROVIDER_MINOR = "1.13"
HOSTNAME_CONFLICT = "validate: static hostname is already set in v1alpha1 config"


def _named(variant: str, nodes: list[dict]) -> list[dict]:
    return [{**node, "name": f"{variant}:{node['name']}"} for node in nodes]


@pytest.fixture(scope="module")
def site_requests(variant_stacks) -> dict[str, list[dict]]:
    """Every variant's node requests, named `<variant>:<stack>/<apply id>`."""
    return {variant: _named(variant, talos_tool.requests(variant_stacks(variant))) for variant in sorted(VARIANTS)}


def _run_by_minor(nodes: list[dict], **options) -> dict[str, tuple[str, talos_tool.Verdict]]:
    """name -> (machinery that judged it, verdict); one tool process per minor for all the nodes given."""
    verdicts = {}
    for minor, group in sorted(talos_tool.by_minor(nodes).items()):
        report = talos_tool.validate(minor, group, **options)
        assert report.mode == "metal" and len(report.verdicts) == len(group)
        verdicts.update({verdict.name: (report.machinery, verdict) for verdict in report.verdicts})
    return verdicts


@pytest.fixture(scope="module")
def site_verdicts(site_requests):
    return _run_by_minor([node for nodes in site_requests.values() for node in nodes])


def _expected_nodes(variant: str) -> dict[str, tuple[str, str, str]]:
    """name -> (Talos minor it runs, hostname, configuration contract) for every node of the variant's model."""
    site = support.site_from(variant_data(VARIANTS[variant]))
    return {
        f"{variant}:platform-{cluster_name}/node_{name}_apply": (
            talos_tool.minor_of(cluster.talos_version),
            node.hostname or name,
            cluster.contract,
        )
        for cluster_name, cluster in site.clusters.items()
        for name, (_, node) in cluster.nodes().items()
    }


def _contract_1_11(variant: str) -> bool:
    clusters = support.site_from(variant_data(VARIANTS[variant])).clusters
    return all(cluster.contract == "v1.11" for cluster in clusters.values())


# ---------------------------------------------------------------------------------------------------------- tools
def test_one_tool_per_supported_minor_built_from_its_pinned_machinery():
    assert {minor: talos_tool.pinned_machinery(minor) for minor in talos_tool.supported_minors()} == MINORS
    for minor, version in MINORS.items():
        printed = subprocess.run(
            [str(talos_tool.binary(minor)), "-version"], capture_output=True, text=True, timeout=30
        )
        assert printed.stdout.strip() == version


def test_the_newest_talos_the_model_accepts_has_a_tool():
    newest_major, newest_minor = NEWEST_SUPPORTED_TALOS
    assert f"{newest_major}.{newest_minor}" in talos_tool.supported_minors()


# ---------------------------------------------------------------------------------------------------------- sites
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_node_validates_with_the_tool_of_its_talos_version(variant, site_requests, site_verdicts):
    expected = _expected_nodes(variant)
    assert sorted(node["name"] for node in site_requests[variant]) == sorted(expected)
    judged = {name: site_verdicts[name] for name in expected}
    assert {name: machinery for name, (machinery, _) in judged.items()} == {
        name: MINORS[minor] for name, (minor, _, _) in expected.items()
    }
    assert {name: (v.ok, v.errors, v.warnings) for name, (_, v) in judged.items()} == dict.fromkeys(
        expected, (True, [], [])
    )
    # The node keeps the name it has in the site file: a static hostname, nothing generated. From contract v1.12
    # it is in a HostnameConfig document, with auto off (ADR 0023).
    assert {name: (v.hostname, v.hostname_auto, v.documents) for name, (_, v) in judged.items()} == {
        name: (hostname, "", ["v1alpha1"]) if contract == "v1.11" else (hostname, "off", ["v1alpha1", "HostnameConfig"])
        for name, (_, hostname, contract) in expected.items()
    }


@pytest.mark.parametrize("minor", ["1.12", "1.13"])
def test_every_site_is_valid_on_a_newer_talos_too(minor, site_requests):
    """The state between `terravixens upgrade` and the next deploy: nodes already run the newer Talos, their
    configurations are still the site's (its contract, its installer). Every node of every site whose contract the
    newer Talos can read must validate there, with no warning and its own static hostname."""
    nodes = [
        node
        for variant in sorted(site_requests)
        for node in site_requests[variant]
        if versions.minor_of(node["machine_configuration"]["talos_version"]) <= versions.minor_of(minor)
        and versions.minor_of(talos_tool.running_version(node)) <= versions.minor_of(minor)
    ]
    assert len(nodes) >= 70
    report = talos_tool.validate(minor, nodes)
    assert report.machinery == MINORS[minor]
    hostnames = {name: hostname for variant in VARIANTS for name, (_, hostname, _) in _expected_nodes(variant).items()}
    verdicts = {
        v.name: (v.ok, v.errors, v.warnings, v.hostname, v.hostname_auto in ("", "off")) for v in report.verdicts
    }
    assert verdicts == {node["name"]: (True, [], [], hostnames[node["name"]], True) for node in nodes}


def test_the_sites_cover_every_talos_minor_and_contract(site_requests):
    """Every supported minor and every contract is judged, including a 1.13 site on its newest Kubernetes."""
    pairs = {(minor, contract) for variant in VARIANTS for (minor, _, contract) in _expected_nodes(variant).values()}
    assert pairs == {("1.11", "v1.11"), ("1.12", "v1.11"), ("1.12", "v1.12"), ("1.13", "v1.11"), ("1.13", "v1.13")}
    [newest] = [node["machine_configuration"] for node in site_requests["talos-1.13"]][:1]
    assert (newest["talos_version"], newest["kubernetes_version"]) == ("v1.13", "v1.36.0")


def test_what_the_provider_generates_loads_and_validates_on_the_nodes_own_version(site_requests):
    """The provider's machinery (v1.13.0) generates under the site's contract; the node's Talos then decodes it
    strictly (unknown keys are errors) and validates it: both must agree on every node of every site."""
    nodes = [node for variant in sorted(site_requests) for node in site_requests[variant]]
    rendered = talos_tool.validate(PROVIDER_MINOR, nodes, emit_input=True)
    assert rendered.machinery == MINORS[PROVIDER_MINOR]
    inputs = {verdict.name: verdict.machine_configuration_input for verdict in rendered.verdicts}
    assert all(text and text.startswith("version: v1alpha1") for text in inputs.values())
    fed = [{**node, "machine_configuration_input": inputs[node["name"]]} for node in nodes]
    verdicts = _run_by_minor(fed)
    assert len(verdicts) == len(nodes) > 0
    assert {name: (machinery, v.ok, v.errors, v.warnings) for name, (machinery, v) in verdicts.items()} == {
        node["name"]: (MINORS[talos_tool.minor_of(talos_tool.running_version(node))], True, [], []) for node in nodes
    }


# ---------------------------------------------------------------------------------------------------------- 1.12+
@pytest.mark.parametrize("minor", ["1.12", "1.13"])
def test_contract_1_11_patches_under_a_newer_contract_conflict_on_the_hostname(minor, site_requests):
    """Why a patch follows its contract, as Talos says it: under >= v1.12 the generated HostnameConfig document and
    machine.network.hostname cannot both be there (siderolabs/talos#12624). Nothing else is refused."""
    nodes = copy.deepcopy(
        [node for variant in sorted(site_requests) if _contract_1_11(variant) for node in site_requests[variant]]
    )
    for node in nodes:
        node["machine_configuration"]["talos_version"] = MINORS[minor]
    report = talos_tool.validate(minor, nodes)
    assert report.machinery == MINORS[minor]
    assert {v.name: (v.ok, v.errors, v.warnings, v.documents) for v in report.verdicts} == {
        node["name"]: (False, [HOSTNAME_CONFLICT], [], ["v1alpha1", "HostnameConfig"]) for node in nodes
    }


@pytest.mark.parametrize("minor", ["1.12", "1.13"])
def test_dropping_the_hostname_is_valid_but_gives_every_node_a_generated_name(minor, site_requests):
    """The trap of the 1.12 upgrade path (siderolabs/terraform-provider-talos#296): without the old key the
    configuration validates, and the node takes a generated (`auto: stable`) hostname — a new node to Kubernetes.
    The next step must write the hostname into the HostnameConfig document."""
    nodes = copy.deepcopy(site_requests["example"])
    for node in nodes:
        node["machine_configuration"]["talos_version"] = MINORS[minor]
        patch = yaml.safe_load(node["config_patches"][0])
        del patch["machine"]["network"]["hostname"]
        node["config_patches"][0] = yaml.safe_dump(patch)
    report = talos_tool.validate(minor, nodes)
    assert {v.name: (v.ok, v.errors, v.hostname, v.hostname_auto) for v in report.verdicts} == {
        node["name"]: (True, [], "", "stable") for node in nodes
    }


@pytest.mark.parametrize("minor", ["1.12", "1.13"])
def test_the_hostname_config_needs_auto_off(minor, site_requests):
    """Why the patch says `auto: "off"`: without it, Talos' merge keeps the generated `auto: stable` beside our
    hostname, and the configuration is refused (talos#12891)."""
    nodes = copy.deepcopy(site_requests[f"talos-{minor}"])
    for node in nodes:
        node["config_patches"] = [node["config_patches"][0].replace("auto: 'off'\n", "")]
    verdicts = talos_tool.validate(minor, nodes).verdicts
    assert {v.name: (v.ok, v.errors) for v in verdicts} == {
        node["name"]: (False, ["validate: HostnameConfig: 'auto' and 'hostname' cannot be set at the same time"])
        for node in nodes
    }


@pytest.mark.parametrize("variant", ["talos-1.12", "talos-1.13"])
def test_a_node_refuses_a_contract_newer_than_the_talos_it_runs(variant, site_requests):
    """Why config_contract may not be ahead of talos_version, and why a minor bump whose contract follows it is
    deployed after `terravixens upgrade`: the provider (v1.13.0) generates under the new contract, and a node still
    on 1.11 cannot read the result, with or without our patches."""
    nodes = site_requests[variant]
    rendered = talos_tool.validate(PROVIDER_MINOR, nodes, emit_input=True)
    fed = [
        {**node, "machine_configuration_input": verdict.machine_configuration_input}
        for node, verdict in zip(nodes, rendered.verdicts, strict=True)
    ]
    ours = talos_tool.validate("1.11", fed).verdicts
    not_registered = (
        'talos_machine_configuration_apply: error loading config patches: "HostnameConfig" "v1alpha1": not registered'
    )
    assert {v.name: v.errors for v in ours} == {node["name"]: [not_registered] for node in nodes}
    bare = talos_tool.validate("1.11", [{**node, "config_patches": []} for node in fed]).verdicts
    unknown_key = "load: unknown keys found during decoding:\nmachine:\n    install:\n        grubUseUKICmdline: true"
    assert {v.name: v.errors for v in bare} == {node["name"]: [unknown_key] for node in nodes}


# Kubernetes versions around every edge of the table, as written in site files.
KUBERNETES_PROBES = [
    "v1.28.9",
    "v1.29.0",
    "v1.29.5",
    "v1.30.0",
    "v1.30.14",
    "v1.31.0",
    "v1.33.4",
    "v1.34.0",
    "v1.34.9",
    "v1.35.0",
    "v1.35.4",
    "v1.36.0",
    "v1.36.3",
    "v1.37.0",
    "v1.37.1",
    "v2.0.0",
]


@pytest.mark.parametrize("minor", sorted(MINORS))
def test_the_kubernetes_table_is_talos_own(minor):
    """terravixens.talos_versions holds what Talos' compatibility package says, minor by minor."""
    said = {kubernetes: talos_tool.kubernetes_verdict(minor, kubernetes) for kubernetes in KUBERNETES_PROBES}
    assert {verdict["talos"] for verdict in said.values()} == {MINORS[minor]}
    talos_minor = versions.minor_of(minor)
    assert {kubernetes: verdict["supported"] for kubernetes, verdict in said.items()} == {
        kubernetes: versions.kubernetes_supported(talos_minor, versions.minor_of(kubernetes))
        for kubernetes in KUBERNETES_PROBES
    }
    assert sum(verdict["supported"] for verdict in said.values()) >= 6  # the probes straddle the range


def test_the_supported_minors_are_the_tools_minors():
    assert [f"{major}.{minor}" for major, minor in versions.KUBERNETES] == talos_tool.supported_minors()


# ---------------------------------------------------------------------------------------------------------- broken
def _edit(patch: str, change) -> str:
    document = yaml.safe_load(patch)
    change(document)
    return yaml.safe_dump(document)


def _interface(document: dict) -> dict:
    return document["machine"]["network"]["interfaces"][0]


def _vlan(document: dict, vlan_id: int) -> dict:
    return next(entry for entry in _interface(document)["vlans"] if entry["vlanId"] == vlan_id)


REMOVE_INSTALL_DISK = '[{"op": "remove", "path": "/machine/install/disk"}]'
UNPARSABLE_DISK_SELECTOR = "machine:\n  install:\n    diskSelector:\n      size: banana\n"
WORKER_VIP = yaml.safe_dump(
    {
        "machine": {
            "network": {
                "interfaces": [
                    {"deviceSelector": {"physical": True}, "vlans": [{"vlanId": 111, "vip": {"ip": "10.11.1.10"}}]}
                ]
            }
        }
    }
)
BAD_TAINT = "machine:\n  nodeTaints:\n    dedicated: gpu:Sometimes\n"
LOADING = "talos_machine_configuration_apply: error loading config patches: "


def _rename(document: dict, old: str, new: str) -> None:
    document["machine"][new] = document["machine"].pop(old)


# case -> (node, how its patches are broken, what the 1.11 tool must say; None: see the test)
BROKEN = {
    "install-disk-removed": (
        "cp-a",
        lambda p: [*p, REMOVE_INSTALL_DISK],
        ["validate: either install disk or diskSelector should be defined"],
    ),
    "install-disk-selector-unparsable": (
        "cp-a",
        lambda p: [*p, UNPARSABLE_DISK_SELECTOR],
        [
            LOADING + "error decoding  to *v1alpha1.Config: failed to parse disk size banana: strconv.ParseFloat: "
            'parsing "": invalid syntax'
        ],
    ),
    "vlan-id-out-of-range": (
        "wk-a",
        lambda p: [_edit(p[0], lambda d: _vlan(d, 120).update(vlanId=70000))],
        [
            LOADING + "error decoding  to *v1alpha1.Config: yaml: unmarshal errors:\n  line 27: cannot unmarshal "
            "!!int `70000` into uint16"
        ],
    ),
    "vlan-address-invalid": (
        "wk-a",
        lambda p: [_edit(p[0], lambda d: _vlan(d, 120).update(addresses=["10.12.0.21/33"]))],
        ["validate: [networking.os.device.vlan.addresses] .120: invalid CIDR address: 10.12.0.21/33"],
    ),
    "interface-and-selector": (
        "cp-a",
        lambda p: [_edit(p[0], lambda d: _interface(d).update(interface="eth0"))],
        [
            (
                "validate: [networking.os.device.interface], [networking.os.device.deviceSelector]: config sections "
                "are mutually exclusive"
            )
        ],
    ),
    "vip-on-a-worker": (
        "wk-a",
        lambda p: [*p, WORKER_VIP],
        ["validate: virtual (shared) IP is not allowed on non-controlplane nodes"],
    ),
    "unknown-key": ("cp-b", lambda p: [_edit(p[0], lambda d: _rename(d, "install", "instal"))], None),
    "taint-effect": (
        "wk-b",
        lambda p: [*p, BAD_TAINT],
        ['validate: invalid machine node taints: invalid taint effect: "Sometimes"'],
    ),
    "pinned-subnet-invalid": (
        "cp-c",
        lambda p: [p[0].replace("10.11.1.0/24", "10.11.1.0/99")],
        [
            'validate: etcd advertised subnet is not valid: "10.11.1.0/99"',
            'validate: etcd listen subnet is not valid: "10.11.1.0/99"',
            'validate: kubelet nodeIP subnet is not valid: "10.11.1.0/99"',
        ],
    ),
    "not-yaml": (
        "cp-a",
        lambda p: [*p, "machine: [\n"],
        [LOADING + "decode error: yaml: line 1: did not find expected node content"],
    ),
}


@pytest.fixture(scope="module")
def broken_verdicts(site_requests):
    by_node = {node["name"].rsplit("/node_", 1)[1].removesuffix("_apply"): node for node in site_requests["example"]}
    nodes = []
    for case, (node_name, breaks, _) in BROKEN.items():
        node = copy.deepcopy(by_node[node_name])
        node["name"] = case
        node["config_patches"] = breaks(node["config_patches"])
        nodes.append(node)
    endpoint = copy.deepcopy(by_node["cp-a"])
    endpoint["name"] = "endpoint-not-https"
    endpoint["machine_configuration"]["cluster_endpoint"] = "http://10.11.1.10:6443"
    nodes.append(endpoint)
    return {v.name: v for v in talos_tool.validate("1.11", nodes).verdicts}, nodes


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_patch_fails_the_tool(case, broken_verdicts):
    verdicts, _ = broken_verdicts
    verdict = verdicts[case]
    assert not verdict.ok
    expected = BROKEN[case][2]
    if expected is None:  # the message quotes the whole misspelled section
        [message] = verdict.errors
        assert message.startswith(
            LOADING + "unknown keys found during decoding:\nmachine:\n    instal:\n        disk: /dev/sda\n"
        )
    else:
        assert verdict.errors == expected


def test_an_http_endpoint_fails_the_data_source_step(broken_verdicts):
    verdicts, _ = broken_verdicts
    assert verdicts["endpoint-not-https"].errors == [
        (
            'talos_machine_configuration: cluster_endpoint "http://10.11.1.10:6443" is invalid: the control plane '
            "endpoint must be an https:// URL"
        )
    ]


def test_metal_mode_is_the_one_that_requires_the_install_disk(broken_verdicts):
    """Why metal: a nocloud node validates in cloud mode, where a configuration without an install disk passes;
    but `talosctl upgrade` reinstalls from `machine.install`, so it must be complete. Metal refuses it."""
    _, nodes = broken_verdicts
    [removed] = [node for node in nodes if node["name"] == "install-disk-removed"]
    [cloud] = talos_tool.validate("1.11", [removed], mode="cloud").verdicts
    assert (cloud.ok, cloud.errors) == (True, [])


def test_the_same_broken_patch_fails_every_tool(site_requests):
    node = copy.deepcopy(next(n for n in site_requests["example"] if n["name"].endswith("node_cp-a_apply")))
    node["config_patches"].append(REMOVE_INSTALL_DISK)
    said = {minor: talos_tool.validate(minor, [node]).verdicts[0].errors for minor in MINORS}
    assert said == {
        "1.11": ["validate: either install disk or diskSelector should be defined"],
        "1.12": ["validate: v1alpha1.Config: either install disk or diskSelector should be defined"],
        "1.13": ["validate: v1alpha1.Config: either install disk or diskSelector should be defined"],
    }


# Talos accepts these (v1.11.6 measured), so the site model must refuse them: (node, patch edit, site edit, error).
NOT_CHECKED_BY_TALOS = {
    "vlan-id-5000": (
        "wk-a",
        lambda d: _vlan(d, 120).update(vlanId=5000),
        lambda n: n["networks"]["vlans"].update({5000: n["networks"]["vlans"].pop(120)}),
        "VLAN id 5000 is out of range: 802.1Q VLAN ids are 1-4094",
    ),
    "vlan-id-0": (
        "wk-a",
        lambda d: _vlan(d, 120).update(vlanId=0),
        lambda n: n["networks"]["vlans"].update({0: n["networks"]["vlans"].pop(120)}),
        "VLAN id 0 is out of range: 802.1Q VLAN ids are 1-4094",
    ),
    "hostname-not-dns": (
        "wk-a",
        lambda d: d["machine"]["network"].update(hostname="WK_A!"),
        lambda n: n.update(hostname="WK_A!"),
        "'WK_A!' is not a DNS-safe name",
    ),
    "gateway-not-an-address": (
        "wk-a",
        lambda d: _vlan(d, 111)["routes"][0].update(gateway="10.11.1"),
        lambda n: n["networks"]["vlans"][111].update(gateway="10.11.1"),
        "'10.11.1' is not a valid IP address",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_CHECKED_BY_TALOS))
def test_what_talos_accepts_the_site_model_refuses(case, site_requests):
    node_name, edit_patch, edit_site, message = NOT_CHECKED_BY_TALOS[case]
    node = copy.deepcopy(next(n for n in site_requests["example"] if n["name"].endswith(f"node_{node_name}_apply")))
    node["config_patches"] = [_edit(node["config_patches"][0], edit_patch)]
    [verdict] = talos_tool.validate("1.11", [node]).verdicts
    assert (verdict.ok, verdict.errors) == (True, [])
    data = support.example_data()
    edit_site(data["clusters"]["prod"]["workers"][node_name])
    with pytest.raises(SiteError, match=re.escape(message)):
        support.site_from(data)


# ---------------------------------------------------------------------------------------------------------- requests
def test_requests_take_patches_as_terraform_sends_them(example_synth):
    stacks = copy.deepcopy(example_synth)
    apply = stacks["platform-prod"]["resource"]["talos_machine_configuration_apply"]["node_cp-a_apply"]
    apply["config_patches"].append("machine:\n  env:\n    LITERAL: $${not_interpolated} %%{ also }\n")
    [cp_a] = [n for n in talos_tool.requests(stacks) if n["name"] == "platform-prod/node_cp-a_apply"]
    assert cp_a["config_patches"][-1] == "machine:\n  env:\n    LITERAL: ${not_interpolated} %{ also }\n"
    assert cp_a["config_patches"][0] == apply["config_patches"][0]
    assert cp_a["machine_configuration"] == {
        "cluster_name": "prod",
        "cluster_endpoint": "https://10.11.1.10:6443",
        "machine_type": "controlplane",
        "talos_version": "v1.11",
        "kubernetes_version": "v1.34.2",
        "docs": False,
        "examples": False,
        "config_patches": stacks["platform-prod"]["data"]["talos_machine_configuration"][
            "cluster_machine_configuration_controlplane"
        ]["config_patches"],
    }


def test_requests_refuse_an_interpolated_patch(example_synth):
    stacks = copy.deepcopy(example_synth)
    apply = stacks["platform-prod"]["resource"]["talos_machine_configuration_apply"]["node_wk-b_apply"]
    apply["config_patches"] = ["machine:\n  network:\n    hostname: ${var.name}\n"]
    with pytest.raises(ValueError, match=r"node_wk-b_apply: holds a Terraform interpolation"):
        talos_tool.requests(stacks)


def test_a_minor_without_a_tool_names_the_command_that_builds_it():
    with pytest.raises(talos_tool.ToolMissing, match=r"talos-validate-v1\.99 is missing: run `make tools`"):
        talos_tool.binary("1.99")


def test_the_tool_refuses_an_unknown_mode_and_a_malformed_request():
    tool = str(talos_tool.binary("1.11"))
    mode = subprocess.run(
        [tool, "-mode", "baremetal"], input='{"nodes": []}', capture_output=True, text=True, timeout=30
    )
    assert (mode.returncode, mode.stderr.strip()) == (
        2,
        'talos-validate: unknown -mode "baremetal": use metal, cloud or container',
    )
    typo = subprocess.run([tool], input=json.dumps({"node": []}), capture_output=True, text=True, timeout=30)
    assert typo.returncode == 2
    assert typo.stderr.strip() == (
        'talos-validate: reading the request (JSON on standard input): json: unknown field "node"'
    )


def test_a_secrets_bundle_file_is_written_0600_once_and_used(site_requests, tmp_path):
    bundle = tmp_path / "secrets.yaml"
    tool = str(talos_tool.binary("1.11"))
    written = subprocess.run([tool, "-write-secrets", str(bundle)], capture_output=True, text=True, timeout=60)
    assert written.returncode == 0 and bundle.stat().st_mode & 0o777 == 0o600
    again = subprocess.run([tool, "-write-secrets", str(bundle)], capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and again.stderr.strip().endswith(f"open {bundle}: file exists")
    cluster_id = yaml.safe_load(bundle.read_text())["cluster"]["id"]
    for minor in MINORS:
        report = talos_tool.validate(minor, site_requests["example"], emit_input=True, secrets=bundle)
        assert all(verdict.ok for verdict in report.verdicts)
        assert {yaml.safe_load(v.machine_configuration_input)["cluster"]["id"] for v in report.verdicts} == {cluster_id}
