"""`terravixens remove-dead-member CLUSTER NODE`: a control plane that died cannot leave etcd by itself, and the
reset its apply would run on destroy cannot reach it. Removing its etcd member cannot be undone, so this asks and
waits before it acts, and checks everything else first:

1. the typed confirmation `SITE/CLUSTER/NODE` (or `--confirm` for automation); no terminal and no --confirm: nothing
   is done (exit 3);
2. synth: a safety rule that stops it stops the command before anything is called (exit 1);
3. NODE must stay silent over a period: `--probes` probes (`talosctl version` with a short deadline) spread over
   `--probe-window` — one reboot or network blip must not take a live control plane out of etcd. One answer refuses
   (a live node leaves etcd gracefully through the normal removal: take it out of the site file and deploy). A
   probe that fails for another reason than silence (a certificate, a missing talosctl) cannot prove silence either;
4. a healthy control plane answers `talosctl etcd members`, and NODE's member id is found there (by hostname);
5. Terraform's state step is checked: init, `state list` — the apply address present or the reason it is not —,
   the kubeconfig output read; then the state is backed up and verified (when the apply is in it);
6. `before_irreversible` (a hook: `terravixens remove-dead-member` puts snapshot_before_removal there, a fresh,
   verified etcd snapshot through a control plane other than the dead one, or the operator's --no-snapshot
   reason), then the irreversible step: `talosctl etcd remove-member <id>` through the healthy control plane, read
   back with `etcd members`;
7. NODE's Kubernetes Node object deleted (kubectl, the platform layer's kubeconfig);
8. `terraform state rm` of NODE's configuration apply, so that no reset is attempted;
9. the operator then takes NODE out of the site file (adding a replacement keeps the count odd) and runs
   `terravixens deploy platform-CLUSTER`: its VM is deleted, nothing else is touched.

talosctl's talosconfig is the operator's, or (`talosconfig_from_layer`) the platform layer's output, read right
after synth (the layer initialised first) into a private file removed afterwards: the unit `talosconfig`.

Every talosctl, kubectl and terraform call is bounded (terravixens.runner). Steps 2 to 8 are the units of the
console's journal (UNITS), so a stop or an interrupt ends with one line saying what is done and what is not; a
remove-member whose call hung or was stopped is said to be "not known" there, with what to check.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from terravixens.arguments import (
    Definition,
    duration,
    no_snapshot_option,
    site_option,
    talosconfig_option,
    talosctl_option,
    whole,
)
from terravixens.config.addressing import node_address
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.operations.backup import Backup, backup_state
from terravixens.operations.console import Console
from terravixens.operations.etcd import TALOSCONFIG_UNIT, SnapshotPolicy, fresh_snapshot, platform_talosconfig
from terravixens.operations.kube import Kubectl, delete_nodes, kubeconfig_of
from terravixens.operations.outcome import OperationError
from terravixens.operations.steps import apply_address, state_addresses
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Call, Member, Talosctl, members

# How talosctl (through apid, gRPC) says the node could not be reached: nothing else counts as silence — above all
# not `code = Unavailable` alone, which a TLS handshake failure (a wrong talosconfig) also carries.
SILENCE = re.compile(
    r"connect: (connection refused|no route to host|network is unreachable|host is down)|"
    r"i/o timeout|context deadline exceeded|code = DeadlineExceeded|connection reset by peer",
    re.I,
)
# The journal's units, in order (the confirmation comes first and says itself that nothing was done).
SYNTH, PROBE, MEMBERS, STATE, BACKUP, REMOVAL, NODE, FORGET = UNITS = (
    "synth",
    "probe",
    "etcd members",
    "state check",
    "backup",
    "etcd removal",
    "Node deletion",
    "forget the apply",
)
UNKNOWN = "list the members (talosctl etcd members) and run the same command again"


@dataclass(frozen=True)
class Irreversible:
    """What is about to be done that cannot be undone, handed to `before_irreversible` (it may raise an
    OperationError to stop with nothing changed): the etcd member of `node` removed through `through`."""

    cluster: str
    node: str
    member_id: str
    through: str
    through_address: str
    talosctl: Talosctl
    console: Console


@dataclass(frozen=True)
class DeadMemberOptions:
    confirm: str | None = None
    force: bool = False
    probes: int = 4
    probe_window: float = 60
    synth: bool = True
    # Called right before `etcd remove-member`: the place for a fresh, verified etcd snapshot (snapshot_before_removal).
    before_irreversible: Callable[[Irreversible], None] | None = None
    # The talosctl given carries a placeholder: its talosconfig is the platform layer's output (read after synth).
    talosconfig_from_layer: bool = False
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)


def snapshot_before_removal(ws: Workspace, policy: SnapshotPolicy | None = None) -> Callable[[Irreversible], None]:
    """The hook `terravixens remove-dead-member` runs before the removal: a fresh, verified etcd snapshot through a
    control plane other than the dead one (it is tried last: avoid), or the operator's --no-snapshot reason said in
    its place. No snapshot is a BACKUP_FAILED stop with etcd untouched."""

    def take(what: Irreversible) -> None:
        fresh_snapshot(
            ws, what.cluster, what.talosctl, what.console, f"the removal of {what.node}", policy, avoid=[what.node]
        )

    return take


def member_id(listing: str, hostname: str) -> str | None:
    """The member id of `hostname` in `talosctl etcd members` output (NODE ID HOSTNAME PEER URLS CLIENT URLS
    LEARNER)."""
    found = [member for member in members(listing) if member.hostname == hostname]
    return found[0].id if found else None


def silent(answer: Call) -> bool:
    """Did the probe meet silence? A deadline passed, or talosctl's own report of an unreachable node."""
    return answer.timed_out or (
        answer.returncode not in (0, None) and bool(SILENCE.search(answer.stderr or answer.reason))
    )


def confirmation(console: Console, expected: str, given: str | None, dead: str) -> None:
    answer = (
        given
        if given is not None
        else console.ask(
            f"This removes {dead} from etcd for good (after checking it stays silent and that Terraform can forget its "
            f"apply): type {expected} to confirm: "
        )
    )
    if answer is None:
        raise OperationError(
            f"no terminal to confirm on: pass --confirm {expected}; nothing was done", ExitCode.DECLINED
        )
    if answer.strip() != expected:
        raise OperationError(
            f"confirmation {answer.strip()!r} is not {expected!r}: nothing was done", ExitCode.DECLINED
        )


def probe_silence(
    talosctl: Talosctl, dead: str, address: str, options: DeadMemberOptions, console: Console, layer: str
) -> str:
    """`options.probes` probes evenly over `options.probe_window` seconds (the first at once, the last at the end);
    one answer refuses, unless --force. Returns what the probes found, for the journal."""
    started = time.monotonic()
    count, window = options.probes, options.probe_window
    console.step(
        layer, "probe", f"{dead} ({address}): {count} probes (talosctl version) over {window:g}s; one answer refuses"
    )
    for number in range(1, count + 1):
        wait = started + window * (number - 1) / max(1, count - 1) - time.monotonic()
        if wait > 0:
            options.sleep(wait)
        answer = talosctl.probe(address)
        at = time.monotonic() - started
        if answer.ok:
            if options.force:
                console.step(
                    layer,
                    "probe",
                    f"{dead} ({address}) answered probe {number} of {count} at {at:.0f}s; --force: going on",
                )
                return f"answered probe {number} of {count}; --force"
            raise OperationError(
                f"{dead} ({address}) answered probe {number} of {count} (at {at:.0f}s of {window:g}s): it is alive. "
                f"Remove it the normal way (take it out of the site file and deploy; its reset leaves etcd "
                f"gracefully); if its etcd is broken while Talos answers, pass --force; nothing was done",
                ExitCode.REFUSED,
            )
        if answer.returncode is None and not answer.timed_out:
            raise OperationError(f"probe {number} of {count}: {answer.reason}; nothing was done", ExitCode.FAILED)
        if silent(answer):
            console.step(layer, "probe", f"{number} of {count} at {at:.0f}s: no answer")
        elif not options.force:
            raise OperationError(
                f"probe {number} of {count}: talosctl version failed for another reason than silence "
                f"({answer.reason}): that does not prove {dead} is dead; check --talosconfig and --talosctl; "
                f"nothing was done",
                ExitCode.REFUSED,
            )
    console.step(layer, "probe", f"{dead} ({address}) probed {count} times over {window:g}s: no answer")
    return f"silent over {window:g}s"


def healthy_member_list(
    talosctl: Talosctl, cluster_name: str, dead: str, address: dict[str, str], console: Console, layer: str
) -> tuple[str, list[Member]]:
    """The first other control plane that answers `talosctl etcd members`, and the members it lists. When none
    does: a talosctl that hung or cannot run is a stop (exit 4); answers that all fail mean etcd lost quorum."""
    failures: list[Call] = []
    for name in sorted(set(address) - {dead}):
        answer = talosctl.etcd_members(address[name])
        if answer.ok:
            return name, members(answer.stdout)
        failures.append(answer)
        console.step(
            layer, "etcd", f"{name} ({address[name]}) cannot list members ({answer.reason[:200]}): trying the next one"
        )
    stuck = [answer for answer in failures if answer.returncode is None]
    if stuck:
        raise OperationError(f"{stuck[0].reason}; nothing was done", ExitCode.FAILED)
    raise OperationError(
        f"no control plane of {cluster_name} answers `talosctl etcd members`: etcd has lost quorum; "
        f"restore etcd from a snapshot (talosctl bootstrap --recover-from); nothing was done",
        ExitCode.REFUSED,
    )


def remove_dead_member(
    ws: Workspace,
    cluster_name: str,
    dead: str,
    tf: Terraform,
    talosctl: Talosctl,
    kubectl: Kubectl | None = None,
    console: Console | None = None,
    options: DeadMemberOptions | None = None,
) -> int:
    console = console or Console()
    kubectl = kubectl or Kubectl()
    options = options or DeadMemberOptions()
    cluster = ws.site.clusters.get(cluster_name)
    if cluster is None:
        raise OperationError(
            f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}", ExitCode.BAD_INPUT
        )
    if dead not in cluster.control_planes:
        raise OperationError(
            f"{dead!r} is not a control plane of {cluster_name} in the site file (control planes: "
            f"{', '.join(sorted(cluster.control_planes))}); keep it in the site until its member is "
            f"removed",
            ExitCode.BAD_INPUT,
        )
    address = {
        name: node_address(node.networks, cluster.management_vlan) for name, node in cluster.control_planes.items()
    }
    hostname = cluster.control_planes[dead].hostname or dead
    confirmation(console, f"{ws.site.site}/{cluster_name}/{dead}", options.confirm, dead)

    journal = console.journal
    units = [*UNITS[:1], *([TALOSCONFIG_UNIT] if options.talosconfig_from_layer else []), *UNITS[1:]]
    journal.expect(*(units if options.synth else units[1:]))
    if options.synth:  # first: a safety rule that stops synth stops the command before any call
        with journal.unit(SYNTH):
            console.step("site", "synth", ws.site.site)
            ws.synth()
    given = None if options.talosconfig_from_layer else talosctl.talosconfig
    with platform_talosconfig(ws, tf, console, cluster_name, given) as talosconfig:
        return _remove(
            ws,
            cluster_name,
            dead,
            tf,
            replace(talosctl, talosconfig=talosconfig),
            kubectl,
            console,
            options,
            address,
            hostname,
        )


def _remove(
    ws: Workspace,
    cluster_name: str,
    dead: str,
    tf: Terraform,
    talosctl: Talosctl,
    kubectl: Kubectl,
    console: Console,
    options: DeadMemberOptions,
    address: dict[str, str],
    hostname: str,
) -> int:
    layer = ws.platform_layer(cluster_name).name
    journal = console.journal
    with journal.unit(PROBE) as unit:
        unit.note = probe_silence(talosctl, dead, address[dead], options, console, layer)
    with journal.unit(MEMBERS) as unit:
        healthy, listed = healthy_member_list(talosctl, cluster_name, dead, address, console, layer)
        member = next((m for m in listed if m.hostname == hostname), None)
        found = f"{hostname} is member {member.id}" if member else f"{hostname} is not a member"
        console.step(layer, "etcd", f"{len(listed)} members listed through {healthy}; {found}")
        unit.note = f"{found}, through {healthy}"

    workdir = ws.stack_dir(layer)
    target = apply_address(dead)
    with journal.unit(STATE) as unit:
        if not options.talosconfig_from_layer:  # else initialised to read its talosconfig output
            console.step(layer, "init")
            tf.init(workdir, layer)
        in_state = target in state_addresses(tf, ws, layer)
        kubeconfig = kubeconfig_of(tf, workdir)
        if in_state:
            console.step(layer, "state", f"{target} is in the state: it will be forgotten")
        else:
            console.step(
                layer, "state", f"{target} is not in the state (already forgotten, or never applied): nothing to forget"
            )
        unit.note = "apply in the state" if in_state else "apply not in the state"
    with journal.unit(BACKUP) as unit:
        backup: Backup | None = None
        if in_state:
            journal.saw(layer, "backup")
            backup = backup_state(tf, workdir, layer, ws.site.site, ws.root, f"remove-dead-{dead}")
        shown = str(backup.path.relative_to(ws.root)) if backup else ""
        unit.note = shown or ("no state" if in_state else "nothing to back up")
        console.step(layer, "backup", f"{shown} (verified)" if backup else unit.note)

    with journal.unit(REMOVAL) as unit:
        if member is None:
            unit.note = "already gone"
        else:
            if options.before_irreversible is not None:
                options.before_irreversible(
                    Irreversible(cluster_name, dead, member.id, healthy, address[healthy], talosctl, console)
                )
            remove_member(talosctl, healthy, address[healthy], member, console, layer)
            unit.note = f"member {member.id}"
    with journal.unit(NODE) as unit:
        if delete_nodes(kubectl, kubeconfig, [hostname], console, layer):
            unit.note = f"Node {hostname} left: see above"
    with journal.unit(FORGET) as unit:
        if in_state:
            tf.check(tf.run(workdir, "state", "rm", target), "state rm", layer)
            console.step(layer, "state", f"{target} forgotten: no reset will be attempted on the dead machine")
        else:
            unit.note = "not in the state"
    console.say(
        f"next: remove {dead} from clusters.{cluster_name}.control_planes in the site file (add a "
        f"replacement to keep an odd count), then `terravixens deploy {layer}`: its VM is deleted"
    )
    return ExitCode.OK


def remove_member(talosctl: Talosctl, healthy: str, through: str, member: Member, console: Console, layer: str) -> None:
    """`talosctl etcd remove-member` through the healthy control plane, read back. A call that hung or was stopped
    may have reached etcd: the journal says its outcome is not known, with what to check."""
    journal = console.journal
    journal.saw(layer, "remove-member")  # after the snapshot's step: a stop here is said to be at the removal
    try:
        removed = talosctl.etcd_remove_member(through, member.id)
    except KeyboardInterrupt:
        journal.outcome_unknown(UNKNOWN)
        raise
    if not removed.ok:
        unknown = removed.timed_out or removed.interrupted
        if unknown:
            journal.outcome_unknown(UNKNOWN)
        raise OperationError(
            f"talosctl etcd remove-member {member.id} through {healthy} failed ({removed.reason}); "
            + (f"whether the member was removed is not known: {UNKNOWN}" if unknown else "etcd is unchanged"),
            ExitCode.FAILED,
        )
    console.step(layer, "etcd", f"member {member.id} ({member.hostname}) removed through {healthy}")
    again = talosctl.etcd_members(through)
    if again.ok and any(m.id == member.id for m in members(again.stdout)):
        raise OperationError(
            f"member {member.id} ({member.hostname}) is still listed by {healthy} after "
            f"remove-member returned: nothing else was done; list the members and run the "
            f"same command again",
            ExitCode.FAILED,
        )
    console.step(
        layer,
        "etcd",
        f"{len(members(again.stdout))} members left (read back through {healthy})"
        if again.ok
        else f"could not read the members back ({again.reason[:200]})",
    )


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("cluster")
    parser.add_argument("node")
    talosconfig_option(parser)
    talosctl_option(parser)
    parser.add_argument("--confirm", metavar="SITE/CLUSTER/NODE", help="the typed confirmation, for unattended runs")
    no_snapshot_option(parser, "right before the member's removal")
    parser.add_argument(
        "--probes",
        type=whole(2, "number of probes", "a single probe cannot tell a dead node from a reboot"),
        default=4,
        metavar="N",
        help="probe NODE (talosctl version) N times over the window; one answer refuses (default 4)",
    )
    parser.add_argument(
        "--probe-window",
        type=duration,
        default="60s",
        metavar="DURATION",
        help="the period NODE must stay silent, e.g. 60s, 5m (default 60s)",
    )
    parser.add_argument(
        "--probe-timeout",
        type=duration,
        default="10s",
        metavar="DURATION",
        help="deadline of each probe (default 10s)",
    )
    parser.add_argument(
        "--timeout",
        type=duration,
        default="60s",
        metavar="DURATION",
        help="deadline of each other talosctl call (default 60s)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="proceed even though the node answers `talosctl version` "
        "(a live node whose etcd is broken); still confirmed",
    )


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    # Without --talosconfig the operation reads the platform layer's output after synth (a placeholder until then).
    talosctl = Talosctl(args.talosctl, args.talosconfig or "", args.timeout, probe_timeout=args.probe_timeout)
    options = DeadMemberOptions(
        confirm=args.confirm,
        force=args.force,
        probes=args.probes,
        probe_window=args.probe_window,
        before_irreversible=snapshot_before_removal(ws, SnapshotPolicy(skip_reason=args.no_snapshot)),
        talosconfig_from_layer=args.talosconfig is None,
    )
    return remove_dead_member(ws, args.cluster, args.node, tf, talosctl, console=console, options=options)


REMOVE_DEAD_MEMBER = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "the member is removed and its apply forgotten; take the node out of the site next"),
        (
            ExitCode.REFUSED,
            (
                f"the node answered a probe (remove it the normal way), a probe failed for another "
                f"reason than silence, no control plane lists etcd members (quorum lost), or "
                f"{SYNTH_RULE}"
            ),
        ),
        (ExitCode.BAD_INPUT, "site file, unknown cluster, not a control plane"),
        (ExitCode.DECLINED, "the typed SITE/CLUSTER/NODE was not given"),
        (
            ExitCode.FAILED,
            (
                "a talosctl, kubectl or terraform call failed, hung or is missing (the message says what "
                "is done and what is not)"
            ),
        ),
        (
            ExitCode.BACKUP_FAILED,
            (
                "the state backup, or the etcd snapshot right before the removal (through another control plane), "
                "failed: etcd untouched; --no-snapshot REASON goes on without the snapshot"
            ),
        ),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens remove-dead-member prod cp-c",
        "terravixens remove-dead-member prod cp-c --probes 6 --probe-window 2m",
    ),
)
