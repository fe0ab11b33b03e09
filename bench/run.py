"""``make bench``: measure a real ``ai-memory serve`` and write ``docs/benchmarks.md``.

Everything is measured in one run against one spawned server on loopback, and reported
as ratios to ``GET /healthz`` on the same server (a route that does one ``SELECT 1``),
because this machine is noisy: absolute numbers move between runs, ratios much less.
Loops are bounded in count; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.mcp_tools_size import tools_list_size

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "benchmarks.md"
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "400"))
THREADS = 4
BODY = "Please add a /v1/export endpoint that streams NDJSON. " * 18  # about 1 KB


@dataclass
class Timing:
    name: str
    seconds: list[float]

    def quantile(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def p95_ms(self) -> float:
        return self.quantile(0.95) * 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir)}
    env.pop("AI_MEMORY_ROOT_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "aimemory_site.cli.main", "serve", "--bind", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)  # the server is still starting; nothing to wait on but polling
    proc.kill()
    raise SystemExit("server did not start")


def _time(client: httpx.Client, name: str, count: int, call: Callable[[int], None]) -> Timing:
    seconds = []
    for i in range(count):
        start = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - start)
    return Timing(name, seconds)


def _throughput(base_url: str, count: int, call: Callable[[httpx.Client, int], object]) -> float:
    """Requests per second with THREADS clients released together."""
    barrier = threading.Barrier(THREADS + 1)
    per_thread = count // THREADS

    def worker(offset: int) -> None:
        with httpx.Client(base_url=base_url) as client:
            barrier.wait()
            for i in range(per_thread):
                call(client, offset * per_thread + i)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return per_thread * THREADS / (time.perf_counter() - start)


def _rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and its children (gunicorn master plus workers)."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(c) for c in children.read_text().split()]
    for p in pids:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def _tools_list_rows() -> str:
    size = tools_list_size()
    return (
        f"| initialize era (2025-03-26 … 2025-11-25) | {size['chars']:,} | "
        f"{size['approx_tokens']:,} |\n"
        f"| 2026-07-28 | {size['modern_chars']:,} | {size['modern_approx_tokens']:,} |"
    )


def main() -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    database = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite (WAL)"
    with tempfile.TemporaryDirectory() as tmp:
        proc = _start_server(Path(tmp), port)
        try:
            with httpx.Client(base_url=base) as client:
                for name in ("bench-a", "bench-b"):
                    client.post(
                        "/api/v1/sessions",
                        json={"workspace": "default", "project": name, "session_id": name},
                    ).raise_for_status()
                send_payload = {
                    "to_workspace": "default",
                    "to_project": "bench-b",
                    "from_workspace": "default",
                    "from_project": "bench-a",
                    "subject": "export endpoint",
                    "body": BODY,
                }
                inbox = {"workspace": "default", "project": "bench-b"}
                rss_idle = _rss_kib(proc.pid)

                def healthz(_: int) -> None:
                    client.get("/healthz").raise_for_status()

                def send(_: int) -> None:
                    client.post("/api/v1/messages", json=send_payload).raise_for_status()

                def pop(_: int) -> None:
                    response = client.post("/api/v1/messages/pop", json=inbox)
                    response.raise_for_status()
                    assert response.json()["message"] is not None

                def list_50(_: int) -> None:
                    client.get("/api/v1/messages", params={**inbox, "limit": 50}).raise_for_status()

                _time(client, "warm-up", 50, healthz)
                batch = min(REQUESTS, 250)  # the inbox holds 256
                timings = [_time(client, "GET /healthz (baseline)", REQUESTS, healthz)]
                sends = _time(client, "POST /api/v1/messages (send, 1 KB)", batch, send)
                lists = _time(client, "GET /api/v1/messages (list 50)", REQUESTS, list_50)
                pops = _time(client, "POST /api/v1/messages/pop", batch, pop)
                timings += [sends, lists, pops]
                rss_after = _rss_kib(proc.pid)

                health_rps = _throughput(
                    base, REQUESTS, lambda c, _: c.get("/healthz").raise_for_status()
                )
                send_rps = _throughput(
                    base,
                    batch,
                    lambda c, _: c.post("/api/v1/messages", json=send_payload).raise_for_status(),
                )
                pop_rps = _throughput(
                    base,
                    batch,
                    lambda c, _: c.post("/api/v1/messages/pop", json=inbox).raise_for_status(),
                )
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    base_p50 = timings[0].p50_ms
    rows = "\n".join(
        f"| {t.name} | {len(t.seconds)} | {t.p50_ms:.2f} | {t.p95_ms:.2f} | "
        f"{t.p50_ms / base_p50:.2f}× |"
        for t in timings
    )
    report = f"""# Benchmarks

Written by `make bench` (`python -m bench.run`) on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.
Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()};
database: {database}; server: `ai-memory serve` (gunicorn) on loopback, a fresh data dir.
The machine is shared and noisy: compare the ratios, which are measured in the same run
against `GET /healthz` on the same server (one `SELECT 1`), more than the milliseconds.

## Latency, one client, sequential requests (keep-alive)

| route | requests | p50 ms | p95 ms | p50 vs healthz |
|---|---|---|---|---|
{rows}

## Throughput, {THREADS} concurrent clients

| route | requests/s | vs healthz |
|---|---|---|
| GET /healthz | {health_rps:.0f} | 1.00× |
| POST /api/v1/messages (send) | {send_rps:.0f} | {send_rps / health_rps:.2f}× |
| POST /api/v1/messages/pop | {pop_rps:.0f} | {pop_rps / health_rps:.2f}× |

## Memory

Resident memory of the server (gunicorn master and workers): {rss_idle / 1024:.1f} MiB
after start-up, {rss_after / 1024:.1f} MiB after the latency runs.

## MCP tool definitions

The `tools/list` answer every agent loads at every session start (tokens ≈ chars / 4):

| protocol era | characters | ≈ tokens |
|---|---|---|
{_tools_list_rows()}
"""
    OUTPUT.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
