"""Server CPU per request: ``python -m bench.server_cpu`` (SQLite; ``BENCH_CLIENTS``, 1).

Starts ``ai-memory serve`` as ``make bench`` does and, over a wrk run of each of
``/healthz``, REST send and REST pop, reads the user and system CPU time of the gunicorn
workers from ``/proc`` and divides it by the requests served. Compared with the same
requests run in process, the difference is what gunicorn costs around Django
(docs/hot-path.md). Linux only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bench.harness import SINKS, STOCKED, Server, wrk

CLIENTS = int(os.environ.get("BENCH_CLIENTS", "1"))
SECONDS = 5.0
TICKS = os.sysconf("SC_CLK_TCK")


def _workers(server: Server) -> list[int]:
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
    return [int(pid) for pid in children.read_text().split()]


def _cpu_ticks(pids: list[int]) -> tuple[int, int]:
    """Summed (user, system) clock ticks of ``pids``."""
    user = system = 0
    for pid in pids:
        # Fields after the command name, which may hold spaces: utime is the 12th.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        user += int(fields[11])
        system += int(fields[12])
    return user, system


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="server-cpu-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
    env.pop("DATABASE_URL", None)
    env["AI_MEMORY_DATA_DIR"] = str(work / "data")
    server = Server(env, work / "server.log")
    try:
        server.seed("projects", SINKS)
        wrk(server.base, "get.lua", 8, 2, BENCH_PATH="/healthz")  # warm-up
        pids = _workers(server)
        loads = (
            ("GET /healthz", "get.lua", {"BENCH_PATH": "/healthz"}),
            ("REST send", "send.lua", {"BENCH_SINKS": str(SINKS)}),
            ("REST pop", "pop.lua", {"BENCH_SINKS": str(STOCKED)}),
        )
        print(f"{CLIENTS} client(s); CPU of the gunicorn workers per request")
        for label, script, load_env in loads:
            if script == "pop.lua":
                server.seed("stock", STOCKED, 250)
            user_before, system_before = _cpu_ticks(pids)
            run = wrk(server.base, script, CLIENTS, SECONDS, **load_env)
            user_after, system_after = _cpu_ticks(pids)
            per_request = 1000 / TICKS / max(1, run.requests)
            print(
                f"{label}: {run.rps:.0f} req/s, "
                f"user {(user_after - user_before) * per_request:.2f} ms, "
                f"system {(system_after - system_before) * per_request:.2f} ms"
            )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
