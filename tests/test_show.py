"""`terravixens show`: the site at a glance as tables, JSON (a versioned shape validated against its committed
schema) and a mermaid graph, read from the model alone; site text never read as rich markup or mermaid syntax."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from terravixens import cli
from terravixens.config.loader import load_site, parse_site, warnings
from terravixens.config.model import Site
from terravixens.operations import show as s
from tests import json_shapes
from tests.mermaid import decoded, parse
from tests.support import EXAMPLE_SITE as DEFAULT_SITE

ROOT = Path(__file__).resolve().parent.parent
STANDALONE_SITE = ROOT / "sites" / "standalone.yaml"
# What the model lets through in free-text fields (no template sequence, no control character): quotes, brackets,
# rich markup, mermaid's comment, click and statement syntax, HTML.
HOSTILE = 'pve1"]]; click x "javascript:alert(1)" %%<b>[bold red]x[/] end'


def example() -> dict:
    return yaml.safe_load(DEFAULT_SITE.read_text())


def with_l2() -> dict:
    """The example site (one cluster on pve1 and pve2) with the standalone example's L2 nodes on pve1: a nested
    Proxmox VE host with two guests, and a VM straight on pve1."""
    data = example()
    data["standalone"] = yaml.safe_load(STANDALONE_SITE.read_text())["standalone"]
    return data


def site_of(data: dict) -> Site:
    return parse_site(copy.deepcopy(data), "<test site>")


def write(tmp_path: Path, data: dict, name: str = "site.yaml") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))  # JSON is YAML
    return str(path)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["show", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def rows(text: str, title: str) -> list[list[str]]:
    """The rows of the table titled `title` (header first), split on the column gaps (3 blanks or more)."""
    lines = text.split(f"\n{title}\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [re.split(r" {3,}", line) for line in lines]


# ------------------------------------------------------------------------------------------------------ table
def test_table_of_the_example_site(capsys):
    code, out, err = run(capsys, "--site", str(DEFAULT_SITE))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        "site homelab   proxmox https://pve1.lab.internal:8006/   state local   "
        "layers hypervisors → platform-prod → gitops-prod"
    )
    assert rows(out, "HYPERVISORS") == [
        ["NAME", "PVE NODE", "BRIDGES", "DATASTORES", "API USER"],
        ["pve1", "pve1", "vmbr1 (enp2s0; VLANs 111,120)", "vm=local-lvm images=local", "terravixens@pve"],
        ["pve2", "pve2", "vmbr1 (enp2s0; VLANs 111,120)", "vm=local-lvm images=local", "-"],
        ["pve3", "pve3", "vmbr1 (enp2s0; VLANs 111,120)", "vm=local-lvm images=local", "-"],
    ]
    assert rows(out, "CLUSTERS") == [
        ["NAME", "TALOS", "CONTRACT", "KUBERNETES", "VIP", "NODES", "LAYERS"],
        ["prod", "v1.11.5", "v1.11", "v1.34.2", "10.11.1.10 (VLAN 111)", "3 cp + 2 wk", "platform-prod gitops-prod"],
    ]
    header = ["CLUSTER", "NAME", "ROLE", "HYPERVISOR", "VM ID", "ADDRESS", "MAC", "TALOS", "KUBERNETES", "LAYER"]
    assert rows(out, "NODES") == [
        header,
        ["prod", "cp-a", "controlplane", "pve1", "1101", "10.11.1.11", "-", "v1.11.5", "v1.34.2", "platform-prod"],
        ["prod", "cp-b", "controlplane", "pve2", "1102", "10.11.1.12", "-", "v1.11.5", "v1.34.2", "platform-prod"],
        ["prod", "cp-c", "controlplane", "pve3", "1103", "10.11.1.13", "-", "v1.11.5", "v1.34.2", "platform-prod"],
        ["prod", "wk-a", "worker", "pve1", "1201", "10.11.1.21", "-", "v1.11.5", "v1.34.2", "platform-prod"],
        ["prod", "wk-b", "worker", "pve2", "1202", "10.11.1.22", "-", "v1.11.5", "v1.34.2", "platform-prod"],
    ]
    # the example's control planes are spread over its three hosts (ADR 0054): the site rules warn of nothing, and
    # show prints no WARNINGS section (a site they warn about: tests/test_failure_domains.py)
    assert warnings(load_site(DEFAULT_SITE)) == []
    assert "WARNINGS" not in out and out.rstrip("\n").endswith("STANDALONE (L2): none")
    # a pipe gets plain text: no escape sequence, no trailing blank, the same bytes every time
    assert "\x1b" not in out and all(line == line.rstrip() for line in out.splitlines())
    assert run(capsys, "--site", str(DEFAULT_SITE))[1] == out


def test_table_follows_the_model_not_the_file_order(tmp_path, capsys):
    """Routable address first (the address chain), a pinned MAC shown, a hostname shown next to the key, a contract
    behind talos_version; nodes sorted by name whatever the file's order."""
    data = example()
    cluster = data["clusters"]["prod"]
    cluster["talos_version"], cluster["config_contract"] = "v1.12.0", "v1.11"  # mid-upgrade: contract kept
    cluster["workers"] = dict(reversed(list(cluster["workers"].items())))
    wk_a = cluster["workers"]["wk-a"]
    wk_a["mac_address"] = "bc:24:11:00:00:21"
    wk_a["hostname"] = "worker-a"
    wk_a["networks"]["routable"] = {"vlan": 120, "address": "10.12.0.121/24"}
    code, out, err = run(capsys, "--site", write(tmp_path, data))
    assert (code, err) == (0, "")
    nodes = rows(out, "NODES")
    assert [row[1] for row in nodes[1:]] == ["cp-a", "cp-b", "cp-c", "wk-a (worker-a)", "wk-b"]
    assert nodes[4][5:7] == ["10.12.0.121", "BC:24:11:00:00:21"]
    assert rows(out, "CLUSTERS")[1][1:3] == ["v1.12.0", "v1.11"] and nodes[1][7] == "v1.12.0"


def test_table_of_a_site_with_l2_nodes_draws_the_parent_tree(tmp_path, capsys):
    code, out, _ = run(capsys, "--site", write(tmp_path, with_l2()))
    assert code == 0
    assert "layers hypervisors → platform-prod → gitops-prod → standalone → standalone-nest1" in out.splitlines()[0]
    tree = out.split("STANDALONE (L2): host → guests\n", 1)[1].split("\nWARNINGS\n", 1)[0].splitlines()
    assert tree == [
        "pve1  hypervisor",
        "├── nest1  pve  id 3001  10.11.1.60  spec nested-pve  4 cpu 12288 MiB 100 GiB  layer standalone",
        "│   ├── dns1  ct  id 101  10.11.1.53  spec dns  1 cpu 1024 MiB 10 GiB  layer standalone-nest1",
        "│   └── jump1  vm  id 102  10.11.1.61  spec jump  1 cpu 2048 MiB 20 GiB  layer standalone-nest1",
        "└── tools  vm  id 3002  10.11.1.62  spec tools  2 cpu 4096 MiB 32 GiB  layer standalone",
    ]
    # pve2 has no guests: no tree of its own
    assert "pve2  hypervisor" not in out


def test_a_site_without_clusters_says_so(capsys):
    code, out, _ = run(capsys, "--site", str(STANDALONE_SITE))
    assert code == 0 and "\nCLUSTERS: none\n" in out and "NODES" not in out and "├── nest1" in out


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    shown = s.view(site_of(example()))
    colour = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|38;)[0-9;]*m")  # a foreground colour, any form

    terminal = Terminal()
    s.render_table(shown, terminal, {})
    assert colour.search(terminal.getvalue()), "a terminal gets colour"
    without = Terminal()
    s.render_table(shown, without, {"NO_COLOR": "1"})
    assert not colour.search(without.getvalue()) and "controlplane" in without.getvalue()
    empty = Terminal()  # no-color.org: an empty NO_COLOR does not count
    s.render_table(shown, empty, {"NO_COLOR": ""})
    assert colour.search(empty.getvalue())
    pipe = io.StringIO()
    s.render_table(shown, pipe, {})
    assert "\x1b" not in pipe.getvalue()
    # what the terminal shows is the pipe's text once the escapes are gone
    plain = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert [line.rstrip() for line in plain.splitlines()] == pipe.getvalue().splitlines()


def test_pipe_width_is_fixed_whatever_columns_says(monkeypatch):
    shown = s.view(site_of(with_l2()))
    outputs = []
    for columns in ("40", "300"):
        monkeypatch.setenv("COLUMNS", columns)
        out = io.StringIO()
        s.render_table(shown, out)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
    assert max(len(line) for line in outputs[0].splitlines()) <= s.PIPE_WIDTH


# ------------------------------------------------------------------------------------------------------ json
def test_json_is_the_versioned_shape_its_schema_describes(tmp_path, capsys):
    schema = json.loads((ROOT / "terravixens" / "operations" / "show.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for site in (str(DEFAULT_SITE), write(tmp_path, with_l2()), str(STANDALONE_SITE)):
        code, out, _ = run(capsys, "--site", site, "--format", "json")
        assert code == 0
        document = json.loads(out)
        jsonschema.validate(document, schema)
        assert document["schema"] == "terravixens/show/v1"
    guests = {guest["name"]: guest for guest in document["standalone"]}
    assert guests["dns1"] | {"cores": 0} == {
        "name": "dns1",
        "type": "ct",
        "parent": "nest1",
        "hypervisor": "pve1",
        "chain": ["pve1", "nest1"],
        "tier": 2,
        "vm_id": 101,
        "address": "10.11.1.53",
        "spec": "dns",
        "layer": "standalone-nest1",
        "cores": 0,
        "memory_mib": 1024,
        "disk_gib": 10,
    }
    assert [layer["name"] for layer in document["layers"]] == ["hypervisors", "standalone", "standalone-nest1"]
    assert document["layers"][2] == {
        "name": "standalone-nest1",
        "kind": "standalone",
        "level": "L2",
        "after": "standalone",
        "cluster": None,
    }


def test_the_schema_is_strict_so_the_test_above_can_fail():
    """A field the code adds without the schema (or a renamed one) fails validation: the schema is not decorative."""
    document = s.to_json(s.view(site_of(example())))
    jsonschema.validate(document, s.schema())
    for broken in (
        document | {"extra": 1},
        document | {"schema": "terravixens/show/v2"},
        document | {"nodes": [document["nodes"][0] | {"ip": "10.0.0.1"}]},
        document | {"nodes": [{k: v for k, v in document["nodes"][0].items() if k != "vm_id"}]},
        document | {"nodes": [document["nodes"][0] | {"role": "master"}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, s.schema())


def test_json_of_the_example_site_node(capsys):
    code, out, _ = run(capsys, "--site", str(DEFAULT_SITE), "--format", "json")
    document = json.loads(out)
    assert code == 0 and document["nodes"][0] == {
        "cluster": "prod",
        "name": "cp-a",
        "hostname": "cp-a",
        "role": "controlplane",
        "hypervisor": "pve1",
        "vm_id": 1101,
        "address": "10.11.1.11",
        "mac_address": None,
        "talos_version": "v1.11.5",
        "kubernetes_version": "v1.34.2",
        "layer": "platform-prod",
        "cpu": 4,
        "memory_mib": 8192,
        "disk_gib": 40,
    }
    assert document["clusters"][0]["layers"] == ["platform-prod", "gitops-prod"]
    assert document["hypervisors"][0]["bridges"] == [
        {"name": "vmbr1", "ports": ["enp2s0"], "vlan_aware": True, "vlans": [111, 120]}
    ]


# ------------------------------------------------------------------------------------------------------ mermaid
def test_mermaid_of_a_site_with_l2(tmp_path, capsys):
    code, out, _ = run(capsys, "--site", write(tmp_path, with_l2()), "--format", "mermaid")
    assert code == 0
    labels, edges, classes = parse(out)
    arrows = {(a, b) for a, kind, b in edges if kind == "-->"}
    dotted = [(a, b) for a, kind, b in edges if kind == "-.->"]
    # hypervisors → nodes → layers
    assert {("hv_pve1", "node_prod_cp_a"), ("node_prod_cp_a", "layer_platform_prod")} <= arrows
    assert {("hv_pve2", "node_prod_cp_b"), ("hv_pve1", "layer_hypervisors")} <= arrows
    # the L2 parent tree, each guest to the layer creating it
    assert {("hv_pve1", "sa_nest1"), ("sa_nest1", "sa_dns1"), ("sa_nest1", "sa_jump1"), ("hv_pve1", "sa_tools")} <= (
        arrows
    )
    assert {("sa_dns1", "layer_standalone_nest1"), ("sa_nest1", "layer_standalone")} <= arrows
    # apply order, dotted
    assert dotted == [
        ("layer_hypervisors", "layer_platform_prod"),
        ("layer_platform_prod", "layer_gitops_prod"),
        ("layer_hypervisors", "layer_standalone"),
        ("layer_standalone", "layer_standalone_nest1"),
    ]
    assert len(labels) == 3 + 5 + 4 + 5  # hypervisors, cluster nodes, guests, layers
    assert decoded(labels["node_prod_wk_a"]) == "wk-a<br/>worker, id 1201, 10.11.1.21"
    layers = {i for i in labels if i.startswith("layer_")}
    assert classes == {"hypervisor": {"hv_pve1", "hv_pve2", "hv_pve3"}, "layer": layers}


def test_hostile_site_text_is_escaped_in_every_format(tmp_path, capsys):
    data = example()
    data["hypervisors"]["pve1"]["node_name"] = HOSTILE
    data["hypervisors"]["pve1"]["bridges"]['vmbr9"[/]'] = {"ports": ["eth[0]"]}
    data["hypervisors"]["pve1"]["datastores"] = {"vm": "[red]disks", "images": "local"}
    site = write(tmp_path, data)

    _, out, _ = run(capsys, "--site", site)
    hypervisor = rows(out, "HYPERVISORS")[1]
    assert hypervisor[1] == HOSTILE  # printed as written: rich read none of it as markup
    assert 'vmbr9"[/] (eth[0]; VLAN-aware)' in hypervisor[2] and hypervisor[3] == "vm=[red]disks images=local"

    _, out, _ = run(capsys, "--site", site, "--format", "mermaid")
    labels, _, _ = parse(out)  # still parses: the text ended no label and started no statement
    assert decoded(labels["hv_pve1"]) == f"pve1 ({HOSTILE})"
    assert not set(re.sub(r"#\d+;", "", labels["hv_pve1"])) & set('"[]()<>;%{}|#\n')

    _, out, _ = run(capsys, "--site", site, "--format", "json")
    assert json.loads(out)["hypervisors"][0]["node_name"] == HOSTILE


def test_mermaid_ids_are_safe_and_distinct_whatever_the_names():
    """Names the model accepts but mermaid dislikes: a keyword (`end`), names that clean to the same id."""
    shown = s.view(site_of(example()))
    node = shown.nodes[0]
    nodes = tuple(
        s.NodeView(**{**node.__dict__, "cluster": cluster, "name": name, "hostname": name})
        for cluster, name in (("a-b", "c"), ("a", "b-c"), ("a", "end"), ("graph", "x.y"))
    )
    text = s.mermaid(s.SiteView(**{**shown.__dict__, "nodes": nodes}))
    labels, edges, _ = parse(text)
    ids = [i for i in labels if i.startswith("node_")]
    assert ids == ["node_a_b_c", "node_a_b_c_2", "node_a_end", "node_graph_x_y"]
    assert [decoded(labels[i]).split("<br/>")[0] for i in ids] == ["c", "b-c", "end", "x.y"]
    assert sum(1 for a, _, _ in edges if a in ids) == 4  # each to its layer, none lost to a collision


def test_label_escapes_everything_outside_the_safe_set():
    assert s.label("cp-a 10.0.0.1/24, id 7") == "cp-a 10.0.0.1/24, id 7"
    assert s.label('a"b') == "a#34;b" and s.label("<br/>") == "#60;br/#62;" and s.label("%%") == "#37;#37;"
    assert decoded(s.label(HOSTILE)) == HOSTILE


def test_highlight_marks_only_what_it_names():
    shown = s.view(site_of(example()))
    text = s.mermaid(
        shown,
        {
            s.node_key("prod", "wk-a"): "touched",
            s.node_key("prod", "cp-a"): "flagged",
            s.layer_key("platform-prod"): "touched",
            s.node_key("prod", "gone"): "touched",  # not in the site: nothing drawn for it
        },
    )
    _, _, classes = parse(text)
    assert classes["touched"] == {"node_prod_wk_a", "layer_platform_prod"}
    assert classes["flagged"] == {"node_prod_cp_a"}
    assert "touched" not in parse(s.mermaid(shown))[2]


# ------------------------------------------------------------------------------------------------------ errors
def test_a_bad_site_is_exit_2_with_the_located_problem(tmp_path, capsys):
    data = example()
    data["clusters"]["prod"]["workers"]["wk-a"]["vm_id"] = 1101
    code, out, err = run(capsys, "--site", write(tmp_path, data, "bad.yaml"))
    assert (code, out) == (2, "")
    assert f"{tmp_path / 'bad.yaml'}: 1 problem in the site file" in err
    assert "clusters.prod.workers.wk-a.vm_id: VM id 1101 is already used by clusters.prod.control_planes.cp-a" in err
    (tmp_path / "typo.yaml").write_text(DEFAULT_SITE.read_text().replace("    install_disk:", "    install_dsk:"))
    code, out, err = run(capsys, "--site", str(tmp_path / "typo.yaml"), "--format", "json")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert re.search(r"line \d+, clusters\.prod\.install_dsk: unknown key", err)


def test_an_unknown_format_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["show", "--format", "yaml"])
    assert done.value.code == 2 and "invalid choice: 'yaml'" in capsys.readouterr().err


def test_the_command_line_offers_exactly_the_formats_show_renders():
    action = next(a for a in cli.parser()._subparsers._group_actions[0].choices["show"]._actions if a.dest == "format")
    assert tuple(action.choices) == s.FORMATS and action.default == "table"


# ------------------------------------------------------------------------------------------------------ docs
def documented_shows() -> list[tuple[str, list[str]]]:
    """(command, the lines docs/commands.md shows it printing) for each `terravixens show` pasted there."""
    runs: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", (ROOT / "docs" / "commands.md").read_text(), re.S):
        lines = block.splitlines()
        if lines and lines[0].startswith("$ bin/terravixens show"):
            runs.append((lines[0][2:], lines[1:]))
    return runs


@pytest.mark.parametrize("command", [command for command, _ in documented_shows()])
def test_the_docs_paste_what_show_prints_today(command, capsys, monkeypatch):
    """The pasted outputs are today's: a change to what show prints updates docs/commands.md in the same commit."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("TERRAVIXENS_SITE", raising=False)
    shown = dict(documented_shows())[command]
    assert cli.main(command.split()[1:]) == 0
    assert capsys.readouterr().out.splitlines() == shown


def test_every_format_is_pasted_in_the_docs():
    commands = [command for command, _ in documented_shows()]
    assert commands == [
        "bin/terravixens show",
        "bin/terravixens show --site sites/standalone.yaml",
        "bin/terravixens show --site docs/examples/spread-two-hosts.yaml",
        "bin/terravixens show --format json",
        "bin/terravixens show --format mermaid",
    ]


def test_json_flag_is_format_json(capsys):
    """`--json`, as on every command that speaks JSON (docs/json-output.md), prints the same document."""
    _, by_format, _ = run(capsys, "--site", str(DEFAULT_SITE), "--format", "json")
    code, by_flag, _ = run(capsys, "--site", str(DEFAULT_SITE), "--json")
    assert code == 0 and json.loads(by_flag) == json.loads(by_format)
    jsonschema.validate(json.loads(by_flag), json_shapes.shape("show"))
