"""``make bench``: measure ``ai-memory serve`` over loopback and write ``docs/benchmarks.md``.

For each database (SQLite, and PostgreSQL when ``BENCH_POSTGRES_URL`` or the local server
at 127.0.0.1:5432 answers) the bench starts the server exactly as ``ai-memory serve`` does,
in a fresh data dir (and a fresh PostgreSQL database), and drives it with ``wrk`` (Lua
scripts in ``bench/wrk/``), a C load generator whose own CPU time is reported beside each
figure so it can be seen not to be the bottleneck. Figures of one database come from one
run against one server and are reported as ratios to the floor (``GET /healthz``) of that
same run, since this machine is noisy. The peer (PyPI ``agent-inbox``) runs in its own
virtualenv beside it when Python 3.13 is at hand. Nothing leaves 127.0.0.1; every load is
bounded in time. The server runs with expiry on (``AI_MEMORY_MESSAGE_TTL``), and the scale
part ends with the retention purge of its million-row history under load.

``BENCH_PARTS`` (comma-separated, of ``PARTS``) measures some parts only and keeps the
previous run's figures of the others; ``bench.waiting`` is the ``waiting`` part.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import (
    OUTPUT,
    OUTPUT_JSON,
    ROOT,
    SECONDS,
    SINKS,
    STOCKED,
    Load,
    Server,
    free_port,
    postgres_database,
    wrk,
    wrk_threads,
)
from bench.mcp_tools_size import tools_list_size

CONCURRENCIES = (1, 8, 32)
HISTORY_ROWS = int(os.environ.get("BENCH_HISTORY_ROWS", "1000000"))
MEMORY_REQUESTS = int(os.environ.get("BENCH_MEMORY_REQUESTS", "100000"))
CONTENTION_MESSAGES = 5000
# The parts of a run (``BENCH_PARTS``, comma-separated; default all). A run of some parts
# keeps the other parts' figures of the previous run in docs/benchmarks.json, each part
# with the moment it was measured.
PARTS = ("loads", "contention", "web", "memory", "scale", "waiting")
WANTED_PARTS = [p for p in os.environ.get("BENCH_PARTS", ",".join(PARTS)).split(",") if p]
# Every message the bench's server takes expires after a week (AI_MEMORY_MESSAGE_TTL), so
# the hot path is measured with expiry on.
MESSAGE_TTL = "7d"
PURGE_DAYS = 30  # the history is 32-90 days old: a purge at 30 days deletes all of it


# Each row's SECONDS are spent as this many short runs, taking turns with the other rows of
# its concurrency (see ``interleaved``).
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))

Round = Callable[[float], Load]


def interleaved(rounds: dict[str, Round]) -> dict[str, Load]:
    """Run each of ``rounds`` for SECONDS in all, as ROUNDS short runs that take turns
    (forwards, then backwards), and merge each one's runs.

    This machine's speed drifts by a third within minutes. Rows measured one after another
    compare the machine at different moments; rows that take turns see the same drift, so
    their ratios (a route over the floor, MCP over REST, ours over the peer) compare code.
    """
    names = list(rounds)
    runs: dict[str, list[Load]] = {name: [] for name in names}
    for n in range(ROUNDS):
        for name in names if n % 2 == 0 else names[::-1]:
            runs[name].append(rounds[name](SECONDS / ROUNDS))
    return {name: _merged(done) for name, done in runs.items()}


def _merged(runs: list[Load]) -> Load:
    """One Load of several runs of one row: their requests over their time; of their
    latency percentiles, the median (a run's own percentiles cannot be pooled)."""
    requests = sum(run.requests for run in runs)
    seconds = sum(run.seconds for run in runs)
    return Load(
        name=runs[0].name,
        connections=runs[0].connections,
        requests=requests,
        seconds=seconds,
        rps=requests / seconds,
        p50_ms=statistics.median(run.p50_ms for run in runs),
        p95_ms=statistics.median(run.p95_ms for run in runs),
        p99_ms=statistics.median(run.p99_ms for run in runs),
        errors=sum(run.errors for run in runs),
        claimed=sum(run.claimed for run in runs),
        empty=sum(run.empty for run in runs),
        wrk_cpu=statistics.mean(run.wrk_cpu for run in runs),
        sent_p50_ms=statistics.median(run.sent_p50_ms for run in runs),
        sent_p95_ms=statistics.median(run.sent_p95_ms for run in runs),
        sent_p99_ms=statistics.median(run.sent_p99_ms for run in runs),
        sent_max_ms=max(run.sent_max_ms for run in runs),
        sent_over_100ms=sum(run.sent_over_100ms for run in runs),
        steal_cores=sum(run.steal_cores * run.seconds for run in runs) / seconds,
        io_stall=sum(run.io_stall * run.seconds for run in runs) / seconds,
    )


def bench_database(
    label: str, database_url: str | None, workdir: Path, peer: PeerRun | None = None
) -> dict[str, Any]:
    """Every figure of one database; with ``peer``, the peer's loads take turns with ours."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AI_MEMORY_") and key != "DATABASE_URL"
    }
    env["AI_MEMORY_DATA_DIR"] = str(workdir / "data")
    env["AI_MEMORY_MESSAGE_TTL"] = MESSAGE_TTL
    if database_url:
        env["DATABASE_URL"] = database_url
    workdir.mkdir(parents=True, exist_ok=True)
    server = Server(env, workdir / "server.log")
    out: dict[str, Any] = {"database": label, "rounds": ROUNDS, "measured": {}}

    def measured(part: str) -> bool:
        """Whether this run measures ``part``; if so, notes when."""
        if part not in WANTED_PARTS:
            return False
        out["measured"][part] = f"{datetime.now(UTC):%Y-%m-%d %H:%M}"
        return True

    try:
        base = server.base
        server.seed("projects", SINKS)
        wrk(base, "get.lua", 8, 2, BENCH_PATH="/healthz")  # warm-up: connections, caches
        static = "/static/webui/app.css"
        list_path = "/api/v1/messages?workspace=bench&project=stock-1&limit=50"

        def load(script: str, c: int, stocked: bool = False, **env: str) -> Round:
            def run(seconds: float) -> Load:
                if stocked:
                    server.seed("stock", STOCKED, 250)
                return wrk(base, script, c, seconds, **env)

            return run

        sinks, stock = str(SINKS), str(STOCKED)
        for c in CONCURRENCIES if measured("loads") else ():
            rounds = {
                f"floor_c{c}": load("get.lua", c, BENCH_PATH="/healthz"),
                f"static_c{c}": load("get.lua", c, BENCH_PATH=static),
                f"send_c{c}": load("send.lua", c, BENCH_SINKS=sinks),
                f"pop_c{c}": load("pop.lua", c, True, BENCH_SINKS=stock),
                f"mcp_send_c{c}": load(
                    "mcp.lua", c, BENCH_SINKS=sinks, BENCH_TOOL="memory_message_send"
                ),
                f"mcp_pop_c{c}": load(
                    "mcp.lua", c, True, BENCH_SINKS=stock, BENCH_TOOL="memory_message_pop"
                ),
            }
            if c == 1:
                rounds["list_c1"] = load("get.lua", 1, True, BENCH_PATH=list_path)
            if peer is not None:
                rounds |= peer.rounds(c)
            out |= interleaved(rounds)

        if measured("contention"):
            out |= _contention(server, env)
        if measured("web"):
            out |= _web(server)
        if measured("memory"):
            out |= _memory(server, out.get("send_c8"))
        if measured("scale"):
            out |= _scale(server)
    finally:
        server.stop()
    return out


def _contention(server: Server, env: dict[str, str]) -> dict[str, Any]:
    """32 clients on one inbox, kept at 250 until 5,000 went in."""
    base, out = server.base, dict[str, Any]()
    refiller = subprocess.Popen(
        [sys.executable, "-m", "bench.seed", "refill", str(CONTENTION_MESSAGES), "250"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    uncontended = wrk(base, "pop.lua", 32, 2, BENCH_SINKS=str(STOCKED)).rps
    seconds = CONTENTION_MESSAGES / max(uncontended * 0.3, 50) + 5
    out["contention"] = wrk(base, "contention.lua", 32, seconds)
    refiller.wait(timeout=600)
    out["contention_db"] = server.seed("hot-claims")
    return out


def _web(server: Server) -> dict[str, Any]:
    base, out = server.base, dict[str, Any]()
    # Web pages with few projects, then with 1,000 projects and 10,000 pending.
    server.seed("web", 2, 20)
    out["web_queries_small"] = server.seed("web-queries")
    server.seed("web", 1000, 10000 - 20)
    # Settled, as before the scale rows: right after the load rows' writes,
    # PostgreSQL's statistics still describe nearly empty tables, and the home page's
    # count ran on a plan made for 120 pending rows (with 42,000: 60-85 ms a page,
    # 38-40 once analysed, as autovacuum would within minutes).
    server.seed("settle")
    out["web_queries"] = server.seed("web-queries")
    out["web_home"] = wrk(base, "get.lua", 1, SECONDS, BENCH_PATH="/web/")
    out["web_project"] = wrk(base, "get.lua", 1, SECONDS, BENCH_PATH="/web/w/web/w1/")
    return out


def _memory(server: Server, send_c8: Load | None) -> dict[str, Any]:
    base, out = server.base, dict[str, Any]()
    # Memory: a send/pop mix over the sink inboxes, RSS after each half of the requests.
    rss_start = server.rss_kib()
    half = MEMORY_REQUESTS // 2
    send_rate = send_c8.rps if send_c8 is not None else 500
    step = min(max(half / max(send_rate, 50) / 4, 2), 20)
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
    return out


def _scale(server: Server) -> dict[str, Any]:
    base, out = server.base, dict[str, Any]()
    list_path = "/api/v1/messages?workspace=bench&project=stock-1&limit=50"
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
    out["purge"] = _purge_under_load(server)
    return out


def _purge_under_load(server: Server) -> dict[str, Any]:
    """Send and pop at 8 clients, alternating, without a purge, then while the million
    finished rows of the history are purged (``AI_MEMORY_RETENTION_DAYS``'s purge, run at
    once as ``manage purge_messages`` runs it); the purge's rows per second."""

    def rounds(count: int, until: Callable[[], bool] = lambda: False) -> dict[str, list[Load]]:
        runs: dict[str, list[Load]] = {"send": [], "pop": []}
        for _ in range(count):
            if until():
                break
            runs["send"].append(wrk(server.base, "send.lua", 8, 3, BENCH_SINKS=str(SINKS)))
            server.seed("stock", STOCKED, 100)
            runs["pop"].append(wrk(server.base, "pop.lua", 8, 3, BENCH_SINKS=str(STOCKED)))
        return runs

    quiet = rounds(3)
    started = time.monotonic()
    purge = subprocess.Popen(
        [sys.executable, "-m", "bench.seed", "purge", str(PURGE_DAYS)],
        env=server.env,
        cwd=server.root,
        stdout=subprocess.PIPE,
        text=True,
    )
    during = rounds(6, until=lambda: purge.poll() is not None)
    stdout, _ = purge.communicate(timeout=3600)
    seconds = time.monotonic() - started
    counts = json.loads(stdout.strip().splitlines()[-1])

    def p99(runs: list[Load]) -> float:
        return statistics.median(run.sent_p99_ms for run in runs) if runs else 0.0

    return {
        "counts": counts,
        "seconds": seconds,
        "rows_per_s": counts["messages"] / seconds if seconds else 0.0,
        "rounds_during": len(during["send"]),
        **{f"{load}_quiet_p99_ms": p99(quiet[load]) for load in quiet},
        **{f"{load}_during_p99_ms": p99(during[load]) for load in during},
        **{f"{load}_quiet_rps": statistics.median(r.rps for r in quiet[load]) for load in quiet},
        **{
            f"{load}_during_rps": statistics.median(r.rps for r in during[load])
            if during[load]
            else 0.0
            for load in during
        },
    }


def main() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("make bench needs wrk: apt-get install wrk")
    started = datetime.now(UTC)
    every_part = set(WANTED_PARTS) == set(PARTS)
    # A run of some parts updates the figures of the previous run (docs/benchmarks.json).
    results: dict[str, Any] = (
        {} if every_part or not OUTPUT_JSON.exists() else json.loads(OUTPUT_JSON.read_text())
    )
    loads = [part for part in WANTED_PARTS if part != "waiting"]
    peer_wanted = "loads" in WANTED_PARTS
    with tempfile.TemporaryDirectory() as tmp:
        wanted = os.environ.get("BENCH_DATABASES", "sqlite,postgresql").split(",")

        def update(key: str, figures: dict[str, Any]) -> None:
            """Save the figures so far after each part, so a late failure loses nothing."""
            earlier = results.get(key, {})
            results[key] = {
                **earlier,
                **figures,
                "measured": {**earlier.get("measured", {}), **figures["measured"]},
            }
            _save(results)

        if loads:
            with peer_running(Path(tmp) / "peer") as (peer, skipped):
                peer = peer if peer_wanted else None
                if "sqlite" in wanted:
                    update("sqlite", bench_database("SQLite (WAL)", None, Path(tmp) / "sq", peer))
                if peer is not None and "sqlite" in wanted:
                    results["peer"] = peer.figures(results["sqlite"])
                elif peer_wanted:
                    results["peer"] = {"skipped": skipped or "no SQLite run to take turns with"}
            if "postgresql" in wanted:
                with postgres_database() as url:
                    if url is not None:
                        update("postgresql", bench_database("PostgreSQL", url, Path(tmp) / "pg"))
        if "waiting" in WANTED_PARTS:
            from bench.waiting import waiting_figures

            results["waiting"] = waiting_figures(
                wanted, Path(tmp) / "waiting", results.get("waiting", {})
            )
            _save(results)
    results["tools_list"] = tools_list_size()
    if every_part or "started" not in results:
        results["started"] = f"{started:%Y-%m-%d %H:%M}"
    _save(results)
    from bench.report import report_write

    report_write(OUTPUT, _plain(results))
    print(OUTPUT.read_text())


def _save(results: dict[str, Any]) -> None:
    OUTPUT_JSON.write_text(json.dumps(_plain(results), indent=2) + "\n")


class PeerRun:
    """The peer (PyPI ``agent-inbox``), started and prepared: its send and read+ack loads,
    one short run at a time, for ``interleaved``."""

    def __init__(self, base: str, setup: Any, workdir: Path) -> None:
        self.base = base
        self.setup = setup
        self.workdir = workdir

    def rounds(self, c: int) -> dict[str, Round]:
        from bench import peer

        threads = wrk_threads(c)

        def send(seconds: float) -> Load:
            env = peer.peer_wrk_env(self.setup, threads=threads)
            return wrk(self.base, "peer_send.lua", c, seconds, **env)

        def read(seconds: float) -> Load:
            # Enough ids for the run: a read whose id ran out is not work (it is counted).
            ids = peer.peer_stock(self.base, self.setup, peer.ids_needed(1500, seconds))
            env = peer.peer_wrk_env(
                self.setup, ids, threads=threads, ids_file=self.workdir / "ids.txt"
            )
            return wrk(self.base, "peer_read.lua", c, seconds, **env)

        return {f"peer_send_c{c}": send, f"peer_read_c{c}": read}

    @staticmethod
    def figures(ours: dict[str, Any]) -> dict[str, Any]:
        """The peer's figures, out of the run they took turns in."""
        from bench import peer

        figures: dict[str, Any] = {"version": peer.PEER_VERSION}
        for key in [key for key in ours if key.startswith("peer_")]:
            figures[key.removeprefix("peer_")] = ours.pop(key)
        return figures


@contextmanager
def peer_running(workdir: Path) -> Iterator[tuple[PeerRun | None, str | None]]:
    """The peer up for the block, or None and why (not wanted, not installable, failed)."""
    if os.environ.get("BENCH_PEER", "1") != "1":
        yield None, "BENCH_PEER=0"
        return
    from bench import peer

    try:
        venv = peer.peer_install(workdir)
        port = free_port()
        proc = peer.peer_start(venv, port, workdir / "data")
    except Exception as exc:  # the peer is someone else's code: report, go on
        yield None, f"the peer failed to start: {exc!r}"
        return
    try:
        base = f"http://127.0.0.1:{port}"
        yield PeerRun(base, peer.peer_prepare(base), workdir), None
    finally:
        peer.peer_stop(proc)


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
