"""The waiting and waking part of ``make bench`` (docs/reference.md#waiting-and-waking).

Run alone as ``python -m bench.waiting`` (it merges its figures into
``docs/benchmarks.json`` and writes ``docs/benchmarks.md`` again) or as part of
``python -m bench.run``; ``BENCH_WAITING_ONLY=herd`` (a list) measures those figures
alone and keeps the others. For each database it starts ``ai-memory serve`` as a user would
(gunicorn's gevent worker: a parked call is a greenlet) and measures, in one run:

- **parked**: send and pop at 8 clients (wrk) on two servers of one build, each on a
  database of its own: one with ``PARKED`` pops parked on as many empty inboxes
  throughout (each parking again when its 60 s are up, their ends spread over the
  minute), the other with none; their loads take turns, round by round. The resident
  memory of every server process before and with the parked calls, and what the parked
  calls were answered (a refusal, 429 ``too_many_waits``, is counted).
- **herd**: the server's CPU per send to one inbox with ``HERD_PARKED`` pops parked on
  it (each send wakes one, which claims the message, answers and parks again), against
  sends to an inbox with none, and with one, in rounds that take turns.
- **shutdown**: the time from SIGTERM to the server to the answers of
  ``SHUTDOWN_PARKED`` parked pops.
- **wake**: the latency from a send's answer to the answer of the pop it released, for a pop
  parked in one server and a send through another on the same database (two ``ai-memory
  serve`` processes: on SQLite two process trees on one host, on PostgreSQL what two hosts
  are), and for both through one server.
- **slow clients**: ``/healthz`` and send at 8 clients with and without ``SLOW_CLIENTS``
  clients that trickle a request one byte every 2 s, in alternating rounds.
- **burst**: 16 pops parked on one inbox while 1,000 messages are sent to it; every
  message must be claimed exactly once.

The parked pops and the slow clients come from ``bench.crowd``, a process of their own.
They all come from 127.0.0.1, one caller to an anonymous server, so the server they
park on runs with ``AI_MEMORY_MAX_WAITS_PER_CALLER`` raised to their number; the other
keeps the default.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

from aimemory_site.lib.wait_caps import MAX_WAITS_DEFAULT
from bench.harness import (
    OUTPUT,
    OUTPUT_JSON,
    ROOT,
    STOCKED,
    Load,
    Server,
    postgres_database,
    sinks_for,
    wrk,
)

PARKED = int(os.environ.get("BENCH_PARKED", "10000"))
# Pairs of rounds within one run ranged over a fifth of the rate on PostgreSQL: three
# rounds left a ratio known to a tenth at best.
ROUNDS = int(os.environ.get("BENCH_WAIT_ROUNDS", "5"))
SECONDS = float(os.environ.get("BENCH_WAIT_SECONDS", "5"))
WAKES = int(os.environ.get("BENCH_WAKES", "200"))
#: A load run before each measured one, in both modes alike, and not measured.
WARM_SECONDS = 1.0
SLOW_CLIENTS = int(os.environ.get("BENCH_SLOW_CLIENTS", "2000"))
# Recipient projects for sends: one server takes the sends of the parked rounds (a
# warm-up and a load each) and of the slow-client rounds (a load idle and one slow).
SEND_SINKS = sinks_for(ROUNDS * (WARM_SECONDS + 3 * SECONDS))
BURST_POPPERS, BURST_MESSAGES = 16, 1000
#: Pops parked on the one inbox of the herd's sends; sends a round, each round to an
#: inbox of its own (``bench/herd-N``): with none parked they stay pending, under the
#: inbox's bound of 256.
HERD_PARKED, HERD_SENDS = 1000, 250
HERD_ROUNDS = min(int(os.environ.get("BENCH_HERD_ROUNDS", "5")), 8)
#: ``BENCH_WAITING_ONLY=herd,burst``: measure these figures alone, keeping the others of
#: the earlier run (each such figure says when it was measured).
ONLY = frozenset(filter(None, os.environ.get("BENCH_WAITING_ONLY", "").split(",")))
#: After the herd's last send, the time its pop takes to answer and park again.
HERD_SETTLE_SECONDS = 0.5
SHUTDOWN_PARKED = 1000
#: Every wait of the server with the parked calls comes from one caller (127.0.0.1).
PER_CALLER_PARKED = max(PARKED, HERD_PARKED, SHUTDOWN_PARKED)


def _environment(
    workdir: Path, database_url: str | None, *, parked: bool = False
) -> dict[str, str]:
    """The environment of a server on ``database_url`` (None: SQLite in ``workdir``);
    ``parked``: the server the crowds park on, whose caps take them all."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
    env.pop("DATABASE_URL", None)
    env["AI_MEMORY_DATA_DIR"] = str(workdir / "data")
    if parked:
        env["AI_MEMORY_MAX_WAITS_PER_CALLER"] = str(PER_CALLER_PARKED)
        if PARKED > MAX_WAITS_DEFAULT:
            env["AI_MEMORY_MAX_WAITS"] = str(PARKED)
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


class Crowd:
    """``bench.crowd`` against ``base`` in a process of its own, started and ready: every
    client has sent its first request (or byte). ``spec``: the fields of
    ``bench.crowd.Spec``. ``stats()`` are its counts so far, ``stop()`` its last."""

    def __init__(self, base: str, ready_seconds: float = 180.0, **spec: Any) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.crowd", base, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self._stdout: IO[bytes] = self.proc.stdout
        self.last: dict[str, Any] = {}
        ready = self._line(ready_seconds)
        if not ready.get("ready"):
            self._end()
            why = ready.get("error", f"not every client had sent within {ready_seconds:.0f} s")
            raise SystemExit(f"the crowd did not start: {why}")

    def _line(self, timeout: float) -> dict[str, Any]:
        """Its next line, or {} when none came within ``timeout`` seconds."""
        readable, _, _ = select.select([self._stdout], [], [], timeout)
        line = self._stdout.readline() if readable else b""
        if line:
            self.last = json.loads(line)
            return self.last
        return {}

    def stats(self) -> dict[str, Any]:
        try:
            self._stdin.write(b"stats\n")
        except OSError:
            raise SystemExit("the crowd has died") from None
        counts = self._line(30)
        if not counts:
            raise SystemExit("the crowd did not answer within 30 s")
        return counts

    def stop(self) -> dict[str, Any]:
        """Close every client; the counts at the end (the last ones it gave, if it gave
        none then)."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self._stdin.write(b"stop\n")
                self._stdin.close()
            self._line(60)
        self._end()
        return self.last

    def _end(self) -> None:
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Crowd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _crowd_cores(first: dict[str, Any], last: dict[str, Any]) -> float:
    """The crowd's own CPU between two of its counts, in cores (1.0 = one core)."""
    wall = last.get("at", 0.0) - first.get("at", 0.0)
    return (last.get("cpu_s", 0.0) - first.get("cpu_s", 0.0)) / wall if wall > 0 else 0.0


def _park_counts(counts: dict[str, Any]) -> dict[str, Any]:
    """What the parked calls were answered: their statuses, and the calls refused (any
    answer but 200) or failed (no answer: a broken or closed connection, a timeout)."""
    statuses: dict[str, int] = counts.get("statuses", {})
    return {
        "sent": counts.get("sent", 0),
        "answers": counts.get("answers", 0),
        "statuses": statuses,
        "refused": sum(n for status, n in statuses.items() if status != "200"),
        "errors": counts.get("errors", 0),
        "error_kinds": counts.get("error_kinds", {}),
    }


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


def _settled(server: Server, crowd: Crowd, ticks_before: int, parkers: int) -> float:
    """Wait until ``server`` has parked the ``parkers`` pops of ``crowd`` (which started
    when the server had used ``ticks_before``); the seconds waited.

    It is never quiet with them: one parks again every 60 / ``parkers`` seconds (167 a
    second for 10,000). So it is settled once its processes use, over ``QUIET_SECONDS``,
    less than ``QUIET_SHARE`` of a core plus twice what those parks cost, each costing
    what a park has cost so far (the crowd's requests over the server's CPU since it
    started: while they pile up unserved, an underestimate, which only waits longer)."""
    ticks_per_second = os.sysconf("SC_CLK_TCK")
    started = time.monotonic()
    before = server.cpu_ticks()
    while time.monotonic() - started < QUIET_WAIT_SECONDS:
        time.sleep(QUIET_SECONDS)
        now = server.cpu_ticks()
        per_park = (now - ticks_before) / max(1, crowd.stats()["sent"])
        parks = parkers / 60 * QUIET_SECONDS
        if now - before < QUIET_SHARE * QUIET_SECONDS * ticks_per_second + 2 * parks * per_park:
            break
        before = now
    return time.monotonic() - started


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
    the calls parked and unparked round by round: each round's parks and their ends
    left the next load a server that had just been busy, and the ratio swung by a tenth
    and more between runs. Here the parked calls are as a server that has them sees
    them: there all along, one of them parking again every 60 / ``PARKED`` seconds."""
    runs: dict[str, list[Load]] = {
        f"{load}_{mode}": [] for load in ("send", "pop") for mode in ("idle", "parked")
    }
    rss_before = _rss_total(busy)
    rss_idle: list[int] = []
    rss_parked: list[int] = []
    ticks_before = busy.cpu_ticks()
    started = time.monotonic()
    with Crowd(busy.base, parkers=PARKED, inbox="park-{n}") as crowd:
        # 10,000 pops take seconds to park (each looks at its inbox first): a load
        # started meanwhile measured the storm, with sends' p99 at 3 s on PostgreSQL
        # at 500 of them.
        _settled(busy, crowd, ticks_before, PARKED)
        parking_seconds = time.monotonic() - started
        settled = crowd.stats()
        for n in range(ROUNDS):
            turns = [(idle, "idle"), (busy, "parked")]
            for load in ("send", "pop"):
                for server, mode in turns if n % 2 == 0 else turns[::-1]:
                    if load == "pop":
                        server.seed("stock", STOCKED, 100)
                    # Not measured: the first second of a load after a pause, in both.
                    _load(server.base, load, 8, WARM_SECONDS)
                    runs[f"{load}_{mode}"].append(_load(server.base, load, 8, SECONDS))
            rss_idle.append(_rss_total(idle))
            rss_parked.append(_rss_total(busy))
        peak = _rss_total(busy, "VmHWM")
        peak_process = _rss_largest(busy, "VmHWM")
        crowd_cores = _crowd_cores(settled, crowd.stats())
    figures: dict[str, Any] = {name: _summary(loads) for name, loads in runs.items()}
    parked_kib = statistics.median(rss_parked)
    figures |= {
        "parked": PARKED,
        "parking_seconds": parking_seconds,
        "rss_before_kib": rss_before,
        "rss_idle_kib": statistics.median(rss_idle),
        "rss_parked_kib": parked_kib,
        "peak_kib": peak,
        "peak_process_kib": peak_process,
        "processes": len([k for k in busy.rss_kib() if k.endswith("VmRSS")]),
        "kib_per_parked": (parked_kib - rss_before) / PARKED,
        "parkers": _park_counts(crowd.last),
        "crowd_cores": crowd_cores,
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


def slow_clients(server: Server) -> dict[str, Any]:
    """``/healthz`` and send at 8 clients with and without ``SLOW_CLIENTS`` clients that
    each send a request one byte every 2 s (``bench.crowd._trickles``: a third their
    head, the rest their body), connecting again whenever the server closes them."""
    runs: dict[str, list[Load]] = {
        f"{load}_{mode}": [] for load in ("floor", "send") for mode in ("idle", "slow")
    }
    seen: dict[str, Any] = {"connects": 0, "closed": 0, "errors": 0, "statuses": {}}
    crowd_cores: list[float] = []
    for n in range(ROUNDS):
        for mode in ("idle", "slow") if n % 2 == 0 else ("slow", "idle"):
            if mode == "slow":
                with Crowd(server.base, tricklers=SLOW_CLIENTS) as crowd:
                    time.sleep(2.5)  # every slow client is trickling, past its first byte
                    first = crowd.stats()
                    for load in ("floor", "send"):
                        runs[f"{load}_slow"].append(_load(server.base, load, 8, SECONDS))
                    crowd_cores.append(_crowd_cores(first, crowd.stats()))
                counts = crowd.last
                seen["connects"] += counts.get("trickle_connects", 0)
                seen["closed"] += counts.get("trickle_closed", 0)
                seen["errors"] += counts.get("trickle_errors", 0)
                for status, count in counts.get("trickle_statuses", {}).items():
                    seen["statuses"][status] = seen["statuses"].get(status, 0) + count
                _quiet(server)  # their connections closed, and the server done with them
            else:
                for load in ("floor", "send"):
                    runs[f"{load}_idle"].append(_load(server.base, load, 8, SECONDS))
    figures: dict[str, Any] = {name: _summary(loads) for name, loads in runs.items()}
    figures |= {"clients": SLOW_CLIENTS, **seen, "crowd_cores": statistics.median(crowd_cores)}
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


def herd(server: Server) -> dict[str, Any]:
    """The server's CPU per send to one inbox with ``HERD_PARKED`` pops parked on it,
    against sends to an inbox with none, and to one with a single pop parked (the same
    cycle without the herd), in rounds of ``HERD_SENDS`` sequential sends that take
    turns, each round to an inbox of its own.

    Counted over the whole cycle: a send wakes one pop of the host (the one parked
    longest in the process that takes the wake), which claims the message, answers, and
    is parked again by its client. Only the server's processes: PostgreSQL's own work
    for the looks is not counted."""
    modes = ("none", "one", "parked")
    per_send: dict[str, list[float]] = {mode: [] for mode in modes}
    seen: dict[str, Any] = {"claimed": 0, "statuses": {}, "errors": 0}
    with httpx.Client(base_url=server.base, timeout=30) as client:
        for n in range(HERD_ROUNDS):
            for k, mode in enumerate(modes if n % 2 == 0 else modes[::-1]):
                inbox = f"herd-{len(modes) * n + k}"
                if mode == "none":
                    _quiet(server)
                    per_send[mode].append(_herd_sends(server, client, inbox, None))
                    continue
                parkers = HERD_PARKED if mode == "parked" else 1
                with Crowd(server.base, parkers=parkers, inbox=inbox, spread=False) as crowd:
                    _quiet(server)  # every pop parked; their waits end after this round
                    per_send[mode].append(_herd_sends(server, client, inbox, crowd))
                counts = _park_counts(crowd.last)
                seen["claimed"] += crowd.last.get("claimed", 0)
                seen["errors"] += counts["errors"]
                for status, count in counts["statuses"].items():
                    seen["statuses"][status] = seen["statuses"].get(status, 0) + count
    ms = {mode: statistics.median(runs) for mode, runs in per_send.items()}
    return {
        "measured_at": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "parked": HERD_PARKED,
        "sends": HERD_SENDS,
        "rounds": HERD_ROUNDS,
        "none_ms": ms["none"],
        "one_ms": ms["one"],
        "parked_ms": ms["parked"],
        "ratio": ms["parked"] / ms["none"] if ms["none"] else 0.0,
        "ratio_to_one": ms["parked"] / ms["one"] if ms["one"] else 0.0,
        "round_ms": per_send,
        **seen,
    }


def _herd_sends(server: Server, client: httpx.Client, inbox: str, crowd: Crowd | None) -> float:
    """Milliseconds of the server's CPU per send of ``HERD_SENDS`` to ``inbox``; with
    ``crowd``, until its pops have claimed them all and parked again."""
    claimed = crowd.stats()["claimed"] if crowd is not None else 0
    before = server.cpu_ticks()
    for _ in range(HERD_SENDS):
        client.post("/api/v1/messages", json=_send_body(inbox)).raise_for_status()
    deadline = time.monotonic() + 30
    while crowd is not None and crowd.stats()["claimed"] < claimed + HERD_SENDS:
        if time.monotonic() > deadline:
            raise SystemExit(f"the herd's pops claimed less than {HERD_SENDS} messages in 30 s")
        time.sleep(0.05)
    time.sleep(HERD_SETTLE_SECONDS)
    ticks = server.cpu_ticks() - before
    return ticks / os.sysconf("SC_CLK_TCK") * 1000 / HERD_SENDS


def shutdown(server: Server) -> dict[str, Any]:
    """Seconds from SIGTERM to the server (gunicorn's master: ``ai-memory serve`` execs
    it) to the answers of ``SHUTDOWN_PARKED`` parked pops, and to its exit. The server
    is gone afterwards."""
    with Crowd(
        server.base, parkers=SHUTDOWN_PARKED, inbox="park-{n}", spread=False, again=False
    ) as crowd:
        _quiet(server)
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        while crowd.stats()["done"] < SHUTDOWN_PARKED and time.monotonic() < signalled + 30:
            time.sleep(0.05)
        try:
            server.proc.wait(timeout=60)
            exited: float | None = time.monotonic() - signalled
        except subprocess.TimeoutExpired:
            exited = None
    counts = crowd.last
    first, last = counts.get("first_answer_at", 0.0), counts.get("last_answer_at", 0.0)
    return {
        "parked": SHUTDOWN_PARKED,
        **_park_counts(counts),
        "unanswered": SHUTDOWN_PARKED - counts.get("answers", 0),
        "first_answer_s": first - signalled if first else None,
        "last_answer_s": last - signalled if last else None,
        "exited_s": exited,
    }


def _served(env: dict[str, str], workdir: Path, name: str) -> Server:
    server = Server(env, workdir / f"{name}.log")
    server.seed("projects", max(SEND_SINKS, STOCKED))  # sink-N and stock-N alike
    server.seed("parking", max(PARKED, SHUTDOWN_PARKED), 3 * HERD_ROUNDS)
    wrk(server.base, "get.lua", 8, 1, BENCH_PATH="/healthz")  # warm-up
    return server


def _cause(failed: BaseException) -> str:
    if isinstance(failed, SystemExit):
        return str(failed).strip().splitlines()[-1][:300] if str(failed).strip() else "exit"
    return f"{type(failed).__name__}: {failed}"[:300]


def bench_waiting(label: str, database_url: str | None, workdir: Path) -> dict[str, Any]:
    """Every figure of one database. One that could not be measured (a seed, a load or a
    server that failed) is recorded by its cause under ``failed``, a finding too, and
    the others are measured still."""
    env = _environment(workdir, database_url)
    out: dict[str, Any] = {
        "database": label,
        "measured_at": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "failed": {},
    }

    def measure(name: str, figure: Callable[[], Any]) -> None:
        if ONLY and name not in ONLY:
            return
        try:
            out[name] = figure()
        except (SystemExit, Exception) as failed:
            out["failed"][name] = _cause(failed)

    server = _served(env, workdir, "server")
    try:
        try:
            with _busy_twin(database_url, workdir / "busy") as busy:
                measure("parked", lambda: parked(server, busy))
                measure("herd", lambda: herd(busy))
                measure("shutdown", lambda: shutdown(busy))
        except SystemExit as failed:  # the twin did not start
            for name in ("parked", "herd", "shutdown"):
                if not ONLY or name in ONLY:
                    out["failed"].setdefault(name, _cause(failed))
        measure("slow", lambda: slow_clients(server))
        measure("burst", lambda: burst(server))
        measure("wake_one_server", lambda: wake_latency(server.base, server.base))

        def two_servers() -> dict[str, float]:
            other = Server(env, workdir / "other.log")
            try:
                return wake_latency(server.base, other.base)
            finally:
                other.stop()

        measure("wake_two_servers", two_servers)
    finally:
        server.stop()
    return out


@contextmanager
def _busy_twin(database_url: str | None, workdir: Path) -> Iterator[Server]:
    """A second server of the same build, on a database of its own (a fresh PostgreSQL
    database beside ``database_url``'s, or a data dir of its own on SQLite), for the
    parked calls: its per-caller cap takes them all."""
    with contextlib.ExitStack() as stack:
        url = None if database_url is None else stack.enter_context(postgres_database())
        if database_url is not None and url is None:
            raise SystemExit("PostgreSQL is not reachable for the second server")
        server = _served(_environment(workdir, url, parked=True), workdir, "server")
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
    waiting: dict[str, Any] = {**earlier}
    if not ONLY or "measured_at" not in earlier:
        waiting["measured_at"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    if "sqlite" in databases:
        measured = bench_waiting("SQLite (WAL)", None, workdir / "sqlite")
        waiting["sqlite"] = _merged(earlier.get("sqlite"), measured)
        if saved is not None:
            saved(waiting)
    if "postgresql" in databases:
        with postgres_database() as url:
            if url is not None:
                measured = bench_waiting("PostgreSQL", url, workdir / "pg")
                waiting["postgresql"] = _merged(earlier.get("postgresql"), measured)
    return waiting


def _merged(earlier: dict[str, Any] | None, measured: dict[str, Any]) -> dict[str, Any]:
    """``measured``, or with ``ONLY``, ``earlier``'s figures with those measured again
    (the database's own time stays the earlier run's)."""
    if not ONLY or earlier is None:
        return measured
    failed = {k: v for k, v in earlier.get("failed", {}).items() if k not in ONLY}
    kept = {k: v for k, v in earlier.items() if k not in ONLY}
    return {
        **kept,
        **{k: measured[k] for k in ONLY if k in measured},
        "failed": {**failed, **measured["failed"]},
    }


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
    from bench.report import report_write

    report_write(OUTPUT, results)
    print(json.dumps(results["waiting"], indent=2))


if __name__ == "__main__":
    # Each run's data dir and database are fresh; nothing else is needed.
    main()
