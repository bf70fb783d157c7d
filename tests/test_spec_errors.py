"""One test per invalid spec, posture or secrets file, and per broken reference between them and the site file:
each names the file, the line and field, the bad value (never a secret) and the fix. Files are copies of
sites/standalone.yaml and sites/specs/ in a temporary folder, changed minimally."""

from __future__ import annotations

import json

import pytest
import yaml

from terravixens import cli
from terravixens.config.loader import SiteError
from terravixens.standalone.catalog import CatalogError
from terravixens.standalone.resolve import load_standalone
from tests import spec_support as s
from tests.spec_support import ALICE, NODE_TOKENS, SITE_TOKEN


@pytest.fixture
def lab(tmp_path):
    site, secrets = s.standalone_copy(tmp_path)
    return tmp_path, site, secrets


def edit_yaml(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def report(site, secrets=None) -> str:
    """The whole report `load_standalone` raises, as printed."""
    with pytest.raises((CatalogError, SiteError)) as caught:
        load_standalone(site, secrets)
    text = str(caught.value)
    assert "Traceback" not in text
    return text


def lines_of(text: str) -> list[str]:
    return [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- ")]


def test_the_example_resolves_with_its_secrets(lab):
    _, site, secrets = lab
    standalone = load_standalone(site, secrets)
    assert {name: node.auth for name, node in standalone.nodes.items()} == {
        "nest1": "node_token",
        "tools": "network",
        "dns1": "node_token",
        "jump1": "site_token",
    }
    assert standalone.documents["jump1"]["access"]["users"]["audit"] == {
        "sudo": False,
        "shell": "/bin/bash",
        "groups": ["adm"],
        "ssh_authorized_keys": [s.BOB],
    }
    assert standalone.documents["tools"]["run"] == {"trigger": "boot", "interval": None}
    assert standalone.documents["dns1"]["run"] == {"trigger": "interval", "interval": "30m"}
    assert standalone.documents["nest1"]["config"] == {"pve": {"repository": "no-subscription"}}
    assert standalone.documents["jump1"]["config"] == {"vm": {"guest_agent": True}}


# ---------------------------------------------------------------------------------------------------- site -> specs
def test_an_unknown_spec(lab):
    _folder, site, _ = lab
    site.write_text(site.read_text().replace("spec: tools", "spec: toolz"))
    text = report(site)
    line = site.read_text().splitlines().index("      spec: toolz") + 1
    assert text.splitlines()[0] == f"{site}: 1 problem in the site file"
    assert lines_of(text) == [
        (
            f"line {line}, standalone.nodes.tools.spec: unknown spec 'toolz': no specs/toolz.yaml "
            f"next to the site file; use one of dns, jump, nested-pve, tools"
        )
    ]


def test_a_missing_specs_folder(lab):
    _folder, site, _ = lab
    site.write_text(site.read_text().replace("specs_dir: specs", "specs_dir: nowhere"))
    text = report(site)
    assert "unknown spec 'nested-pve': no nowhere/nested-pve.yaml next to the site file; use one of none" in text


def test_a_spec_for_another_node_type(lab):
    _folder, site, _ = lab
    site.write_text(site.read_text().replace("spec: jump", "spec: dns"))
    [problem] = lines_of(report(site))
    assert "standalone.nodes.jump1.spec: spec 'dns' configures ct nodes (config.ct), not a vm" in problem


def test_a_hostname_in_a_shared_spec(lab):
    folder, site, _ = lab
    site.write_text(site.read_text().replace("spec: tools", "spec: jump"))
    edit_yaml(folder / "specs" / "jump.yaml", lambda d: d["identity"].update(hostname="jump"))
    text = report(site)
    assert f"{folder / 'specs' / 'jump.yaml'}: 1 problem in the spec file" in text
    hostname, fqdn = lines_of(text)
    assert hostname.startswith("line 5, identity.hostname: is set ('jump') but nodes jump1, tools use this spec")
    assert "standalone.nodes.tools.spec: the node would be named 'jump.lab.internal', like node 'jump1'" in fqdn


def test_an_address_in_a_shared_spec(lab):
    folder, site, _ = lab
    site.write_text(site.read_text().replace("spec: tools", "spec: jump"))
    edit_yaml(folder / "specs" / "jump.yaml", lambda d: d["network"].update(ip="10.11.1.61/24"))
    [problem] = lines_of(report(site))
    assert (
        "network.ip: is set (10.11.1.61/24) but nodes jump1, tools use this spec: they would share an address"
        in problem
    )


def test_a_spec_address_the_node_does_not_have(lab):
    folder, site, _ = lab
    edit_yaml(folder / "specs" / "tools.yaml", lambda d: d["network"].update(ip="10.11.1.99/24"))
    [problem] = lines_of(report(site))
    assert (
        "network.ip: 10.11.1.99/24 is not an address node 'tools' has in the site file (10.11.1.62, 10.12.0.62)"
        in problem
    )


def test_a_route_via_a_router_the_node_does_not_reach(lab):
    folder, site, _ = lab
    edit_yaml(
        folder / "specs" / "tools.yaml",
        lambda d: d["network"].update(routes=[{"to": "10.20.0.0/16", "via": "10.99.0.1"}]),
    )
    [problem] = lines_of(report(site))
    assert problem.endswith(
        "network.routes.0.via: 10.99.0.1 is on no subnet of node 'tools' (10.11.1.0/24, 10.12.0.0/24): route via a "
        "router the node reaches directly"
    ), problem


def test_the_resolved_network_has_every_nic_and_the_routes(lab):
    folder, site, secrets = lab
    edit_yaml(
        folder / "specs" / "tools.yaml",
        lambda d: d["network"].update(routes=[{"to": "10.20.0.0/16", "via": "10.12.0.254"}]),
    )
    network = load_standalone(site, secrets).documents["tools"]["network"]
    assert network["interfaces"] == [
        {"address": "10.11.1.62/24", "gateway": "10.11.1.1"},
        {"address": "10.12.0.62/24", "gateway": None},
    ]
    assert network["routes"] == [{"to": "10.20.0.0/16", "via": "10.12.0.254"}]
    assert (network["ip"], network["gateway"]) == ("10.11.1.62/24", "10.11.1.1")


def test_two_nodes_with_one_fqdn(lab):
    folder, site, _ = lab
    edit_yaml(folder / "specs" / "jump.yaml", lambda d: d["identity"].update(hostname="tools"))
    [problem] = lines_of(report(site))
    assert "standalone.nodes.tools.spec: the node would be named 'tools.lab.internal', like node 'jump1'" in problem


# ---------------------------------------------------------------------------------------------------- spec files
@pytest.mark.parametrize(
    "change,expected",
    [
        (lambda d: d.update(schema_version=2), "schema_version: is 2: this terravixens reads schema_version 1"),
        (lambda d: d.pop("schema_version"), "schema_version: is required: add it"),
        (lambda d: d["platform"].update(pakages=["x"]), "platform.pakages: unknown key (value a list of 1 item)"),
        (
            lambda d: d["access"]["users"].update(root={"sudo": True}),
            "access.users.root.[key]: 'root' is a system account",
        ),
        (lambda d: d["access"]["users"]["ops"].update(ssh_keys=["bad key!"]), "is not a valid ssh key name"),
        (
            lambda d: d["access"]["users"]["ops"].update(shell="bash"),  # noqa: S604 (a login shell, not a subprocess)
            "access.users.ops.shell: 'bash' is not a shell path",
        ),
        (
            lambda d: d["platform"]["services"].update(disable=["fail2ban"]),
            "service 'fail2ban' is both enabled and disabled",
        ),
        (
            lambda d: d["platform"].update(packages=["Bad Package"]),
            "platform.packages.0: 'Bad Package' is not a valid package",
        ),
        (lambda d: d.update(run={"trigger": "interval", "interval": "10"}), "run.interval: '10' is not a duration"),
        (lambda d: d.update(run={"trigger": "interval", "interval": "3d"}), "run.interval: '3d' is not a duration"),
        (lambda d: d.update(run={"trigger": "interval", "interval": "30s"}), "run.interval: '30s' is out of range"),
        (
            lambda d: d.update(run={"trigger": "boot", "interval": "5m"}),
            "interval '5m' applies to trigger 'interval' only",
        ),
        (lambda d: d.update(run={"trigger": "cron"}), "run.trigger: Input should be 'boot', 'interval' or 'manual'"),
        (lambda d: d["network"].update(gateway="10.11.1.1"), "network: gateway is set without ip"),
        (
            lambda d: d["network"].update(dns=["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]),
            "network.dns: List should have at most 3 items",
        ),
        (
            lambda d: d["identity"].update(domain="Lab_Internal"),
            "identity.domain: 'Lab_Internal' is not a valid DNS domain",
        ),
        (lambda d: d["config"].update(vm={"guest_agnt": True}), "config.vm.guest_agnt: unknown key"),
        (lambda d: d["config"].update(pve={"repository": "testing"}), "config.pve.repository: Input should be"),
    ],
    ids=[
        "schema-2",
        "no-schema",
        "unknown-key",
        "root-user",
        "key-name",
        "shell",
        "service-both",
        "package",
        "duration",
        "duration-days",
        "too-often",
        "interval-boot",
        "trigger",
        "gateway-only",
        "dns-count",
        "domain",
        "vm-key",
        "repository",
    ],
)
def test_spec_file_errors(lab, change, expected):
    folder, site, _ = lab
    path = folder / "specs" / "jump.yaml"
    edit_yaml(path, change)
    text = report(site)
    assert text.splitlines()[0].startswith(f"{path}: ") and "in the spec file" in text.splitlines()[0]
    assert any(expected in line for line in lines_of(text)), text
    # every problem is located (a missing top-level key has no line of its own)
    assert all(line.startswith("line ") or "is required" in line for line in lines_of(text))


def test_spec_duplicate_keys_name_both_lines(lab):
    folder, site, _ = lab
    path = folder / "specs" / "tools.yaml"
    path.write_text(path.read_text() + "access:\n  posture: prod\n")
    [problem] = lines_of(report(site))
    assert "access: appears twice in the same mapping (lines" in problem


def test_problems_of_several_spec_files_are_reported_together(lab):
    folder, site, _ = lab
    edit_yaml(folder / "specs" / "jump.yaml", lambda d: d.update(colour="red"))
    edit_yaml(folder / "specs" / "dns.yaml", lambda d: d.update(schema_version=3))
    text = report(site)
    assert "jump.yaml: 1 problem" in text and "dns.yaml: 1 problem" in text


def test_a_yml_file_and_a_bad_file_name(lab):
    folder, site, _ = lab
    (folder / "specs" / "extra.yml").write_text("schema_version: 1\n")
    (folder / "specs" / "Extra_Spec.yaml").write_text("schema_version: 1\n")
    text = report(site)
    assert "extra.yml: 1 problem" in text and "is named .yml: rename it extra.yaml" in text
    assert "name 'Extra_Spec' is not a DNS label" in text


def test_a_spec_file_that_is_not_a_mapping(lab):
    folder, site, _ = lab
    (folder / "specs" / "tools.yaml").write_text("- just\n- a list\n")
    assert "(top level): a spec file is a YAML mapping starting with 'schema_version: 1'" in report(site)


def test_an_oversized_spec_file(lab):
    folder, site, _ = lab
    (folder / "specs" / "tools.yaml").write_text("schema_version: 1\n" + "#" * 300_000 + "\n")
    assert "over the 262,144-byte limit for a spec file" in report(site)


# ---------------------------------------------------------------------------------------------------- postures
def test_an_unknown_posture(lab):
    folder, site, _ = lab
    edit_yaml(folder / "specs" / "tools.yaml", lambda d: d["access"].update(posture="production"))
    [problem] = lines_of(report(site))
    assert (
        "access.posture: unknown posture 'production': use one of dev, local, prod, stage or add "
        "postures/production.yaml next to the spec"
    ) in problem and problem.startswith("line ")


def test_a_site_posture_file_overrides_and_adds(lab):
    folder, site, secrets = lab
    (folder / "specs" / "postures").mkdir()
    (folder / "specs" / "postures" / "dev.yaml").write_text("schema_version: 1\nauth: site_token\n")
    (folder / "specs" / "postures" / "edge.yaml").write_text(
        "schema_version: 1\nauth: node_token\nssh: {password_authentication: false}\n"
    )
    edit_yaml(folder / "specs" / "jump.yaml", lambda d: d["access"].update(posture="edge"))
    standalone = load_standalone(site, secrets)
    assert standalone.nodes["tools"].auth == "site_token" and standalone.nodes["jump1"].auth == "node_token"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("schema_version: 1\nauth: password\n", "auth: Input should be 'network', 'site_token' or 'node_token'"),
        ("schema_version: 1\n", "auth: is required: add it"),
        ("schema_version: 1\nauth: network\nssh: {root: true}\n", "ssh.root: unknown key"),
    ],
)
def test_posture_file_errors(lab, text, expected):
    folder, site, _ = lab
    (folder / "specs" / "postures").mkdir()
    (folder / "specs" / "postures" / "dev.yaml").write_text(text)
    report_text = report(site)
    assert "dev.yaml: 1 problem in the posture file" in report_text and expected in report_text


# ---------------------------------------------------------------------------------------------------- secrets
def test_an_unknown_ssh_key(lab):
    folder, site, secrets = lab
    s.write_secrets(secrets, s.secrets_data(ssh_keys={"alice": ALICE}))
    text = report(site, secrets)
    fix = f"unknown ssh key 'bob': add it under ssh_keys in the secrets file ({secrets}) or use one of alice"
    assert text.splitlines()[0] == f"{folder / 'specs' / 'jump.yaml'}: 2 problems in the spec file"
    assert lines_of(text) == [
        f"line 9, access.users.ops.ssh_keys.1: {fix}",  # jump.yaml
        f"line 10, access.users.audit.ssh_keys.0: {fix}",
        f"line 9, access.users.ops.ssh_keys.1: {fix}",
    ]  # nested-pve.yaml


def test_a_missing_site_token(lab):
    _, site, secrets = lab
    data = s.secrets_data()
    del data["site_token"]
    s.write_secrets(secrets, data)
    [problem] = lines_of(report(site, secrets))
    assert problem.startswith("site_token: is required: node jump1 use a site_token posture")
    assert "openssl rand -base64 32" in problem


def test_a_missing_node_token(lab):
    _, site, secrets = lab
    s.write_secrets(secrets, s.secrets_data(node_tokens={"nest1": NODE_TOKENS["nest1"]}))
    assert lines_of(report(site, secrets)) == [
        (
            "line 8, node_tokens.dns1: is required: node 'dns1' uses a node_token posture; add node_tokens.dns1 "
            "(make one: openssl rand -base64 32)"
        )
    ]


def test_a_token_for_no_node(lab):
    _, site, secrets = lab
    s.write_secrets(secrets, s.secrets_data(node_tokens={**NODE_TOKENS, "dsn1": "x" * 40}))
    [problem] = lines_of(report(site, secrets))
    assert problem.startswith("line 12, node_tokens.dsn1: no standalone node 'dsn1' in the site")


def test_a_token_shared_by_two_holders(lab):
    _, site, secrets = lab
    s.write_secrets(secrets, s.secrets_data(node_tokens={**NODE_TOKENS, "dns1": SITE_TOKEN}))
    text = report(site, secrets)
    assert "node_tokens.dns1: holds the same token as site_token: a token names one holder" in text
    assert SITE_TOKEN not in text


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_secrets_file_others_can_read_is_refused(lab, mode):
    _, site, secrets = lab
    secrets.chmod(mode)
    [problem] = lines_of(report(site, secrets))
    assert problem == (
        f"(file): is accessible by group or others (mode {mode:04o}): it holds tokens; run: chmod 600 {secrets}"
    )


def test_a_private_key_in_the_secrets_file_is_never_echoed(lab):
    _, site, secrets = lab
    private = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----"
    )
    s.write_secrets(secrets, s.secrets_data(ssh_keys={"alice": private, "bob": s.BOB}))
    text = report(site, secrets)
    assert "ssh_keys.alice: holds a PRIVATE key: give the public key" in text
    assert "b3BlbnNz" not in text and "BEGIN" not in text


@pytest.mark.parametrize(
    "token",
    [
        "short",
        "has spaces in it but is long enough to pass",
        "ü" * 40,
        "quote'breaks-a-shell-that-sources-node.env-0123",
        "dollar$HOME-expands-in-a-shell-0123456789",
    ],
)
def test_a_bad_token_is_never_echoed(lab, token):
    _, site, secrets = lab
    s.write_secrets(secrets, s.secrets_data(site_token=token))
    text = report(site, secrets)
    assert "site_token: is not a usable token" in text and token not in text


def test_an_unknown_key_in_the_secrets_file_hides_its_value(lab):
    _, site, secrets = lab
    s.write_secrets(secrets, s.secrets_data(site_tokn=SITE_TOKEN))
    text = report(site, secrets)
    assert "line 12, site_tokn: unknown key: remove it" in text and SITE_TOKEN not in text


# ---------------------------------------------------------------------------------------------------- CLI
def test_spec_validate_a_file_a_folder_and_a_site(lab, capsys):
    folder, site, secrets = lab
    assert cli.main(["spec", "validate", str(folder / "specs" / "dns.yaml")]) == 0
    assert cli.main(["spec", "validate", str(folder / "specs")]) == 0
    assert cli.main(["spec", "validate", "--site", str(site), "--secrets", str(secrets)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{folder / 'specs' / 'dns.yaml'}: ok — spec 'dns', posture 'prod'",
        f"{folder / 'specs'}: ok — 4 specs, 0 posture files",
        f"{site}: ok — 4 standalone nodes, 4 specs, auth network, node_token, site_token, secrets checked ({secrets})",
    ]


def test_spec_validate_takes_a_site_file_as_its_site(lab, capsys):
    _, site, _ = lab
    assert cli.main(["spec", "validate", str(site)]) == 0
    assert capsys.readouterr().out.startswith(f"{site}: ok — 4 standalone nodes, 4 specs")


def test_spec_validate_reports_and_exits_2(lab, capsys):
    folder, _, _ = lab
    edit_yaml(folder / "specs" / "dns.yaml", lambda d: d["access"].update(posture="prd"))
    assert cli.main(["spec", "validate", str(folder / "specs" / "dns.yaml")]) == 2
    assert "unknown posture 'prd'" in capsys.readouterr().err


def test_spec_validate_needs_exactly_one_target(lab, capsys):
    folder, site, _ = lab
    assert cli.main(["spec", "validate", str(folder / "specs"), "--site", str(site)]) == 2
    assert cli.main(["spec", "validate"]) == 2
    assert "give a spec file or folder, or --site SITE" in capsys.readouterr().err
    assert cli.main(["spec", "validate", str(folder / "specs"), "--secrets", str(folder / "secrets.yaml")]) == 2
    assert "--secrets is checked against a site's nodes" in capsys.readouterr().err
    assert cli.main(["spec", "validate", str(site), "--secrets", str(folder / "secrets.yaml")]) == 0


def test_validate_checks_the_specs_of_a_site_with_standalone_nodes(lab, capsys):
    folder, site, _ = lab
    assert cli.main(["validate", str(site)]) == 0
    assert capsys.readouterr().out.strip().endswith("0 nodes, 4 standalone nodes")
    edit_yaml(folder / "specs" / "tools.yaml", lambda d: d.update(schema_version=9))
    assert cli.main(["validate", str(site)]) == 2
    assert "tools.yaml: 1 problem in the spec file" in capsys.readouterr().err


def test_schema_export_writes_the_schemas_that_accept_the_examples(tmp_path, capsys):
    import jsonschema

    assert cli.main(["schema", "export", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / f"{n}.schema.json") for n in ("site", "spec", "posture")]
    schemas = {name: json.loads((tmp_path / f"{name}.schema.json").read_text()) for name in ("site", "spec", "posture")}
    jsonschema.Draft202012Validator.check_schema(schemas["spec"])
    for path in sorted((s.ROOT / "sites" / "specs").glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schemas["spec"])
    jsonschema.validate(json.loads(json.dumps(yaml.safe_load(s.SITE.read_text()))), schemas["site"])
    jsonschema.validate({"schema_version": 1, "auth": "node_token"}, schemas["posture"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema_version": 1, "auth": "password"}, schemas["posture"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema_version": 1, "colour": "red"}, schemas["spec"])
    node_types = schemas["site"]["$defs"]["StandaloneNode"]["properties"]["type"]["enum"]
    assert node_types == ["pve", "vm", "ct", "k3s"]


def test_the_cli_and_synth_path_never_import_the_server_stack():
    import subprocess
    import sys

    code = (
        "import sys, terravixens.cli as c; from terravixens.config.loader import load_site; load_site(); "
        "c.main(['validate']); bad = [m for m in ('starlette', 'uvicorn', 'h11', 'anyio') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=s.ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
