"""A/B of two revisions: ``python -m bench.ab REV_A REV_B`` (SQLite; PostgreSQL with
``AB_DATABASE=postgresql``, each revision on a fresh database of its own).

This machine's speed drifts by a third within minutes, so two figures taken a few minutes
apart compare the machine, not the code. Here both revisions serve at once (each from a
worktree of its own, started as ``ai-memory serve`` starts), and short wrk runs alternate
between them, A then B, then B then A; the medians of each and the per-pair ratios are
printed, and the CPU time the server's processes used per request, which drifts less
than the rates (the servers' idle work counts too). ``AB_ROUNDS`` (6), ``AB_SECONDS`` (3)
and ``AB_CLIENTS`` (8) set the loads; ``AB_LOADS`` which are compared (also ``list`` and
``web``, a stocked inbox's list and project page).
Not part of ``make bench``: it answers "did this change help", not "how fast is it".
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench.harness import ROOT, SINKS, STOCKED, Server, postgres_database, wrk

ROUNDS = int(os.environ.get("AB_ROUNDS", "6"))
SECONDS = float(os.environ.get("AB_SECONDS", "3"))
CLIENTS = int(os.environ.get("AB_CLIENTS", "8"))
DATABASE = os.environ.get("AB_DATABASE", "sqlite")
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
ALL_LOADS = {
    "floor": ("get.lua", {"BENCH_PATH": "/healthz"}),
    "send": ("send.lua", {"BENCH_SINKS": str(SINKS)}),
    "pop": ("pop.lua", {"BENCH_SINKS": str(STOCKED)}),
    # A stocked inbox (100 pending): its list, and its web project page (Mailbox and
    # Recent Activity).
    "list": ("get.lua", {"BENCH_PATH": "/api/v1/messages?workspace=bench&project=stock-1"}),
    "web": ("get.lua", {"BENCH_PATH": "/web/w/bench/stock-1/"}),
}
# ``AB_LOADS`` (comma-separated, of ``ALL_LOADS``): the loads compared; default the floor,
# send and pop.
LOADS = {name: ALL_LOADS[name] for name in os.environ.get("AB_LOADS", "floor,send,pop").split(",")}
STOCKED_LOADS = {"pop", "list", "web"}


def _server(revision: str, workdir: Path, database_url: str | None) -> Server:
    checkout = workdir / "checkout"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-q", str(checkout), revision],
        cwd=ROOT,
        check=True,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
    env.pop("DATABASE_URL", None)
    env["AI_MEMORY_DATA_DIR"] = str(workdir / "data")
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    server = Server(env, workdir / "server.log", root=checkout)
    server.seed("projects", SINKS)
    wrk(server.base, "get.lua", CLIENTS, 1, BENCH_PATH="/healthz")  # warm-up
    return server


def main() -> None:
    revisions = sys.argv[1:3]
    if len(revisions) != 2:
        raise SystemExit("usage: python -m bench.ab REV_A REV_B")
    workdirs = [Path(tempfile.mkdtemp(prefix=f"ab-{label}-")) for label in "AB"]
    servers: list[Server] = []
    databases = ExitStack()
    try:
        urls: list[str | None] = [None, None]
        if DATABASE == "postgresql":
            urls = [databases.enter_context(postgres_database()) for _ in revisions]
            if None in urls:
                raise SystemExit("AB_DATABASE=postgresql: PostgreSQL is not reachable")
        servers = [
            _server(rev, work, url)
            for rev, work, url in zip(revisions, workdirs, urls, strict=True)
        ]
        rates: dict[str, list[list[float]]] = {load: [[], []] for load in LOADS}
        p99s: dict[str, list[list[float]]] = {load: [[], []] for load in LOADS}
        cpu_us: dict[str, list[list[float]]] = {load: [[], []] for load in LOADS}
        for n in range(ROUNDS):
            order = (0, 1) if n % 2 == 0 else (1, 0)
            for load, (script, env) in LOADS.items():
                for i in order:
                    if load in STOCKED_LOADS:
                        servers[i].seed("stock", STOCKED, 100)
                    ticks = servers[i].cpu_ticks()
                    run = wrk(servers[i].base, script, CLIENTS, SECONDS, **env)
                    used = (servers[i].cpu_ticks() - ticks) / TICKS_PER_SECOND
                    cpu_us[load][i].append(used / max(1, run.requests) * 1e6)
                    rates[load][i].append(run.rps)
                    p99s[load][i].append(run.sent_p99_ms)
        print(
            f"A = {revisions[0]}, B = {revisions[1]}, {DATABASE}, {CLIENTS} clients, "
            f"{ROUNDS} rounds"
        )
        for load, (a, b) in rates.items():
            pairs = ", ".join(f"{y / x:.2f}" for x, y in zip(a, b, strict=True))
            median_a, median_b = statistics.median(a), statistics.median(b)
            print(
                f"{load}: A {median_a:.0f} req/s, B {median_b:.0f} req/s, "
                f"B/A {median_b / median_a:.2f} (pairs: {pairs}); p99 as sent "
                f"A {statistics.median(p99s[load][0]):.1f} ms, "
                f"B {statistics.median(p99s[load][1]):.1f} ms; server CPU per request "
                f"A {statistics.median(cpu_us[load][0]):.0f} µs, "
                f"B {statistics.median(cpu_us[load][1]):.0f} µs"
            )
    finally:
        for server in servers:
            server.stop()
        databases.close()
        for work in workdirs:
            if (work / "checkout").exists():
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(work / "checkout")],
                    cwd=ROOT,
                    check=False,
                )
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
