"""The node agent: converges a standalone node to its resolved spec (issue 19, ADR 0045).

    python3 -m terravixens.agent converge --spec spec.json [--dry-run] [--json]   apply (or show) the difference
    python3 -m terravixens.agent run [--first-boot]                                fetch (spec get), then converge

    system.py    the node: a root folder walked without following links, the managers it calls (package, service,
                 user tools), one bounded runner
    accounts.py  passwd, group and login.defs: a spec user must be a regular login account on the node
    desired.py   the resolved spec (what `spec serve` answers) read into what each section wants; bad ones refused,
                 in the spec's one vocabulary (terravixens/standalone/vocabulary.py, shared with the server)
    sections.py  one class per section (hostname, users, sudo, ssh, packages, services, config, run): observe,
                 diff, apply
    units.py     the systemd units that honour the spec's `run`
    converge.py  sections in order, the JSON result
    bundle.py    the agent and what it imports as one zipapp, which push sends and first boot runs

Standard library only (plus terravixens modules that are themselves standard library only: the spec client, the
strict readers, the bounded runner, the exit code tables, the spec vocabulary): it runs on a bare guest with
nothing but python3 (tests/test_agent.py imports it in a fresh interpreter and fails on any other module).
"""
