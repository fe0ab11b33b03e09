"""The waiting and waking part of ``make bench`` (docs/reference.md#waiting-and-waking).

Run alone as ``python -m bench.waiting`` (it merges its figures into
``docs/benchmarks.json`` and writes ``docs/benchmarks.md`` again) or as part of
``python -m bench.run``. For each database it starts ``ai-memory serve`` as a user would
and measures, in one run against one server:

- **parked**: send and pop at 8 clients (wrk) on two servers of one build, each on a
  database of its own: one with 500 pops parked on 500 empty inboxes throughout (each
  parking again when its 60 s are up, their ends spread over the minute), the other with
  none; their loads take turns, round by round. The resident memory of every server
  process before and with the parked calls.
- **wake**: the latency from a send's answer to the answer of the pop it released, for a pop
  parked in one server and a send through another on the same database (two ``ai-memory
  serve`` processes: on SQLite two process trees on one host, on PostgreSQL what two hosts
  are), and for both through one server.
- **slow clients**: ``/healthz`` and send at 8 clients with and without 20 clients that
  trickle a request one byte every 2 s, in alternating rounds.
- **burst**: 16 pops parked on one inbox while 1,000 messages are sent to it; every
  message must be claimed exactly once.

Under each worker design (``DESIGNS``): the default (``--threads`` requests run at once,
parked calls give their turn back), and plain gthread with a thread per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.run import (
    OUTPUT,
    OUTPUT_JSON,
    STOCKED,
    Load,
    Server,
    postgres_database,
    sinks_for,
    wrk,
)

PARKED = int(os.environ.get("BENCH_PARKED", "500"))
# Pairs of rounds within one run ranged over a fifth of the rate on PostgreSQL: three
# rounds left a ratio known to a tenth at best.
ROUNDS = int(os.environ.get("BENCH_WAIT_ROUNDS", "5"))
SECONDS = float(os.environ.get("BENCH_WAIT_SECONDS", "5"))
WAKES = int(os.environ.get("BENCH_WAKES", "200"))
#: A load run before each measured one, in both modes alike, and not measured.
WARM_SECONDS = 1.0
SLOW_CLIENTS = 20
# Recipient projects for sends: one server takes the sends of the parked rounds (a
# warm-up and a load each) and of the slow-client rounds (a load idle and one slow).
SEND_SINKS = sinks_for(ROUNDS * (WARM_SECONDS + 3 * SECONDS))
BURST_POPPERS, BURST_MESSAGES = 16, 1000
# The worker designs measured: extra ``ai-memory serve`` arguments of each.
DESIGNS = {
    "slots": [],  # the default: --threads at once, parked calls give their turn back
    "threads": ["--threads", "320"],  # plain gthread: every call its own running thread
}


def _environment(workdir: Path, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
    env.pop("DATABASE_URL", None)
    env["AI_MEMORY_DATA_DIR"] = str(workdir / "data")
    if database_url:
        env["DATABASE_URL"] = database_url
    workdir.mkdir(parents=True, exist_ok=True)
    return env


def _pop_body(project: str, wait_seconds: int, **extra: Any) -> dict[str, Any]:
    return {"workspace": "bench", "project": project, "wait_seconds": wait_seconds, **extra}


def _send_body(project: str, body: str = "wake up") -> dict[str, Any]:
    return {
        "to_workspace": "bench",
        "to_project": project,
        "from_workspace": "bench",
        "from_project": "sender",
        "body": body,
    }


class Parkers:
    """``count`` pops parked on ``bench/park-N`` from one asyncio loop in a thread of its
    own; each parks again when its wait is up, until ``stop``. The first waits run from
    1 to 60 s, so that afterwards one of the ``count`` parks again every 60 / ``count``
    seconds, as waits that began at any time do: all at once, 500 of them took seconds to
    park again, in the middle of a measured load. With ``server``, the constructor
    returns once the server's processes have gone quiet: every pop parked."""

    def __init__(
        self, base: str, count: int, prefix: str = "park", server: Server | None = None
    ) -> None:
        self.base, self.count, self.prefix = base, count, prefix
        self.answers = 0
        self.errors = 0
        self.sent = 0
        self._loop = asyncio.new_event_loop()
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 60
        while self.sent < count and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the last requests' bytes reach the server and park
        if server is not None:
            # 500 pops take seconds to park (each connects to the database, looks, and
            # lets its connection go): a load started meanwhile measured the storm, with
            # sends' p99 at 3 s on PostgreSQL.
            _quiet(server)

    def _run(self) -> None:
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        limits = httpx.Limits(max_connections=self.count + 10, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=self.base, limits=limits, timeout=90) as client:
            tasks = [asyncio.create_task(self._park(client, n)) for n in range(self.count)]
            await self._stopping.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _park(self, client: httpx.AsyncClient, n: int) -> None:
        assert self._stopping is not None
        wait = max(1, round(60 * (n + 1) / self.count))
        while not self._stopping.is_set():
            body = _pop_body(f"{self.prefix}-{n}", wait)
            wait = 60
            request = client.post("/api/v1/messages/pop", json=body)
            self.sent += 1
            try:
                answer = await request
                self.answers += 1
                if answer.status_code != 200:
                    self.errors += 1
            except httpx.HTTPError:
                self.errors += 1
                await asyncio.sleep(0.5)

    def stop(self) -> None:
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=30)


#: The share of one core below which a server's processes count as quiet, and how long.
QUIET_SHARE, QUIET_SECONDS, QUIET_WAIT_SECONDS = 0.05, 0.5, 60.0


def _quiet(server: Server) -> None:
    """Wait until the processes of ``server`` use less than ``QUIET_SHARE`` of a core over
    ``QUIET_SECONDS`` (at most ``QUIET_WAIT_SECONDS``)."""
    ticks_per_second = os.sysconf("SC_CLK_TCK")
    before = server.cpu_ticks()
    deadline = time.monotonic() + QUIET_WAIT_SECONDS
    while time.monotonic() < deadline:
        time.sleep(QUIET_SECONDS)
        now = server.cpu_ticks()
        if now - before < QUIET_SHARE * QUIET_SECONDS * ticks_per_second:
            return
        before = now


def _rss_total(server: Server, key: str = "VmRSS") -> int:
    return sum(v for k, v in server.rss_kib().items() if k.endswith(key))


def _rss_largest(server: Server, key: str) -> int:
    return max(v for k, v in server.rss_kib().items() if k.endswith(key))


def _load(base: str, load: str, connections: int, seconds: float) -> Load:
    if load == "send":
        return wrk(base, "send.lua", connections, seconds, BENCH_SINKS=str(SEND_SINKS))
    if load == "pop":
        return wrk(base, "pop.lua", connections, seconds, BENCH_SINKS=str(STOCKED))
    return wrk(base, "get.lua", connections, seconds, BENCH_PATH="/healthz")


def _summary(runs: list[Load]) -> dict[str, float]:
    return {
        "rps": statistics.median(run.rps for run in runs),
        "p50_ms": statistics.median(run.sent_p50_ms for run in runs),
        "p99_ms": statistics.median(run.sent_p99_ms for run in runs),
        "errors": sum(run.errors for run in runs),
    }


def parked(idle: Server, busy: Server) -> dict[str, Any]:
    """Send and pop at 8 clients on ``idle``, with no call parked, and on ``busy``, with
    ``PARKED`` parked throughout; the two take turns load by load, in alternating order.

    Two servers of one build, each on a database of its own, rather than one server with
    the calls parked and unparked round by round: each round's 500 parks and their ends
    left the next load a second of reconnects (the parks close the connections of the
    threads that keep one; docs/hot-path.md#serving-parked-calls) and a server that had
    just been busy, and the ratio swung by a tenth and more between runs. Here the
    parked calls are as a server that has them sees them: there all along, one of them
    parking again every 60 / ``PARKED`` seconds."""
    runs: dict[str, list[Load]] = {
        f"{load}_{mode}": [] for load in ("send", "pop") for mode in ("idle", "parked")
    }
    # Before any call parked: the threads a park starts keep their stacks afterwards.
    rss_before = _rss_total(busy)
    rss_idle: list[int] = []
    rss_parked: list[int] = []
    parkers = Parkers(busy.base, PARKED, server=busy)
    try:
        for n in range(ROUNDS):
            turns = [(idle, "idle"), (busy, "parked")]
            for load in ("send", "pop"):
                for server, mode in turns if n % 2 == 0 else turns[::-1]:
                    if load == "pop":
                        server.seed("stock", STOCKED, 100)
                    # Not measured: the first second of a load after a pause reconnects
                    # the threads whose connections a park closed meanwhile, in both.
                    _load(server.base, load, 8, WARM_SECONDS)
                    runs[f"{load}_{mode}"].append(_load(server.base, load, 8, SECONDS))
            rss_idle.append(_rss_total(idle))
            rss_parked.append(_rss_total(busy))
        peak = _rss_total(busy, "VmHWM")
        peak_process = _rss_largest(busy, "VmHWM")
        parked_errors = parkers.errors
    finally:
        parkers.stop()
    figures: dict[str, Any] = {name: _summary(loads) for name, loads in runs.items()}
    parked_kib = statistics.median(rss_parked)
    figures |= {
        "parked": PARKED,
        "rss_before_kib": rss_before,
        "rss_idle_kib": statistics.median(rss_idle),
        "rss_parked_kib": parked_kib,
        "peak_kib": peak,
        "peak_process_kib": peak_process,
        "processes": len([k for k in busy.rss_kib() if k.endswith("VmRSS")]),
        "kib_per_parked": (parked_kib - rss_before) / PARKED,
        "parker_errors": parked_errors,
        "send_ratio": _paired_ratio(runs["send_idle"], runs["send_parked"]),
        "pop_ratio": _paired_ratio(runs["pop_idle"], runs["pop_parked"]),
        "send_round_ratios": _round_ratios(runs["send_idle"], runs["send_parked"]),
        "pop_round_ratios": _round_ratios(runs["pop_idle"], runs["pop_parked"]),
    }
    return figures


def _paired_ratio(without: list[Load], with_: list[Load]) -> float:
    """The median of each round's rate with over its rate without: the two loads of a
    round run back to back, so the run's drift (the database grows with every send)
    falls on both alike."""
    return statistics.median(_round_ratios(without, with_))


def _round_ratios(without: list[Load], with_: list[Load]) -> list[float]:
    return [round(b.rps / a.rps, 3) for a, b in zip(without, with_, strict=True)]


def _park_one(client: httpx.Client, answered: list[float], claimed: list[Any]) -> None:
    answer = client.post("/api/v1/messages/pop", json=_pop_body("wake", 10))
    answered.append(time.perf_counter())
    claimed.append(answer.json().get("message"))


def wake_latency(pop_base: str, send_base: str, rounds: int = WAKES) -> dict[str, float]:
    """Milliseconds from a send's answer to the answer of the pop it released; the pop is
    parked through ``pop_base``, the send goes through ``send_base``."""
    latencies: list[float] = []
    missed = 0
    with (
        httpx.Client(base_url=pop_base, timeout=30) as pops,
        httpx.Client(base_url=send_base, timeout=30) as sends,
    ):
        for _ in range(rounds):
            answered: list[float] = []
            claimed: list[Any] = []

            popper = threading.Thread(target=_park_one, args=(pops, answered, claimed))
            popper.start()
            time.sleep(0.05)  # the pop reaches the server and parks
            sends.post("/api/v1/messages", json=_send_body("wake")).raise_for_status()
            sent = time.perf_counter()
            popper.join(timeout=15)
            if not claimed or claimed[0] is None:
                missed += 1
                continue
            latencies.append(max(0.0, answered[0] - sent) * 1000)
    latencies.sort()
    return {
        "rounds": rounds,
        "missed": missed,
        "p50_ms": statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] if latencies else float("nan"),
        "max_ms": latencies[-1] if latencies else float("nan"),
    }


@contextmanager
def trickling(base: str, clients: int = SLOW_CLIENTS) -> Iterator[dict[str, int]]:
    """``clients`` connections that each send a request one byte every 2 s, never
    finishing it (reconnecting when the server closes them)."""
    host, port = base.removeprefix("http://").split(":")
    request = (
        b"POST /api/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000
    )
    stats = {"reconnects": 0}
    stop = threading.Event()

    def connect() -> tuple[socket.socket, int]:
        return socket.create_connection((host, int(port)), timeout=5), 0

    def run() -> None:
        conns = [connect() for _ in range(clients)]
        while not stop.wait(2.0):
            for i, (sock, sent) in enumerate(conns):
                try:
                    sock.send(request[sent : sent + 1])
                    conns[i] = (sock, sent + 1)
                except OSError:
                    sock.close()
                    stats["reconnects"] += 1
                    conns[i] = connect()
        for sock, _ in conns:
            sock.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(2.5)  # every slow client has connected and sent its first byte
    try:
        yield stats
    finally:
        stop.set()
        thread.join(timeout=10)


def slow_clients(server: Server) -> dict[str, Any]:
    runs: dict[str, list[Load]] = {
        f"{load}_{mode}": [] for load in ("floor", "send") for mode in ("idle", "slow")
    }
    reconnects = 0
    for n in range(ROUNDS):
        for mode in ("idle", "slow") if n % 2 == 0 else ("slow", "idle"):
            if mode == "slow":
                with trickling(server.base) as stats:
                    for load in ("floor", "send"):
                        runs[f"{load}_slow"].append(_load(server.base, load, 8, SECONDS))
                reconnects += stats["reconnects"]
            else:
                for load in ("floor", "send"):
                    runs[f"{load}_idle"].append(_load(server.base, load, 8, SECONDS))
    figures: dict[str, Any] = {name: _summary(loads) for name, loads in runs.items()}
    figures["reconnects"] = reconnects
    for load in ("floor", "send"):
        idle, slow = figures[f"{load}_idle"], figures[f"{load}_slow"]
        figures[f"{load}_p99_ratio"] = slow["p99_ms"] / idle["p99_ms"] if idle["p99_ms"] else 0
    return figures


def burst(server: Server) -> dict[str, Any]:
    """16 pops parked on ``bench/burst`` (each popping again once answered) while
    1,000 messages are sent to it from 4 clients."""
    claimed: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def popper() -> None:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            while not done.is_set():
                answer = client.post("/api/v1/messages/pop", json=_pop_body("burst", 2))
                message = answer.json().get("message")
                if message is not None:
                    with lock:
                        claimed.append(message["id"])

    def sender(count: int) -> None:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            for _ in range(count):
                client.post("/api/v1/messages", json=_send_body("burst")).raise_for_status()

    poppers = [threading.Thread(target=popper) for _ in range(BURST_POPPERS)]
    for thread in poppers:
        thread.start()
    time.sleep(1.0)  # parked
    started = time.perf_counter()
    senders = [threading.Thread(target=sender, args=(BURST_MESSAGES // 4,)) for _ in range(4)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    deadline = time.monotonic() + 30
    while len(claimed) < BURST_MESSAGES and time.monotonic() < deadline:
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    done.set()
    for thread in poppers:
        thread.join(timeout=10)
    with httpx.Client(base_url=server.base, timeout=30) as client:
        left = client.get(
            "/api/v1/messages", params={"workspace": "bench", "project": "burst", "limit": 200}
        ).json()["messages"]
    return {
        "messages": BURST_MESSAGES,
        "claimed": len(claimed),
        "distinct": len(set(claimed)),
        "pending_after": len(left),
        "seconds": seconds,
    }


def _served(env: dict[str, str], workdir: Path, design: list[str], name: str) -> Server:
    server = Server(env, workdir / f"{name}.log", extra_args=design)
    server.seed("projects", SEND_SINKS)
    server.seed("parking", PARKED)
    wrk(server.base, "get.lua", 8, 1, BENCH_PATH="/healthz")  # warm-up
    return server


def bench_waiting(label: str, database_url: str | None, workdir: Path) -> dict[str, Any]:
    env = _environment(workdir, database_url)
    out: dict[str, Any] = {
        "database": label,
        "measured_at": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "designs": {},
    }
    for design, arguments in DESIGNS.items():
        server = _served(env, workdir, arguments, f"server-{design}")
        try:
            try:
                with _busy_twin(database_url, workdir / f"busy-{design}", arguments) as busy:
                    figures = parked(server, busy)
                out["designs"][design] = {"parked": figures, "slow": slow_clients(server)}
            except SystemExit as failed:  # a seed or load that could not run: a finding too
                out["designs"][design] = {"failed": str(failed).splitlines()[-1][:300]}
                continue
            if design == "slots":
                out["burst"] = burst(server)
                out["wake_one_server"] = wake_latency(server.base, server.base)
                other = Server(env, workdir / "other.log")
                try:
                    out["wake_two_servers"] = wake_latency(server.base, other.base)
                finally:
                    other.stop()
        finally:
            server.stop()
    return out


@contextmanager
def _busy_twin(database_url: str | None, workdir: Path, design: list[str]) -> Iterator[Server]:
    """A second server of the same build and design, on a database of its own (a fresh
    PostgreSQL database beside ``database_url``'s, or a data dir of its own on SQLite),
    for the parked calls."""
    with contextlib.ExitStack() as stack:
        url = None if database_url is None else stack.enter_context(postgres_database())
        if database_url is not None and url is None:
            raise SystemExit("PostgreSQL is not reachable for the second server")
        server = _served(_environment(workdir, url), workdir, design, "server")
        stack.callback(server.stop)
        yield server


def waiting_figures(
    databases: list[str],
    workdir: Path,
    earlier: dict[str, Any],
    saved: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every figure of this part, for each of ``databases`` (``sqlite``, ``postgresql``),
    over the ``earlier`` run's: a run of one database keeps the other's figures.
    ``saved`` is handed the figures so far after each database."""
    waiting: dict[str, Any] = {
        **earlier,
        "measured_at": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    if "sqlite" in databases:
        waiting["sqlite"] = bench_waiting("SQLite (WAL)", None, workdir / "sqlite")
        if saved is not None:
            saved(waiting)
    if "postgresql" in databases:
        with postgres_database() as url:
            if url is not None:
                waiting["postgresql"] = bench_waiting("PostgreSQL", url, workdir / "pg")
    return waiting


def main() -> None:
    """This part alone: its figures replace the previous ones of ``docs/benchmarks.json``,
    and ``docs/benchmarks.md`` is written again from the whole."""
    results: dict[str, Any] = json.loads(OUTPUT_JSON.read_text()) if OUTPUT_JSON.exists() else {}
    wanted = os.environ.get("BENCH_DATABASES", "sqlite,postgresql").split(",")

    def saved(waiting: dict[str, Any]) -> None:
        OUTPUT_JSON.write_text(json.dumps({**results, "waiting": waiting}, indent=2) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        results["waiting"] = waiting_figures(wanted, Path(tmp), results.get("waiting", {}), saved)
    OUTPUT_JSON.write_text(json.dumps(results, indent=2) + "\n")
    from bench.report import report

    OUTPUT.write_text(report(results))
    print(json.dumps(results["waiting"], indent=2))


if __name__ == "__main__":
    # Each run's data dir and database are fresh; nothing else is needed.
    main()
