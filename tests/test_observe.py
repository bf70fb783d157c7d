"""The readers under `check` and the Talos side of `drift`, on the exact text talosctl 1.11–1.13 prints (research
01, 05: go-multierror WARNING lines after a partial failure that exits 0, `NODE:` blocks, tabwriter tables,
`<node>: <line>` logs, health on stderr), the log formats that carry a level, and X.509 notAfter read with the
standard library only (Ed25519, ECDSA, RSA; UTCTime and GeneralizedTime)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from terravixens.operations.observe import LogError, client_certificates, log_error, not_after
from terravixens.talosctl import health_failure, log_lines, node_errors, services, version_tags
from tests.cluster_fakes import kubeconfig_text, talosconfig_text

# `talosctl -n 10.0.0.11,10.0.0.12,10.0.0.13 version` with 10.0.0.13 down: exit 0 (1.11-1.13), the WARNING on stderr.
PARTIAL_VERSION = """Client:
\tTag:         v1.11.5
\tSHA:         bc34de6e
\tBuilt:{SEVEN}
\tGo version:  go1.24.9
\tOS/Arch:     linux/amd64
Server:
\tNODE:        10.0.0.11
\tTag:         v1.11.5
\tSHA:         bc34de6e
\tBuilt:{SEVEN}
\tGo version:  go1.24.9
\tOS/Arch:     linux/amd64
\tEnabled:     RBAC
\tNODE:        10.0.0.12
\tTag:         v1.11.4
\tSHA:         bc34de6e
\tBuilt:{SEVEN}
\tGo version:  go1.24.9
\tOS/Arch:     linux/amd64
\tEnabled:     RBAC
"""
WARNING = (
    "WARNING: 1 error occurred:\n"
    '\t* 10.0.0.13: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: '
    'dial tcp 10.0.0.13:50000: connect: no route to host"\n\n'
)


def test_a_partial_version_answer_is_counted_per_node_block():
    assert version_tags(PARTIAL_VERSION) == {"10.0.0.11": "v1.11.5", "10.0.0.12": "v1.11.4"}
    assert node_errors(WARNING) == {
        "10.0.0.13": 'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: '
        'dial tcp 10.0.0.13:50000: connect: no route to host"'
    }
    assert version_tags("Client:\n\tTag:         v1.11.5\nServer:\n") == {}  # the client's tag is not a node's


def test_services_rows_of_the_tabwriter_table():
    listing = (
        "NODE         SERVICE                STATE     HEALTH   LAST CHANGE   LAST EVENT\n"
        "172.20.1.2   apid                   Running   OK       19m27s ago    Health check successful\n"
        "172.20.1.2   etcd                   Running   OK       19m22s ago    Health check successful\n"
        "172.20.1.2   ext-qemu-guest-agent   Running   Fail     2h3m4s ago    Health check failed: service not "
        "running\n"
        "172.20.1.2   machined               Running   ?        19m30s ago    Service started as goroutine\n"
        "172.20.1.3   kubelet                Failed    Fail     5s ago        Process exited with code 1\n"
    )
    rows = services(listing)
    assert [(r.node, r.id, r.state, r.health) for r in rows] == [
        ("172.20.1.2", "apid", "Running", "OK"),
        ("172.20.1.2", "etcd", "Running", "OK"),
        ("172.20.1.2", "ext-qemu-guest-agent", "Running", "Fail"),
        ("172.20.1.2", "machined", "Running", "?"),
        ("172.20.1.3", "kubelet", "Failed", "Fail"),
    ]
    assert rows[4].last_event == "Process exited with code 1"


def test_log_lines_are_split_per_node_and_other_nodes_are_not_lines():
    output = '10.0.0.11: a: b\n10.0.0.12: {"level":"info"}\n10.0.0.11: second\nstray text\n'
    assert log_lines(output, ["10.0.0.11", "10.0.0.12"]) == {
        "10.0.0.11": ["a: b", "second"],
        "10.0.0.12": ['{"level":"info"}'],
    }


def test_what_health_was_waiting_for_when_it_gave_up():
    stderr = (
        'discovered nodes: ["10.0.0.11" "10.0.0.12"]\n'
        "waiting for etcd to be healthy: ...\n"
        "waiting for etcd to be healthy: OK\n"
        "waiting for kube-proxy to report ready: SKIP\n"
        "waiting for all k8s nodes to report ready: ...\n"
        "waiting for all k8s nodes to report ready: some nodes are not ready: [wk-b]\n"
        "healthcheck error: rpc error: code = Unknown desc = context deadline exceeded\n"
    )
    assert health_failure(stderr) == "waiting for all k8s nodes to report ready: some nodes are not ready: [wk-b]"
    assert health_failure("error constructing client: failed to determine endpoints\n") == (
        "error constructing client: failed to determine endpoints"
    )


# ------------------------------------------------------------------------------------------------------ levels
def test_error_lines_of_each_format_with_their_time():
    etcd = {"level": "error", "ts": "2026-01-10T10:02:11.123456Z", "msg": "slow fdatasync", "error": "took too long"}
    assert log_error(json.dumps(etcd)) == LogError(
        datetime(2026, 1, 10, 10, 2, 11, 123456, tzinfo=UTC), "slow fdatasync: took too long"
    )
    assert log_error(json.dumps({**etcd, "level": "warn"})) is None
    kubelet_error = {"ts": 1768039331123.456, "caller": "kubelet.go:2890", "msg": "Error syncing pod", "err": "boom"}
    assert log_error(json.dumps(kubelet_error)) == LogError(
        datetime.fromtimestamp(1768039331.123456, UTC), "Error syncing pod: boom"
    )
    assert log_error(json.dumps({**kubelet_error, "v": 2})) is None  # an info entry carries `v`
    coloured = '2026-01-10T10:02:11.690Z \x1b[31mERROR\x1b[0m controller failed {"error": "x"}'
    assert log_error(coloured) == LogError(
        datetime(2026, 1, 10, 10, 2, 11, 690000, tzinfo=UTC), 'controller failed {"error": "x"}'
    )
    assert log_error("2026-01-10T10:02:11.690Z DEBUG NTP response {}") is None
    assert log_error("E0125 10:40:16.865601    1234 file.go:123] failed to sync") == LogError(None, "failed to sync")
    assert log_error("[talos] task setupLogger (1/1): done, 106.109µs") is None  # machined: no level
    assert log_error("{not json") is None


# ------------------------------------------------------------------------------------------------ certificates
def _certificate(key, not_after_time: datetime, algorithm) -> str:
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "os:admin")])
    built = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime(2026, 1, 1, tzinfo=UTC))
        .not_valid_after(not_after_time)
        .sign(key, algorithm)
    )
    return built.public_bytes(serialization.Encoding.PEM).decode()


@pytest.mark.parametrize(
    ("key", "algorithm"),
    [
        (ed25519.Ed25519PrivateKey.generate(), None),
        (ec.generate_private_key(ec.SECP256R1()), hashes.SHA256()),
        (rsa.generate_private_key(public_exponent=65537, key_size=2048), hashes.SHA256()),
    ],
    ids=["ed25519", "ecdsa", "rsa"],
)
def test_not_after_is_read_from_the_der_for_every_key_type_and_both_time_encodings(key, algorithm):
    for when in (datetime(2027, 3, 4, 5, 6, 7, tzinfo=UTC), datetime(2109, 1, 2, 3, 4, 5, tzinfo=UTC)):
        assert not_after(_certificate(key, when, algorithm)) == when  # 2109: GeneralizedTime (RFC 5280, from 2050)


def test_not_a_certificate_is_a_value_error():
    for text in ("", "-----BEGIN CERTIFICATE-----\nMAOgAQA=\n-----END CERTIFICATE-----\n", "hello"):
        with pytest.raises(ValueError):
            not_after(text)


def test_client_certificates_of_a_talosconfig_and_a_kubeconfig():
    found = client_certificates(
        {
            "talosconfig": talosconfig_text("prod", ["10.0.0.11"], 12),
            "kubeconfig": kubeconfig_text("prod", "https://10.0.0.10:6443", 400),
        }
    )
    assert not isinstance(found, str) and not hasattr(found, "reason")
    sources = {c.source: c.not_after for c in found}  # type: ignore[union-attr]
    now = datetime.now(UTC)
    assert set(sources) == {"talosconfig context prod", "kubeconfig user admin@prod"}
    assert abs(sources["talosconfig context prod"] - (now + timedelta(days=12))) < timedelta(minutes=5)
    assert abs(sources["kubeconfig user admin@prod"] - (now + timedelta(days=400))) < timedelta(minutes=5)
    unread = client_certificates({"kubeconfig": "{ not yaml"})
    assert getattr(unread, "call", "") == "read the kubeconfig"
