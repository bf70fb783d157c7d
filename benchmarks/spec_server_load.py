#!/usr/bin/env python
"""Load benchmark of `terravixens spec serve` on loopback: bounded, stops by itself.

    pipenv run python benchmarks/spec_server_load.py [--requests 2000] [--identities 100] [--concurrency 50]
                                                     [--keep-alive] [--host 127.0.0.42]

Builds a site of N standalone VMs in a temporary folder (a third each under the dev, stage and prod postures:
no token, the site token, its own node token), starts the real server in a subprocess (access log on, to a file),
and sends the requests from `concurrency` asyncio workers, each request with the right credentials for its
identity. By default every request opens its own connection, as nodes do; --keep-alive reuses one per worker.
Reports p50/p90/p99/max latency, throughput and errors; exits 1 when an error happened or p99 >= 50 ms.
The whole run is capped at 120 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SITE_TOKEN = "bench-site-token-0123456789abcdef0123456789"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJlbmNoa2V5YmVuY2hrZXliZW5jaGtleWJlbmNoa2V5 bench@host"
POSTURES = ("dev", "stage", "prod")
HARD_LIMIT = 120.0
TARGET_P99_MS = 50.0


def node_token(name: str) -> str:
    return f"bench-node-token-{name}-0123456789abcdef0123"


def build_site(folder: Path, identities: int) -> tuple[Path, Path, list[tuple[str, str | None]]]:
    nodes, plan = {}, []
    for index in range(identities):
        name, posture = f"n{index:03d}", POSTURES[index % 3]
        nodes[name] = {
            "type": "vm",
            "parent": "pve1",
            "spec": posture,
            "vm_id": 4000 + index,
            "bridge": "vmbr1",
            "image": "local:import/debian-12-genericcloud-amd64.qcow2",
            "networks": {"vlans": {111: {"address": f"10.20.{index // 250}.{index % 250 + 1}/16"}}},
        }
        plan.append((name, {"dev": None, "stage": SITE_TOKEN, "prod": node_token(name)}[posture]))
    site = {
        "site": "bench",
        "proxmox": {"endpoint": "https://pve1.bench.internal:8006/"},
        "hypervisors": {"pve1": {"node_name": "pve1", "bridges": {"vmbr1": {"vlans": [111]}}}},
        "standalone": {"spec_server": {"url": "https://specs.bench.internal:8443"}, "nodes": nodes},
    }
    (folder / "site.yaml").write_text(yaml.safe_dump(site))
    (folder / "specs").mkdir()
    for posture in POSTURES:
        spec = {
            "schema_version": 1,
            "identity": {"domain": "bench.internal"},
            "network": {"dns": ["10.20.0.1"]},
            "access": {"posture": posture, "users": {"ops": {"sudo": True, "ssh_keys": ["ops"]}}},
            "platform": {"packages": ["chrony", "curl"], "services": {"enable": ["chrony"]}},
        }
        (folder / "specs" / f"{posture}.yaml").write_text(yaml.safe_dump(spec))
    secrets = folder / "secrets.yaml"
    secrets.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "ssh_keys": {"ops": KEY},
                "site_token": SITE_TOKEN,
                "node_tokens": {name: token for name, token in plan if token and token != SITE_TOKEN},
            }
        )
    )
    secrets.chmod(0o600)
    return folder / "site.yaml", secrets, plan


def start_server(site: Path, secrets: Path, host: str, log: Path) -> tuple[subprocess.Popen, int]:
    with open(log, "w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "terravixens.cli",
                "spec",
                "serve",
                "--site",
                str(site),
                "--secrets",
                str(secrets),
                "--host",
                host,
                "--port",
                "0",
                "--watch-interval",
                "0",
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"the server exited: {log.read_text()}")
        for line in log.read_text().splitlines():
            if '"event":"listening"' in line:
                return process, json.loads(line)["port"]
        time.sleep(0.05)
    process.kill()
    sys.exit("the server did not start within 30 s")


async def _read_reply(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return status, await reader.readexactly(length)


def _request(host: str, name: str, token: str | None, keep_alive: bool) -> bytes:
    lines = [f"GET /spec/{name} HTTP/1.1", f"Host: {host}", f"Connection: {'keep-alive' if keep_alive else 'close'}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def run_load(
    host: str, port: int, plan: list[tuple[str, str | None]], requests: int, concurrency: int, keep_alive: bool
) -> tuple[list[float], list[str], float]:
    queue: asyncio.Queue = asyncio.Queue()
    for index in range(requests):
        queue.put_nowait(plan[index % len(plan)])
    latencies: list[float] = []
    errors: list[str] = []

    async def worker() -> None:
        connection = None
        while True:
            try:
                name, token = queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            started = time.perf_counter()
            try:
                if connection is None:
                    connection = await asyncio.open_connection(host, port)
                reader, writer = connection
                writer.write(_request(host, name, token, keep_alive))
                status, body = await asyncio.wait_for(_read_reply(reader), timeout=10)
                latencies.append(time.perf_counter() - started)
                if status != 200 or f'"name":"{name}"'.encode() not in body:
                    errors.append(f"{name}: HTTP {status}")
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as error:
                errors.append(f"{name}: {type(error).__name__}")
                connection = None
                continue
            if not keep_alive:
                writer.close()
                connection = None
        if connection is not None:
            connection[1].close()

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), timeout=HARD_LIMIT)
    return latencies, errors, time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc): the server's cost, whatever else runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--identities", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--keep-alive", action="store_true", help="reuse one connection per worker")
    parser.add_argument("--host", default="127.0.0.42")
    args = parser.parse_args()
    if not args.host.startswith("127."):
        sys.exit("loopback only: give a 127.x.y.z address")
    with tempfile.TemporaryDirectory(prefix="tv-specload-") as folder:
        folder = Path(folder)
        site, secrets, plan = build_site(folder, args.identities)
        process, port = start_server(site, secrets, args.host, folder / "serve.log")
        try:
            cpu_before, load_before = cpu_seconds(process.pid), os.getloadavg()[0]
            latencies, errors, elapsed = asyncio.run(
                run_load(args.host, port, plan, args.requests, args.concurrency, args.keep_alive)
            )
            server_cpu = cpu_seconds(process.pid) - cpu_before
        finally:
            process.terminate()
            process.wait(timeout=10)
        logged = sum(1 for line in (folder / "serve.log").read_text().splitlines() if '"event":"access"' in line)
    ordered = sorted(latencies)
    p50, p90, p99 = (1000 * percentile(ordered, f) for f in (0.50, 0.90, 0.99))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, load average {load_before:.1f} at start"
    )
    print(
        f"load: {args.requests} requests over {args.identities} identities (dev/stage/prod postures), "
        f"concurrency {args.concurrency}, {'keep-alive' if args.keep_alive else 'one connection per request'}, "
        f"server {args.host}:{port} (access log on)"
    )
    print(f"latency ms: p50 {p50:.1f}  p90 {p90:.1f}  p99 {p99:.1f}  max {1000 * ordered[-1]:.1f}")
    print(
        f"throughput: {len(latencies) / elapsed:.0f} requests/s ({elapsed:.2f} s); server CPU "
        f"{1000 * server_cpu / max(1, len(latencies)):.2f} ms per request"
    )
    print(f"errors: {len(errors)}{' — ' + ', '.join(errors[:5]) if errors else ''}; access log lines: {logged}")
    met = not errors and p99 < TARGET_P99_MS
    print(f"target (zero errors, p99 < {TARGET_P99_MS:.0f} ms): {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
