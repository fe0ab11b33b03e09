"""What every bench shares: ``ai-memory serve`` started on a free port (``Server``), a
``wrk`` load and its figures (``wrk``, ``Load``), a fresh PostgreSQL database
(``postgres_database``), and where the figures go (``OUTPUT``)."""

from __future__ import annotations

import json
import math
import os
import resource
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from messaging.limits import MAX_PENDING_PER_INBOX

ROOT = Path(__file__).resolve().parent.parent
WRK_DIR = ROOT / "bench" / "wrk"
OUTPUT = ROOT / "docs" / "benchmarks.md"
OUTPUT_JSON = ROOT / "docs" / "benchmarks.json"
BODY = "Please add a /v1/export endpoint that streams NDJSON. " * 18  # about 1 KB
SECONDS = float(os.environ.get("BENCH_SECONDS", "6"))
#: Above any send rate measured on the bench machine (about 1,130 a second at 8 clients).
SEND_RATE_CEILING = 1500


def sinks_for(send_seconds: float) -> int:
    """How many recipient projects ``send_seconds`` of sends need, spread over them by
    ``bench/wrk/send.lua`` and never popped, so that no inbox reaches its bound and no
    load measures "inbox full" answers."""
    return max(1, math.ceil(send_seconds * SEND_RATE_CEILING / MAX_PENDING_PER_INBOX))


# Recipient projects for sends: the loads part sends for six rows of SECONDS (REST and
# MCP at each concurrency).
SINKS = sinks_for(6 * SECONDS)
STOCKED = 100  # stocked inboxes for pops
POSTGRES_ADMIN_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)


@dataclass
class Load:
    """One wrk run: what was asked, what came back, what wrk itself cost."""

    name: str
    connections: int
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    errors: int
    claimed: int
    empty: int
    wrk_cpu: float  # wrk's CPU time over the wall time of the run, in cores
    # What the requests took as they were sent, timed in the Lua scripts (``common.lua``);
    # p50_ms .. p99_ms above are wrk's own, corrected for coordinated omission. 0 where a
    # script does not time (the peer's).
    sent_p50_ms: float = 0.0
    sent_p95_ms: float = 0.0
    sent_p99_ms: float = 0.0
    sent_max_ms: float = 0.0
    sent_over_100ms: int = 0  # requests that took 100 ms or more
    # What the machine took from everyone during the run (see ``MachineStall``): CPU time
    # the hypervisor gave to other guests, in cores, and the share of the run in which
    # some task here waited on the disk.
    steal_cores: float = 0.0
    io_stall: float = 0.0


@dataclass
class MachineStall:
    """Counters of the whole machine that say how noisy a run was, read before and after.

    ``/proc/stat``'s steal time is CPU time the hypervisor gave to other guests while this
    one had work; ``/proc/pressure/io``'s ``some`` total is the time in which at least one
    task waited on I/O (the kernel's pressure stall information). Either is 0 where the
    kernel does not report it.
    """

    steal_s: float
    io_some_s: float
    at: float

    @classmethod
    def now(cls) -> MachineStall:
        steal = 0.0
        try:
            fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
            steal = int(fields[8]) / os.sysconf("SC_CLK_TCK")  # cpu user nice system ... steal
        except (OSError, IndexError, ValueError):
            pass
        io_some = 0.0
        try:
            for line in Path("/proc/pressure/io").read_text().splitlines():
                if line.startswith("some "):
                    io_some = int(line.rsplit("total=", 1)[1]) / 1e6
        except (OSError, IndexError, ValueError):
            pass
        return cls(steal_s=steal, io_some_s=io_some, at=time.monotonic())

    def since(self, before: MachineStall) -> tuple[float, float]:
        """(stolen cores, I/O stall share) between ``before`` and this reading."""
        wall = max(self.at - before.at, 1e-9)
        return (self.steal_s - before.steal_s) / wall, (self.io_some_s - before.io_some_s) / wall


def wrk_threads(connections: int) -> int:
    """wrk threads for ``connections``: one each, so that a thread's requests and
    responses alternate and ``common.lua`` can time each request (wrk's CPU stays a few
    percent of a core; every row reports it)."""
    return connections


def wrk(base: str, script: str, connections: int, seconds: float, **env: str) -> Load:
    """Run one wrk load and parse the summary the Lua ``done`` prints."""
    threads = wrk_threads(connections)
    full_env = {**os.environ, "BENCH_WRK_DIR": str(WRK_DIR), "BENCH_BODY": BODY, **env}
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(WRK_DIR / script),
        base,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    stall_before = MachineStall.now()
    done = subprocess.run(command, env=full_env, capture_output=True, text=True, check=False)
    stall = MachineStall.now()
    wall = stall.at - stall_before.at
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"wrk failed: {done.stdout}\n{done.stderr}")
    data = json.loads(line.removeprefix("WRK_JSON "))
    duration = data["duration_us"] / 1e6
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    steal_cores, io_stall = stall.since(stall_before)
    return Load(
        name=f"{script} {env.get('BENCH_PATH', env.get('BENCH_TOOL', ''))}".strip(),
        connections=connections,
        requests=data["requests"],
        seconds=duration,
        rps=data["requests"] / duration,
        p50_ms=data["p50_us"] / 1000,
        p95_ms=data["p95_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        errors=data["status_errors"] + data["socket_errors"],
        claimed=data.get("claimed", 0),
        empty=data.get("empty", 0),
        wrk_cpu=cpu / wall,
        sent_p50_ms=data.get("sent_p50_us", 0) / 1000,
        sent_p95_ms=data.get("sent_p95_us", 0) / 1000,
        sent_p99_ms=data.get("sent_p99_us", 0) / 1000,
        sent_max_ms=data.get("sent_max_us", 0) / 1000,
        sent_over_100ms=data.get("sent_over_100ms", 0),
        steal_cores=steal_cores,
        io_stall=io_stall,
    )


class Server:
    """``ai-memory serve`` on a free port, with the environment of one database."""

    def __init__(
        self, env: dict[str, str], log: Path, root: Path = ROOT, extra_args: list[str] | None = None
    ) -> None:
        """``root``: the checkout whose code the server and the seeding run (bench.ab
        starts one per revision); ``extra_args``: more ``ai-memory serve`` arguments."""
        self.root = root
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aimemory_site.cli.main",
                "serve",
                "--bind",
                f"127.0.0.1:{self.port}",
                *(extra_args or []),
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)  # the server is migrating and starting; only polling tells
        self.stop()
        raise SystemExit(f"server did not start; see {log}")

    def seed(self, *arguments: object) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "bench.seed", *map(str, arguments)],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"bench.seed {arguments} failed:\n{done.stderr}")
        last = done.stdout.strip().splitlines()[-1:] or ["{}"]
        answer: dict[str, Any] = json.loads(last[0])
        return answer

    def pids(self) -> list[int]:
        """The server's processes: the master, then its workers."""
        pids = [self.proc.pid]
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        if children.exists():
            pids += [int(c) for c in children.read_text().split()]
        return pids

    def cpu_ticks(self) -> int:
        """User and system clock ticks (``SC_CLK_TCK`` a second) used so far by the
        server's processes."""
        total = 0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue  # a worker restarted
            total += int(fields[11]) + int(fields[12])
        return total

    def rss_kib(self) -> dict[str, int]:
        """Resident and peak resident memory of each server process (master, workers)."""
        sizes: dict[str, int] = {}
        for pid in self.pids():
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            for line in status:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":")
                    sizes[f"{pid}.{key}"] = int(value.split()[0])
        return sizes

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def postgres_database() -> Iterator[str | None]:
    """A fresh PostgreSQL database for one bench run (dropped after), or None if none."""
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.Error:
        yield None
        return
    name = f"aimemory_bench_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
