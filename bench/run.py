"""``make bench``: measure ``ai-memory serve`` over loopback and write ``docs/benchmarks.md``.

For each database (SQLite, and PostgreSQL when ``BENCH_POSTGRES_URL`` or the local server
at 127.0.0.1:5432 answers) the bench starts the server exactly as ``ai-memory serve`` does,
in a fresh data dir (and a fresh PostgreSQL database), and drives it with ``wrk`` (Lua
scripts in ``bench/wrk/``), a C load generator whose own CPU time is reported beside each
figure so it can be seen not to be the bottleneck. Figures of one database come from one
run against one server and are reported as ratios to the floor (``GET /healthz``) of that
same run, since this machine is noisy. The peer (PyPI ``agent-inbox``) runs in its own
virtualenv beside it when Python 3.13 is at hand. Nothing leaves 127.0.0.1; every load is
bounded in time.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from bench.mcp_tools_size import tools_list_size

ROOT = Path(__file__).resolve().parent.parent
WRK_DIR = ROOT / "bench" / "wrk"
OUTPUT = ROOT / "docs" / "benchmarks.md"
OUTPUT_JSON = ROOT / "docs" / "benchmarks.json"
BODY = "Please add a /v1/export endpoint that streams NDJSON. " * 18  # about 1 KB
CONCURRENCIES = (1, 8, 32)
SECONDS = float(os.environ.get("BENCH_SECONDS", "6"))
SINKS = 200  # recipient projects for sends: 200 x 256 pending before any inbox is full
STOCKED = 100  # stocked inboxes for pops
HISTORY_ROWS = int(os.environ.get("BENCH_HISTORY_ROWS", "1000000"))
MEMORY_REQUESTS = int(os.environ.get("BENCH_MEMORY_REQUESTS", "100000"))
CONTENTION_MESSAGES = 5000
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


def wrk(base: str, script: str, connections: int, seconds: float, **env: str) -> Load:
    """Run one wrk load and parse the summary the Lua ``done`` prints."""
    threads = 1 if connections == 1 else 2
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
    started = time.monotonic()
    done = subprocess.run(command, env=full_env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"wrk failed: {done.stdout}\n{done.stderr}")
    data = json.loads(line.removeprefix("WRK_JSON "))
    duration = data["duration_us"] / 1e6
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
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
    )


class Server:
    """``ai-memory serve`` on a free port, with the environment of one database."""

    def __init__(self, env: dict[str, str], log: Path, root: Path = ROOT) -> None:
        """``root``: the checkout whose code the server and the seeding run (bench.ab
        starts one per revision)."""
        self.root = root
        self.port = _free_port()
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

    def rss_kib(self) -> dict[str, int]:
        """Resident and peak resident memory of each server process (master, workers)."""
        pids = [self.proc.pid]
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        if children.exists():
            pids += [int(c) for c in children.read_text().split()]
        sizes: dict[str, int] = {}
        for pid in pids:
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


def _free_port() -> int:
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


def bench_database(label: str, database_url: str | None, workdir: Path) -> dict[str, Any]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AI_MEMORY_") and key != "DATABASE_URL"
    }
    env["AI_MEMORY_DATA_DIR"] = str(workdir / "data")
    if database_url:
        env["DATABASE_URL"] = database_url
    workdir.mkdir(parents=True, exist_ok=True)
    server = Server(env, workdir / "server.log")
    out: dict[str, Any] = {"database": label}
    try:
        base = server.base
        server.seed("projects", SINKS)
        wrk(base, "get.lua", 8, 2, BENCH_PATH="/healthz")  # warm-up: connections, caches
        static = "/static/webui/app.css"
        for c in CONCURRENCIES:
            out[f"floor_c{c}"] = wrk(base, "get.lua", c, SECONDS, BENCH_PATH="/healthz")
            out[f"static_c{c}"] = wrk(base, "get.lua", c, SECONDS, BENCH_PATH=static)
        for c in CONCURRENCIES:
            out[f"send_c{c}"] = wrk(base, "send.lua", c, SECONDS, BENCH_SINKS=str(SINKS))
        for c in CONCURRENCIES:
            server.seed("stock", STOCKED, 250)
            out[f"pop_c{c}"] = wrk(base, "pop.lua", c, SECONDS, BENCH_SINKS=str(STOCKED))
        list_path = "/api/v1/messages?workspace=bench&project=stock-1&limit=50"
        server.seed("stock", STOCKED, 250)
        out["list_c1"] = wrk(base, "get.lua", 1, SECONDS, BENCH_PATH=list_path)
        for c in CONCURRENCIES:
            server.seed("stock", STOCKED, 250)
            tool = "memory_message_send"
            out[f"mcp_send_c{c}"] = wrk(
                base, "mcp.lua", c, SECONDS, BENCH_SINKS=str(SINKS), BENCH_TOOL=tool
            )
            tool = "memory_message_pop"
            out[f"mcp_pop_c{c}"] = wrk(
                base, "mcp.lua", c, SECONDS, BENCH_SINKS=str(STOCKED), BENCH_TOOL=tool
            )

        # Contention: 32 clients on one inbox, kept at 250 until 5,000 went in.
        refiller = subprocess.Popen(
            [sys.executable, "-m", "bench.seed", "refill", str(CONTENTION_MESSAGES), "250"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        uncontended = out["pop_c32"].rps
        seconds = CONTENTION_MESSAGES / max(uncontended * 0.3, 50) + 5
        out["contention"] = wrk(base, "contention.lua", 32, seconds)
        refiller.wait(timeout=600)
        out["contention_db"] = server.seed("hot-claims")

        # Web pages with few projects, then with 1,000 projects and 10,000 pending.
        server.seed("web", 2, 20)
        out["web_queries_small"] = server.seed("web-queries")
        server.seed("web", 1000, 10000 - 20)
        out["web_queries"] = server.seed("web-queries")
        out["web_home"] = wrk(base, "get.lua", 1, SECONDS, BENCH_PATH="/web/")
        out["web_project"] = wrk(base, "get.lua", 1, SECONDS, BENCH_PATH="/web/w/web/w1/")

        # Memory: a send/pop mix over the sink inboxes, RSS after each half of the requests.
        rss_start = server.rss_kib()
        half = MEMORY_REQUESTS // 2
        step = min(max(half / max(out["send_c8"].rps, 50) / 4, 2), 20)
        halves = []
        for _ in range(2):
            done_requests = 0
            while done_requests < half:
                sent = wrk(base, "send.lua", 8, step, BENCH_SINKS=str(SINKS))
                popped = wrk(
                    base, "pop.lua", 8, step, BENCH_SINKS=str(SINKS), BENCH_INBOX_PREFIX="sink"
                )
                done_requests += sent.requests + popped.requests
            halves.append(server.rss_kib())
        out["memory"] = {"start": rss_start, "half": halves[0], "end": halves[1]}

        # Scale: the hot path at one client, then a million historical messages and the
        # same again. The empty figures are taken just before the load rather than reused
        # from the start of the run, so that the machine's drift over the run stays out of
        # the ratio.
        server.seed("stock", STOCKED, 250)
        out["empty_send_c1"] = wrk(base, "send.lua", 1, SECONDS, BENCH_SINKS=str(SINKS))
        out["empty_pop_c1"] = wrk(base, "pop.lua", 1, SECONDS, BENCH_SINKS=str(STOCKED))
        server.seed("stock", STOCKED, 250)
        out["empty_list_c1"] = wrk(base, "get.lua", 1, SECONDS, BENCH_PATH=list_path)
        out["size_before"] = server.seed("size")
        server.seed("history", HISTORY_ROWS, 1000)
        server.seed("settle")
        out["size"] = server.seed("size")
        out["scale_send_c1"] = wrk(base, "send.lua", 1, SECONDS, BENCH_SINKS=str(SINKS))
        server.seed("stock", STOCKED, 250)
        out["scale_pop_c1"] = wrk(base, "pop.lua", 1, SECONDS, BENCH_SINKS=str(STOCKED))
        server.seed("stock", STOCKED, 250)
        out["scale_list_c1"] = wrk(base, "get.lua", 1, SECONDS, BENCH_PATH=list_path)
    finally:
        server.stop()
    return out


def main() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("make bench needs wrk: apt-get install wrk")
    started = datetime.now(UTC)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        wanted = os.environ.get("BENCH_DATABASES", "sqlite,postgresql").split(",")
        # The figures so far are saved after each part, so a late failure loses nothing.
        if "sqlite" in wanted:
            results["sqlite"] = bench_database("SQLite (WAL)", None, Path(tmp) / "sqlite")
            _save(results)
        if "postgresql" in wanted:
            with postgres_database() as url:
                if url is not None:
                    results["postgresql"] = bench_database("PostgreSQL", url, Path(tmp) / "pg")
                    _save(results)
        if os.environ.get("BENCH_PEER", "1") == "1":
            try:
                results["peer"] = bench_peer(Path(tmp) / "peer")
            except Exception as exc:  # the peer is someone else's code: report, go on
                results["peer"] = {"skipped": f"the peer failed: {exc!r}"}
        else:
            results["peer"] = {"skipped": "BENCH_PEER=0"}
    results["tools_list"] = tools_list_size()
    _save(results)
    from bench.report import report

    OUTPUT.write_text(report(_plain(results), started))
    print(OUTPUT.read_text())


def _save(results: dict[str, Any]) -> None:
    OUTPUT_JSON.write_text(json.dumps(_plain(results), indent=2) + "\n")


def bench_peer(workdir: Path) -> dict[str, Any]:
    """The peer's send and read+ack at the same concurrencies, or why it did not run."""
    from bench import peer

    try:
        venv = peer.peer_install(workdir)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        return {"skipped": str(exc)}
    port = _free_port()
    proc = peer.peer_start(venv, port, workdir / "data")
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"version": peer.PEER_VERSION}
    try:
        setup = peer.peer_prepare(base)
        for c in CONCURRENCIES:
            threads = 1 if c == 1 else 2
            env = peer.peer_wrk_env(setup, threads=threads)
            out[f"send_c{c}"] = wrk(base, "peer_send.lua", c, SECONDS, **env)
        for c in CONCURRENCIES:
            threads = 1 if c == 1 else 2
            # Enough ids for the run: a read whose id ran out is not work (it is counted).
            ids = peer.peer_stock(base, setup, peer.ids_needed(1500, SECONDS, margin=1.5))
            env = peer.peer_wrk_env(setup, ids, threads=threads, ids_file=workdir / "ids.txt")
            out[f"read_c{c}"] = wrk(base, "peer_read.lua", c, SECONDS, **env)
    finally:
        peer.peer_stop(proc)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Load):
        return asdict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def machine() -> dict[str, str]:
    return {
        "machine": platform.machine(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
    }


if __name__ == "__main__":
    main()
