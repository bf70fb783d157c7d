"""`terravixens spec push NODE` and `terravixens spec handoff NODE`: the driver's side of the push and hybrid models
(ADR 0019, ADR 0045), over SSH through the bounded runner.

    push     the driver resolves the node's spec (site, specs, secrets file), sends the agent bundle and the spec
             over SSH, the agent converges and answers its JSON result; the node needs no spec server nor token
    handoff  the driver only triggers: the node's own agent fetches its spec from the spec server with its own
             node.env and converges (what its timer does), and the driver collects the JSON result

Two SSH calls for push (install the bundle, then converge with the spec on stdin), one for handoff; each has a
deadline and ends with its process group. `ssh` runs in batch mode with strict host key checking: a node whose host
key is not in known_hosts is refused, never trusted on first use (a push carries ssh keys and sudo rules).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terravixens.agent import bundle
from terravixens.agent.units import BUNDLE
from terravixens.arguments import Definition, seconds, site_option
from terravixens.config.loader import SiteError
from terravixens.exitcodes import ExitCode, codes
from terravixens.runner import Ran, run
from terravixens.standalone.catalog import CatalogError
from terravixens.standalone.resolve import load_standalone
from terravixens.standalone.secrets import SECRETS_ENV

AGENT = f"PYTHONPATH={BUNDLE} python3 -m terravixens.agent"
INSTALL = f"umask 022 && mkdir -p {Path(BUNDLE).parent} && base64 -d > {BUNDLE}.new && mv {BUNDLE}.new {BUNDLE}"
HANDOFF = f"{AGENT} run --json --record /var/lib/terravixens/last-run.json"
CONVERGE = f"{AGENT} converge --spec - --json"


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int = 22
    user: str = "root"
    identity: Path | None = None
    known_hosts: Path | None = None
    timeout: float = 900.0

    def argv(self, remote: str) -> list[str]:
        argv = ["ssh", "-p", str(self.port), "-l", self.user, "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]
        argv += ["-o", "StrictHostKeyChecking=yes"]
        if self.known_hosts is not None:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.identity is not None:
            argv += ["-i", str(self.identity), "-o", "IdentitiesOnly=yes"]
        return [*argv, "--", self.host, remote]


@dataclass(frozen=True)
class Outcome:
    """What the agent answered (its JSON result), or why there is none (one line)."""

    result: dict[str, Any] | None
    failure: str = ""

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.get("ok") is True and not self.failure


def _why(ran: Ran) -> str:
    """ssh's own failures (exit 255) end with the line that says why (e.g. 'Host key verification failed.') after a
    banner; the runner's reason shows the start of stderr."""
    last = [line for line in ran.stderr.splitlines() if line.strip()][-1:] if ran.returncode == 255 else []
    return f"ssh exit 255: {last[0].strip()}" if last else ran.reason


def _answer(ran: Ran, what: str) -> Outcome:
    text = ran.stdout.strip().splitlines()[-1] if ran.stdout.strip() else ""
    try:
        result = json.loads(text) if text.startswith("{") else None
    except ValueError:
        result = None
    if result is None:
        return Outcome(None, f"{what}: no JSON result ({_why(ran) or 'the agent printed none'})")
    if not isinstance(result, dict) or result.get("schema_version") != 1:
        return Outcome(None, f"{what}: the answer is not an agent result: update terravixens on the node")
    return Outcome(result, "" if ran.ok or result.get("ok") is False else f"{what}: {_why(ran)}")


def push(target: SshTarget, document: dict[str, Any], dry_run: bool = False) -> Outcome:
    encoded = base64.b64encode(bundle.build()).decode()
    installed = run(target.argv(INSTALL), timeout=target.timeout, input=encoded, label="ssh (install the agent)")
    if not installed.ok:
        return Outcome(None, f"installing the agent on {target.host} failed: {_why(installed)}")
    remote = CONVERGE + (" --dry-run" if dry_run else "")
    converged = run(target.argv(remote), timeout=target.timeout, input=json.dumps(document), label="ssh (agent)")
    return _answer(converged, f"the agent on {target.host}")


def handoff(target: SshTarget, dry_run: bool = False) -> Outcome:
    remote = HANDOFF + (" --dry-run" if dry_run else "")
    ran = run(target.argv(remote), timeout=target.timeout, label="ssh (agent run)")
    return _answer(ran, f"the agent on {target.host}")


def lines(node: str, verb: str, outcome: Outcome) -> list[str]:
    """One line per change, then one line: what is done and what is not."""
    if outcome.result is None:
        return [f"spec {verb} {node}: not done — {outcome.failure}"]
    result = outcome.result
    out = [f"{node}: {s['name']}: {change}" for s in result["sections"] for change in s["changes"]]
    out += [f"{node}: {s['name']}: FAILED: {s['failed']}" for s in result["sections"] if s["failed"]]
    failed = [s["name"] for s in result["sections"] if s["failed"]]
    mode = "would change" if result.get("mode") == "dry-run" else "changed"
    summary = f"spec {verb} {node}: {mode} {result['changed']} item(s) in {result['seconds']} s on the node"
    if failed:
        summary += f"; failed: {', '.join(failed)} (the other sections are applied)"
    elif outcome.failure:
        summary += f"; {outcome.failure}"
    elif result["changed"] == 0:
        summary = f"spec {verb} {node}: in line with its spec, nothing to do"
    return [*out, summary]


# ------------------------------------------------------------------------------------------------- command line
AGENT_FAILED = (
    "ssh or the agent failed, or a section failed on the node (the last line says which; the others are applied)"
)


def push_arguments(parser: argparse.ArgumentParser, secrets: bool = True) -> None:
    parser.add_argument("node", help="the standalone node's name")
    site_option(parser, "the site file", required=True)
    if secrets:
        parser.add_argument("--secrets", help=f"the secrets file (default ${SECRETS_ENV}): the users' ssh keys")
    parser.add_argument("--address", help="where to reach the node (default: its first address in the site file)")
    parser.add_argument("--port", type=int, default=22, help="its SSH port (default 22)")
    parser.add_argument("--user", default="root", help="the SSH user (default root)")
    parser.add_argument("--identity", help="the SSH private key (default: ssh's own)")
    parser.add_argument("--known-hosts", help="a known_hosts file (default: ssh's own; unknown host keys are refused)")
    parser.add_argument(
        "--timeout", type=seconds(1.0), default=900.0, help="seconds for each SSH call, up to 86400 (default 900)"
    )
    parser.add_argument("--dry-run", action="store_true", help="the agent prints what it would change")
    parser.add_argument("--json", action="store_true", help="print the agent's JSON result only")


def handoff_arguments(parser: argparse.ArgumentParser) -> None:
    push_arguments(parser, secrets=False)


def _target(args: argparse.Namespace) -> tuple[dict[str, Any], SshTarget] | int:
    """The node's resolved spec and its SSH target (--address, or the node's first address in the site file); or
    BAD_INPUT, the problem printed."""
    try:
        standalone = load_standalone(args.site, getattr(args, "secrets", None) or os.environ.get(SECRETS_ENV))
    except (SiteError, CatalogError) as error:
        print(error, file=sys.stderr)
        return ExitCode.BAD_INPUT
    node = standalone.nodes.get(args.node)
    if node is None:
        names = ", ".join(sorted(standalone.nodes))
        print(f"spec: {args.node!r} is not a standalone node of {args.site}: use one of {names}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    host = args.address or node.placed.nics[0].address.split("/")[0]
    known = Path(args.known_hosts) if args.known_hosts else None
    identity = Path(args.identity) if args.identity else None
    target = SshTarget(host, args.port, args.user, identity, known, args.timeout)
    return standalone.documents.get(args.node) or {}, target


def _shown(args: argparse.Namespace, verb: str, outcome: Outcome) -> int:
    if args.json and outcome.result is not None:
        print(json.dumps(outcome.result))
    else:
        print("\n".join(lines(args.node, verb, outcome)))
    return ExitCode.OK if outcome.ok else ExitCode.FAILED


def push_command(args: argparse.Namespace) -> int:
    found = _target(args)
    if isinstance(found, int):
        return found
    document, target = found
    return _shown(args, "push", push(target, document, dry_run=args.dry_run))


def handoff_command(args: argparse.Namespace) -> int:
    found = _target(args)
    if isinstance(found, int):
        return found
    return _shown(args, "handoff", handoff(found[1], dry_run=args.dry_run))


SPEC_PUSH = Definition(
    push_arguments,
    push_command,
    codes(
        ExitCode.OK,
        (ExitCode.BAD_INPUT, "site, specs, secrets or node name unusable: nothing sent"),
        (ExitCode.FAILED, AGENT_FAILED),
    ),
    examples=(
        "terravixens spec push dns1 --site sites/standalone.yaml --secrets secrets.yaml",
        "terravixens spec push dns1 --site sites/standalone.yaml --dry-run",
    ),
)
SPEC_HANDOFF = Definition(
    handoff_arguments,
    handoff_command,
    codes(
        ExitCode.OK,
        (ExitCode.BAD_INPUT, "site or node name unusable: nothing sent"),
        (ExitCode.FAILED, AGENT_FAILED),
    ),
    examples=("terravixens spec handoff dns1 --site sites/standalone.yaml --json",),
)
