"""The spec's `run`, as systemd units: each start fetches the spec, then converges (`python3 -m terravixens.agent run`).

    interval  terravixens-agent.timer (enabled): 2 minutes after boot, then every `interval` after the last run
              ended, with a random delay of a tenth of it (at most 5 minutes) so nodes created together do not
              pull together
    boot      terravixens-agent.service enabled in multi-user.target: once per boot
    manual    the service only: `systemctl start terravixens-agent`, or `terravixens spec handoff` from the driver

The service is oneshot and reads nothing at render time that can change between runs: the token, the server and
the posture are read again by each run (node.env and the spec), so a rotation or a posture change needs no new unit.
"""

from __future__ import annotations

from terravixens.standalone.vocabulary import interval_seconds

SERVICE = "terravixens-agent.service"
TIMER = "terravixens-agent.timer"
UNIT_DIR = "/etc/systemd/system"
BUNDLE = "/usr/local/lib/terravixens/agent.pyz"
RECORD = "/var/lib/terravixens/last-run.json"


def service(trigger: str, interval: str | None) -> str:
    install = "\n[Install]\nWantedBy=multi-user.target\n" if trigger == "boot" else ""
    how = f"every {interval}" if trigger == "interval" else f"trigger {trigger}"
    return (
        "# terravixens: rendered by the agent from the spec's run (docs/standalone.md); edits are replaced\n"
        "[Unit]\n"
        f"Description=terravixens agent: fetch this node's spec, then converge ({how})\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"Environment=PYTHONPATH={BUNDLE}\n"
        f"ExecStart=/usr/bin/python3 -m terravixens.agent run --json --record {RECORD}\n"
        "TimeoutStartSec=45min\n"
        f"{install}"
    )


def timer(interval: str) -> str:
    jitter = min(300, interval_seconds(interval) // 10)
    return (
        "# terravixens: rendered by the agent from the spec's run (docs/standalone.md); edits are replaced\n"
        "[Unit]\n"
        f"Description=terravixens agent every {interval}\n"
        "\n"
        "[Timer]\n"
        "OnBootSec=2min\n"
        f"OnUnitInactiveSec={interval}\n"
        f"RandomizedDelaySec={jitter}s\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )
