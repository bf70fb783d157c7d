"""The operations run against the fake Proxmox VE as an operator runs them: each layer's projection onto the providers
with a binary here (the Workspace `transform` seam), the offline mirror's Terraform, a console that records, what
the fake holds, and its HTTP API as any client calls it (tests/integration/test_operations.py, test_cdktf_path.py,
test_standalone.py)."""

from __future__ import annotations

import json
import ssl
import urllib.parse
import urllib.request
from pathlib import Path

from terravixens import provider_install
from terravixens.operations.console import Console
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from tests import support
from tests.fakepve_ext import FakePveServer
from tests.loopback import assert_only_loopback
from tests.terraform import mirrored_providers, projection


def project(layer: str, document: dict) -> dict:
    projected, _ = projection(document, mirrored_providers())
    assert_only_loopback(projected)
    return projected


def terraform_for(fake: FakePveServer, binary: str, **extra: str) -> Terraform:
    # The tests opt into the offline mirror (operators keep their own TF_CLI_CONFIG_FILE: the registry by default).
    return Terraform(binary=binary, env={**fake.provider_env(), **provider_install.environment_for("mirror"), **extra})


def workspace(root: Path, data: dict) -> Workspace:
    return Workspace(support.site_from(data), root=root, transform=project)


class Recorder(Console):
    def __init__(self, answers=()):
        import io

        super().__init__(out=io.StringIO(), answers=iter(answers))

    @property
    def text(self) -> str:
        return self.out.getvalue()


def inventory(fake: FakePveServer) -> dict:
    """What the fake holds beyond a fresh Proxmox VE: VMs, bridges, users, roles, tokens, ACLs, stored files."""

    def read():
        pve = fake.pve
        return {
            "vms": sorted(vm.vmid for vm in pve.vms),
            "bridges": sorted(
                f"{node}/{name}"
                for node, ifaces in pve.tv_net.items()
                for name in ifaces
                if name not in ("enp2s0", "vmbr0")
            ),
            "users": sorted(u for u in pve.tv_users if u != "root@pam"),
            "roles": sorted(pve.tv_roles),
            "tokens": sorted("!".join(key) for key in pve.tv_tokens),
            "acl": sorted(e["ugid"] for e in pve.tv_acl),
            "files": sorted(f"{name}:{f}" for name, storage in pve.storages.items() for f in storage.get("files", ())),
        }

    return fake.call(read)


def api(fake: FakePveServer, method: str, path: str, **fields: str) -> dict:
    """A call to the fake's HTTP API as any client makes it: ticket, CSRF token, form body."""
    context = ssl.create_default_context(cafile=fake.cafile)
    login = urllib.request.Request(
        f"{fake.url}api2/json/access/ticket",
        method="POST",
        data=urllib.parse.urlencode({"username": "root@pam", "password": "secret"}).encode(),
    )
    ticket = json.loads(urllib.request.urlopen(login, context=context, timeout=30).read())["data"]
    request = urllib.request.Request(
        f"{fake.url}api2/json{path}",
        method=method,
        data=urllib.parse.urlencode(fields).encode(),
        headers={"Cookie": f"PVEAuthCookie={ticket['ticket']}", "CSRFPreventionToken": ticket["CSRFPreventionToken"]},
    )
    return json.loads(urllib.request.urlopen(request, context=context, timeout=30).read())
