"""terravixens.proxmox_api against the fake Proxmox VE on loopback (fakepve: PVE 8/9's API with its permission model,
tickets and CSRF tokens, API tokens, tasks and their exit statuses): authentication both ways, TLS, every failure an
answer with a reason that never holds a credential, and the bounded waits."""

from __future__ import annotations

import time

import pytest

from terravixens.proxmox_api import Credentials, Guest, ProxmoxApi
from tests.fakepve_ext import FakePveServer
from tests.loopback import free_port

HOST = "127.0.0.52"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = FakePveServer(HOST, free_port(HOST), tmp_path_factory.mktemp("pki-api")).start()

    def guests(pve) -> None:
        pve.add_vm(101, "alpha", node="pve1", status="running").agent = {}
        pve.add_vm(102, "beta", node="pve2", status="stopped")
        pve.add_ct(201, "gamma", node="pve1", status="running")

    started.call(guests, started.pve)
    yield started
    started.stop()


def api(server: FakePveServer, **environ: str) -> ProxmoxApi:
    settings = {**server.provider_env(), **environ}
    return ProxmoxApi(server.url, environ=settings, timeout=5, sleep=lambda _: time.sleep(0.01))


def test_guests_with_a_ticket(server):
    found = api(server).guests()
    assert found == [
        Guest(101, "pve1", "qemu", "alpha", "running"),
        Guest(102, "pve2", "qemu", "beta", "stopped"),
        Guest(201, "pve1", "lxc", "gamma", "running"),
    ]


def test_guests_with_an_api_token(server):
    def token(pve) -> str:
        pve.tv_users["auto@pve"] = {"enable": 1, "expire": 0}
        pve.tv_tokens[("auto@pve", "tv")] = {"privsep": 0, "expire": 0}
        pve.apitokens["auto@pve!tv"] = "s3cr3t-token-value"
        pve.grant("auto@pve", "/", "VM.Audit", "VM.PowerMgmt", "Sys.Audit")
        return "auto@pve!tv=s3cr3t-token-value"

    value = server.call(token, server.pve)
    client = api(server, PROXMOX_VE_USERNAME="", PROXMOX_VE_PASSWORD="", PROXMOX_VE_API_TOKEN=value)
    assert [guest.vmid for guest in client.guests()] == [101, 102, 201]
    wrong = api(server, PROXMOX_VE_USERNAME="", PROXMOX_VE_API_TOKEN="auto@pve!tv=not-it").guests()
    assert not isinstance(wrong, list) and "HTTP 401" in wrong.reason and "not-it" not in wrong.reason


def test_no_credentials_is_an_answer_naming_the_variables():
    assert Credentials({}).missing == (
        "no Proxmox VE credentials: set PROXMOX_VE_API_TOKEN (USER@REALM!TOKENID=SECRET), or PROXMOX_VE_USERNAME and "
        "PROXMOX_VE_PASSWORD (what bpg/proxmox reads at apply time)"
    )


def test_a_wrong_password_is_said_without_it(server):
    answer = api(server, PROXMOX_VE_PASSWORD="hunter2-wrong").guests()
    assert not isinstance(answer, list)
    assert answer.reason.startswith("logging in as root@pam: POST /access/ticket: HTTP 401")
    assert "hunter2" not in answer.reason


def test_tls_is_verified_unless_the_site_says_insecure(server):
    untrusted = api(server, SSL_CERT_FILE="")
    answer = untrusted.guests()
    assert not isinstance(answer, list) and "TLS" in answer.reason and "proxmox.insecure" in answer.reason
    insecure = ProxmoxApi(server.url, insecure=True, environ={**server.provider_env(), "SSL_CERT_FILE": ""}, timeout=5)
    assert isinstance(insecure.guests(), list)


def test_start_shutdown_and_their_tasks(server):
    client = api(server)
    soon = time.monotonic() + 10
    assert client.status("pve2", "qemu", 102).data == "stopped"
    assert client.start("pve2", "qemu", 102, soon).ok
    assert client.wait_status("pve2", "qemu", 102, "running", soon).ok
    assert client.shutdown("pve2", "qemu", 102, 5, soon, force_stop=False).ok
    assert client.status("pve2", "qemu", 102).data == "stopped"
    assert client.shutdown("pve1", "lxc", 201, 5, soon, force_stop=False).ok
    assert client.start("pve1", "lxc", 201, soon).ok


def test_a_guest_that_ignores_acpi(server):
    client = api(server)
    server.call(lambda pve: setattr(pve.vm(101), "acpi", False), server.pve)
    soon = time.monotonic() + 10
    refused = client.shutdown("pve1", "qemu", 101, 1, soon, force_stop=False)
    assert not refused.ok and refused.reason.endswith("VM quit/powerdown failed - got timeout")
    assert client.status("pve1", "qemu", 101).data == "running"
    assert client.shutdown("pve1", "qemu", 101, 1, soon, force_stop=True).ok  # the task ends OK after SIGTERM
    assert client.status("pve1", "qemu", 101).data == "stopped"


def test_a_start_that_fails_and_a_guest_that_is_not_there(server):
    client = api(server)
    server.call(
        lambda pve: setattr(pve.vm(101), "start_error", "volume 'local-lvm:vm-101-disk-0' does not exist"), server.pve
    )
    failed = client.start("pve1", "qemu", 101, time.monotonic() + 10)
    assert not failed.ok and failed.reason.endswith("volume 'local-lvm:vm-101-disk-0' does not exist")
    missing = client.status("pve1", "qemu", 999)
    assert not missing.ok and missing.reason.startswith("GET /nodes/pve1/qemu/999/status/current: HTTP 500")


def test_waits_end_at_their_deadline(server):
    client = api(server)
    started = time.monotonic()
    answer = client.wait_status("pve2", "qemu", 102, "paused", time.monotonic() + 0.3)
    assert not answer.ok and "is not paused in time" in answer.reason
    assert time.monotonic() - started < 5


def test_an_endpoint_that_does_not_answer_is_bounded():
    client = ProxmoxApi(f"https://{HOST}:{free_port(HOST)}/", environ={"PROXMOX_VE_API_TOKEN": "a@pve!b=c"}, timeout=2)
    answer = client.guests()
    assert not answer.ok and "ConnectionRefusedError" in answer.reason and "a@pve!b=c" not in answer.reason
