"""`terravixens renew-credentials CLUSTER`: a new admin kubeconfig and, in its last month, a new talosconfig client
certificate, from the cluster's machine secrets, through the guarded path — and nothing else (ADR 0056).

The platform layer is planned whole with `-replace` of its `talos_cluster_kubeconfig` (the talos provider then asks
a control plane for a new admin kubeconfig: machined signs a new client certificate with the cluster's Kubernetes CA).
The talosconfig is the render of `talos_machine_secrets`' client configuration, which the provider re-issues from
the secrets' OS CA only in the certificate's last month (its ModifyPlan and Update); then every node's configuration
apply takes the new client configuration too — each keeps a copy, to reset its node when it leaves — with its
configuration unchanged. terravixens.guard.credentials checks the plan attribute by attribute: anything else that
would change (a node's configuration, a VM, the machine secrets themselves) refuses the renewal before anything is
applied; the plan guard judges it as any plan. Then the state is backed up and the saved plan applied, the new
talosconfig and kubeconfig are written 0600 into `credentials/<site>/<cluster>/` (0700), their certificates read back,
and `terravixens check` reads the cluster with them.

Talos' CAs (the OS CA of the Talos API, the Kubernetes CA) are not rotated here: see ADR 0056.
"""

from __future__ import annotations

import argparse
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from terravixens.arguments import Definition, duration, site_option
from terravixens.exitcodes import ExitCode, codes
from terravixens.guard.credentials import KUBECONFIG, beyond_credentials, renewed
from terravixens.logical_ids import cluster_id
from terravixens.operations import acceptance, summary
from terravixens.operations.console import Console
from terravixens.operations.files import remove_quietly
from terravixens.operations.kube import Kubectl
from terravixens.operations.observe import KUBECONFIG as KUBECONFIG_OUTPUT
from terravixens.operations.observe import TALOSCONFIG, ClientCertificate, Since, client_certificates, layer_output
from terravixens.operations.outcome import OperationError
from terravixens.operations.steps import apply_saved, confirm, guard_context, judge, make_plan
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace

CREDENTIALS_DIR = "credentials"
KUBECONFIG_ADDRESS = f"{KUBECONFIG}.{cluster_id('kubeconfig')}"


@dataclass(frozen=True)
class RenewOptions:
    """`out`: where the new files go (default credentials/<site>/<cluster>/ under the working folder); `check_wait`:
    how long the check after keeps looking while something fails; `dry_run`: plan and judge, apply nothing."""

    yes: bool = False
    dry_run: bool = False
    out: Path | None = None
    talosctl: str = "talosctl"
    kubectl: str | None = None
    check_wait: int = 0
    timeout: int = 60


def _texts(tf: Terraform, workdir: Path, layer: str) -> dict[str, str]:
    texts = {}
    for name in (TALOSCONFIG, KUBECONFIG_OUTPUT):
        value = layer_output(tf, workdir, name)
        if value is None:
            raise OperationError(
                f"{layer} has no {name} output: the cluster is not deployed from this folder (nothing to renew)",
                ExitCode.BAD_INPUT,
            )
        if not isinstance(value, str):
            raise OperationError(f"{layer}: {value}", ExitCode.FAILED)
        texts[name] = value
    return texts


def _certificates(texts: dict[str, str]) -> dict[str, ClientCertificate]:
    found = client_certificates(texts)
    if not isinstance(found, list):
        raise OperationError(str(found), ExitCode.FAILED)
    return {certificate.source.split()[0]: certificate for certificate in found}


def _until(certificate: ClientCertificate | None) -> str:
    if certificate is None or certificate.not_after is None:
        return f"unreadable ({certificate.problem if certificate else 'none'})"
    return certificate.not_after.strftime("%Y-%m-%d %H:%M UTC")


def _private_folder(folder: Path, root: Path) -> Path:
    """The credentials' folder, 0700 and ours: a symbolic link (it or a folder between it and `root`), a file or
    another user's folder is refused."""
    inside = [p for p in (folder, *folder.parents) if p != root and p.is_relative_to(root)] or [folder]
    for part in inside:
        if part.is_symlink():
            raise OperationError(
                f"{part} is a symbolic link: refusing to write credentials through it", ExitCode.FAILED
            )
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    found = folder.stat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise OperationError(
            f"{folder} is not a folder of this user: refusing to write credentials there", ExitCode.FAILED
        )
    os.chmod(folder, 0o700)
    return folder


def _replace_private(path: Path, text: str) -> Path:
    """Writes `text` to `path` 0600 through a new file renamed over it: a reader sees the old file or the new one."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    remove_quietly(part)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(part, path)
    return path


def renew_credentials(
    ws: Workspace,
    tf: Terraform,
    cluster: str,
    options: RenewOptions,
    console: Console | None = None,
    kubectl: Kubectl | None = None,
) -> int:
    console = console or Console()
    if cluster not in ws.site.clusters:
        raise OperationError(
            f"unknown cluster {cluster!r}: use one of {', '.join(sorted(ws.site.clusters))}", ExitCode.BAD_INPUT
        )
    platform = ws.platform_layer(cluster)
    layer = platform.name
    workdir = ws.stack_dir(layer)
    journal = console.journal
    journal.expect("synth", layer, *([] if options.dry_run else ["credentials", f"check {cluster}"]))
    with journal.unit("synth"):
        console.step("site", "synth", ws.site.site)
        ws.synth()
    tf.require_credentials(workdir, layer)
    with journal.unit(layer) as unit:
        console.step(layer, "init")
        tf.init(workdir, layer)
        before = _certificates(_texts(tf, workdir, layer))
        console.step(
            layer,
            "certificates",
            f"talosconfig until {_until(before.get('talosconfig'))}; kubeconfig until "
            f"{_until(before.get('kubeconfig'))}",
        )
        planned = make_plan(ws, tf, console, layer, f"-replace={KUBECONFIG_ADDRESS}")
        try:
            beyond = beyond_credentials(planned.plan)
            for line in beyond:
                console.say(f"  not a credential: {line}")
            if beyond:
                raise OperationError(
                    f"{layer}: the plan changes more than the credentials ({len(beyond)} change"
                    f"{'s' if len(beyond) != 1 else ''} above): deploy them first (`bin/terravixens deploy {layer}`, "
                    f"guarded as ever), then renew; nothing was applied",
                    ExitCode.REFUSED,
                )
            judge(console, planned, guard_context(ws, tf, console, platform, planned, frozenset()))
            console.step(layer, "summary", summary.counts(planned.plan))
            what = renewed(planned.plan)
            talos = (
                "a new client certificate from the machine secrets' OS CA (the talos provider issues it in the "
                "certificate's last month)"
                if what["talosconfig"]
                else "kept (the talos provider issues a new one only in the certificate's last month)"
            )
            console.step(layer, "renewal", f"kubeconfig: a new one (replaced); talosconfig: {talos}")
            if what["applies"]:
                console.step(
                    layer,
                    "renewal",
                    f"{len(what['applies'])} node applies take the new client configuration (they reset their node "
                    f"with it when it leaves); their configuration is unchanged",
                )
            if options.dry_run:
                console.step(layer, "dry run", "nothing applied")
                unit.note = "dry run"
                return ExitCode.OK
            confirm(console, layer, "Renew the credentials of", options.yes)
            apply_saved(ws, tf, console, planned, "renew-credentials")
        finally:
            remove_quietly(planned.path)
    with journal.unit("credentials"):
        texts = _texts(tf, workdir, layer)
        after = _certificates(texts)
        old, new = before.get("kubeconfig"), after.get("kubeconfig")
        if new is None or new.not_after is None or (old and old.not_after and new.not_after <= old.not_after):
            raise OperationError(
                f"{layer}: the kubeconfig's certificate was not renewed (until {_until(new)}, before {_until(old)})",
                ExitCode.FAILED,
            )
        folder = _private_folder(options.out or ws.root / CREDENTIALS_DIR / ws.site.site / cluster, ws.root)
        written = {name: _replace_private(folder / name, text) for name, text in texts.items()}
        for name in (TALOSCONFIG, KUBECONFIG_OUTPUT):
            shown = written[name].relative_to(ws.root) if written[name].is_relative_to(ws.root) else written[name]
            console.step("credentials", name, f"{shown} (0600), client certificate until {_until(after.get(name))}")
    name = f"check {cluster}"
    with journal.unit(name) as unit:
        console.step(name, "check", "with the new talosconfig and kubeconfig")
        report = acceptance.run(
            ws,
            tf,
            cluster,
            acceptance.CheckOptions(
                talosconfig=str(written[TALOSCONFIG]),
                kubeconfig=str(written[KUBECONFIG_OUTPUT]),
                since=Since(datetime.now(UTC), "the renewal"),
                wait=options.check_wait,
                talosctl=options.talosctl,
                timeout=options.timeout,
            ),
            kubectl or (Kubectl(options.kubectl) if options.kubectl else None),
            progress=lambda text: journal.saw(name, text),
        )
        unit.note = acceptance.VERDICT[report.exit_code]
    for line in report.lines():
        console.say(f"  {line}")
    if report.exit_code != 0:
        code = ExitCode.CHECK_FAILED if report.named(acceptance.Status.PROBLEM) else ExitCode.FAILED
        raise OperationError(f"{report.summary()}: the new credentials are written; fix what the lines above say", code)
    console.step(name, "check", report.summary())
    return ExitCode.OK


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster")
    site_option(parser)
    parser.add_argument("--yes", action="store_true", help="apply the renewal without asking (the checks still run)")
    parser.add_argument("--dry-run", action="store_true", help="plan and judge the renewal, apply nothing")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where the new talosconfig and kubeconfig go (0600; default credentials/SITE/CLUSTER/, 0700)",
    )
    parser.add_argument("--talosctl", default="talosctl", metavar="BIN", help="the talosctl binary (the check after)")
    parser.add_argument("--kubectl", metavar="BIN", help="the kubectl binary (default: $KUBECTL or kubectl)")
    parser.add_argument(
        "--timeout",
        type=duration,
        default="60s",
        metavar="DURATION",
        help="the check's talosctl calls, and how long its `talosctl health` waits (default 60s)",
    )


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    options = RenewOptions(
        yes=args.yes,
        dry_run=args.dry_run,
        out=Path(args.out).resolve() if args.out else None,
        talosctl=args.talosctl,
        kubectl=args.kubectl,
        timeout=args.timeout,
    )
    return renew_credentials(ws, tf, args.cluster, options, console)


RENEW_CREDENTIALS = Definition(
    arguments,
    command,
    codes(
        (
            ExitCode.OK,
            (
                "the kubeconfig renewed (and the talosconfig in its last month), both written 0600 and the cluster "
                "checked with them; --dry-run: the renewal is planned and judged"
            ),
        ),
        (
            ExitCode.REFUSED,
            "the plan changes more than the credentials, or the guard refused it: nothing was applied",
        ),
        (ExitCode.BAD_INPUT, "site file, unknown cluster, a cluster not deployed from this folder"),
        (ExitCode.DECLINED, "not confirmed (`yes`, or --yes): nothing was applied"),
        (
            ExitCode.FAILED,
            (
                "terraform failed, the kubeconfig came back with the same certificate, or the check could not look "
                "with the new credentials"
            ),
        ),
        (ExitCode.BACKUP_FAILED, "the state backup before the apply could not be taken or verified: nothing applied"),
        (ExitCode.CHECK_FAILED, "renewed and written, and the check with the new credentials found problems"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens renew-credentials prod --dry-run",
        "terravixens renew-credentials prod --yes",
    ),
)


__all__ = ["KUBECONFIG_ADDRESS", "RENEW_CREDENTIALS", "RenewOptions", "arguments", "command", "renew_credentials"]
