"""`terravixens remove-dead-member CLUSTER NODE`: a control plane that died cannot leave etcd by itself, and the
reset its apply would run on destroy cannot reach it. Removing its etcd member cannot be undone, so this asks and
waits before it acts, and checks everything else first:

1. the typed confirmation `SITE/CLUSTER/NODE` (or `--confirm` for automation); no terminal and no --confirm: nothing
   is done (exit 3);
2. NODE must stay silent over a period: `--probes` probes (`talosctl version` with a short deadline) spread over
   `--probe-window` — one reboot or network blip must not take a live control plane out of etcd. One answer refuses
   (a live node leaves etcd gracefully through the normal removal: take it out of the site file and deploy). A
   probe that fails for another reason than silence (a certificate, a missing talosctl) cannot prove silence either;
3. a healthy control plane answers `talosctl etcd members`, and NODE's member id is found there (by hostname);
4. Terraform's state step is checked: synth, init, `state list` — the apply address present (then the state is
   backed up and verified now) or the reason it is not —, and the kubeconfig output read;
5. `before_irreversible` (a hook: a fresh, verified etcd snapshot belongs there), then the irreversible step:
   `talosctl etcd remove-member <id>` through the healthy control plane, read back with `etcd members`;
6. NODE's Kubernetes Node object deleted (kubectl, the platform layer's kubeconfig);
7. `terraform state rm` of NODE's configuration apply, so that no reset is attempted;
8. the operator then takes NODE out of the site file (adding a replacement keeps the count odd) and runs
   `terravixens deploy platform-CLUSTER`: its VM is deleted, nothing else is touched.

Every talosctl, kubectl and terraform call is bounded (terravixens.runner). A stop or an interrupt after step 5
says in one line what is done and what is not.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from terravixens.config.addressing import node_address
from terravixens.layers import platform_stack_name
from terravixens.operations.backup import Backup, backup_state
from terravixens.operations.console import Console
from terravixens.operations.steps import apply_address, state_addresses
from terravixens.operations.kube import Kubectl, delete_nodes, kubeconfig_of
from terravixens.operations.outcome import ExitCode, OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.runner import annotate
from terravixens.talosctl import Call, Member, Talosctl, members

# How talosctl (through apid, gRPC) says the node could not be reached: nothing else counts as silence — above all
# not `code = Unavailable` alone, which a TLS handshake failure (a wrong talosconfig) also carries.
SILENCE = re.compile(r"connect: (connection refused|no route to host|network is unreachable|host is down)|"
                     r"i/o timeout|context deadline exceeded|code = DeadlineExceeded|connection reset by peer", re.I)
IRREVERSIBLE_STEPS = ("etcd member removed", "Node object deleted", "apply forgotten in the state")


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
    # Called right before `etcd remove-member`: the place for a fresh, verified etcd snapshot.
    before_irreversible: Callable[[Irreversible], None] | None = None
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)


def member_id(listing: str, hostname: str) -> str | None:
    """The member id of `hostname` in `talosctl etcd members` output (NODE ID HOSTNAME PEER URLS CLIENT URLS
    LEARNER)."""
    found = [member for member in members(listing) if member.hostname == hostname]
    return found[0].id if found else None


def silent(answer: Call) -> bool:
    """Did the probe meet silence? A deadline passed, or talosctl's own report of an unreachable node."""
    return answer.timed_out or (answer.returncode not in (0, None) and bool(SILENCE.search(answer.stderr or
                                                                                           answer.reason)))


def confirmation(console: Console, expected: str, given: str | None, dead: str) -> None:
    answer = given if given is not None else console.ask(
        f"This removes {dead} from etcd for good (after checking it stays silent and that Terraform can forget its "
        f"apply): type {expected} to confirm: ")
    if answer is None:
        raise OperationError(f"no terminal to confirm on: pass --confirm {expected}; nothing was done",
                             ExitCode.DECLINED)
    if answer.strip() != expected:
        raise OperationError(f"confirmation {answer.strip()!r} is not {expected!r}: nothing was done",
                             ExitCode.DECLINED)


def probe_silence(talosctl: Talosctl, dead: str, address: str, options: DeadMemberOptions, console: Console,
                  layer: str) -> None:
    """`options.probes` probes evenly over `options.probe_window` seconds (the first at once, the last at the end);
    one answer refuses, unless --force."""
    started = time.monotonic()
    count, window = options.probes, options.probe_window
    console.step(layer, "probe", f"{dead} ({address}): {count} probes (talosctl version) over {window:g}s; one "
                                 f"answer refuses")
    for number in range(1, count + 1):
        wait = started + window * (number - 1) / max(1, count - 1) - time.monotonic()
        if wait > 0:
            options.sleep(wait)
        answer = talosctl.probe(address)
        at = time.monotonic() - started
        if answer.ok:
            if options.force:
                console.step(layer, "probe", f"{dead} ({address}) answered probe {number} of {count} at {at:.0f}s; "
                                             f"--force: going on")
                return
            raise OperationError(
                f"{dead} ({address}) answered probe {number} of {count} (at {at:.0f}s of {window:g}s): it is alive. "
                f"Remove it the normal way (take it out of the site file and deploy; its reset leaves etcd "
                f"gracefully); if its etcd is broken while Talos answers, pass --force; nothing was done",
                ExitCode.REFUSED)
        if answer.returncode is None and not answer.timed_out:
            raise OperationError(f"probe {number} of {count}: {answer.reason}; nothing was done",
                                 ExitCode.FAILED)
        if silent(answer):
            console.step(layer, "probe", f"{number} of {count} at {at:.0f}s: no answer")
        elif not options.force:
            raise OperationError(
                f"probe {number} of {count}: talosctl version failed for another reason than silence "
                f"({answer.reason}): that does not prove {dead} is dead; check --talosconfig and --talosctl; "
                f"nothing was done", ExitCode.REFUSED)
    console.step(layer, "probe", f"{dead} ({address}) probed {count} times over {window:g}s: no answer")


def healthy_member_list(talosctl: Talosctl, cluster_name: str, dead: str, address: dict[str, str], console: Console,
                        layer: str) -> tuple[str, list[Member]]:
    """The first other control plane that answers `talosctl etcd members`, and the members it lists. When none
    does: a talosctl that hung or cannot run is a stop (exit 4); answers that all fail mean etcd lost quorum."""
    failures: list[Call] = []
    for name in sorted(set(address) - {dead}):
        answer = talosctl.etcd_members(address[name])
        if answer.ok:
            return name, members(answer.stdout)
        failures.append(answer)
        console.step(layer, "etcd", f"{name} ({address[name]}) cannot list members ({answer.reason[:200]}): trying "
                                    f"the next one")
    stuck = [answer for answer in failures if answer.returncode is None]
    if stuck:
        raise OperationError(f"{stuck[0].reason}; nothing was done", ExitCode.FAILED)
    raise OperationError(f"no control plane of {cluster_name} answers `talosctl etcd members`: etcd has lost quorum; "
                         f"restore etcd from a snapshot (talosctl bootstrap --recover-from); nothing was done",
                         ExitCode.REFUSED)


def remove_dead_member(ws: Workspace, cluster_name: str, dead: str, tf: Terraform, talosctl: Talosctl,
                       kubectl: Kubectl | None = None, console: Console | None = None,
                       options: DeadMemberOptions | None = None) -> int:
    console = console or Console()
    kubectl = kubectl or Kubectl()
    options = options or DeadMemberOptions()
    cluster = ws.site.clusters.get(cluster_name)
    if cluster is None:
        raise OperationError(f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}",
                             ExitCode.BAD_INPUT)
    if dead not in cluster.control_planes:
        raise OperationError(f"{dead!r} is not a control plane of {cluster_name} in the site file (control planes: "
                             f"{', '.join(sorted(cluster.control_planes))}); keep it in the site until its member is "
                             f"removed", ExitCode.BAD_INPUT)
    layer = platform_stack_name(cluster_name)
    address = {name: node_address(node.networks, cluster.management_vlan)
               for name, node in cluster.control_planes.items()}
    hostname = cluster.control_planes[dead].hostname or dead
    confirmation(console, f"{ws.site.site}/{cluster_name}/{dead}", options.confirm, dead)

    done: list[str] = []
    pending = list(IRREVERSIBLE_STEPS)

    def mark(step: str, text: str | None = None) -> None:
        pending.remove(step)
        done.append(text or step)

    def not_done() -> str:
        return f"done: {', '.join(done) or 'nothing'}; not done: {', '.join(pending) or 'nothing'}"

    doing = f"probing {dead}"
    try:
        probe_silence(talosctl, dead, address[dead], options, console, layer)
        doing = "listing the etcd members"
        healthy, listed = healthy_member_list(talosctl, cluster_name, dead, address, console, layer)
        member = next((m for m in listed if m.hostname == hostname), None)
        found = f"{hostname} is member {member.id}" if member else f"{hostname} is not a member"
        console.step(layer, "etcd", f"{len(listed)} members listed through {healthy}; {found}")

        doing = "checking Terraform's state step"
        if options.synth:
            ws.synth()
        workdir = ws.stack_dir(layer)
        tf.init(workdir, layer)
        target = apply_address(dead)
        in_state = target in state_addresses(tf, ws, layer)
        backup: Backup | None = None
        if in_state:
            backup = backup_state(tf, workdir, layer, ws.site.site, ws.root, f"remove-dead-{dead}")
            console.step(layer, "state", f"{target} is in the state: it will be forgotten; backup "
                                         + (f"{backup.path.relative_to(ws.root)} (verified)" if backup else "none"))
        else:
            console.step(layer, "state", f"{target} is not in the state (already forgotten, or never applied): "
                                         f"nothing to forget")
        kubeconfig = kubeconfig_of(tf, workdir)

        if member is not None:
            if options.before_irreversible is not None:
                options.before_irreversible(Irreversible(cluster_name, dead, member.id, healthy, address[healthy],
                                                         talosctl, console))
            doing = f"removing etcd member {member.id}"
            removed = talosctl.etcd_remove_member(address[healthy], member.id)
            if not removed.ok:
                unknown = removed.timed_out or removed.interrupted  # it may have reached etcd
                raise OperationError(
                    f"talosctl etcd remove-member {member.id} through {healthy} failed ({removed.reason}); " + (
                        f"whether the member was removed is not known: list the members (talosctl etcd members) "
                        f"and run the same command again" if unknown else "nothing was done"),
                    ExitCode.FAILED)
            console.step(layer, "etcd", f"member {member.id} ({hostname}) removed through {healthy}")
            again = talosctl.etcd_members(address[healthy])
            if again.ok and any(m.id == member.id for m in members(again.stdout)):
                raise OperationError(f"member {member.id} ({hostname}) is still listed by {healthy} after "
                                     f"remove-member returned: nothing else was done; list the members and run the "
                                     f"same command again", ExitCode.FAILED)
            mark(IRREVERSIBLE_STEPS[0])
            console.step(layer, "etcd", f"{len(members(again.stdout))} members left (read back through {healthy})"
                         if again.ok else f"could not read the members back ({again.reason[:200]})")
        else:
            mark(IRREVERSIBLE_STEPS[0], "etcd member already gone")

        doing = f"deleting Node {hostname}"
        failed = delete_nodes(kubectl, kubeconfig, [hostname], console, layer)
        mark(IRREVERSIBLE_STEPS[1], "Node object left (see above)" if failed else None)
        doing = f"forgetting {target}"
        if in_state:
            tf.check(tf.run(workdir, "state", "rm", target), "state rm", layer)
            console.step(layer, "state", f"{target} forgotten: no reset will be attempted on the dead machine")
        mark(IRREVERSIBLE_STEPS[2], None if in_state else "apply not in the state")
    except OperationError as error:
        if done:
            raise OperationError(f"{error}; {not_done()}", error.code) from None
        raise
    except KeyboardInterrupt as error:
        annotate(error, where=f"while {doing}", summary=not_done() if done else (
            f"whether the etcd member was removed is not known: list the members (talosctl etcd members) and run "
            f"the same command again" if doing.startswith("removing") else
            "etcd member not removed: run the same command again"))
        raise
    console.say(f"next: remove {dead} from clusters.{cluster_name}.control_planes in the site file (add a "
                f"replacement to keep an odd count), then `terravixens deploy {layer}`: its VM is deleted")
    return ExitCode.OK
