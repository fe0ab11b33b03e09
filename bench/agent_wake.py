"""``python -m bench.agent_wake``: how fast mail wakes the real agent clients, what a
waiting hook costs the server, and what killed clients leave behind. It writes its section
of ``docs/benchmarks.md`` (between the markers below) and ``docs/benchmarks-agents.json``.

The real Claude Code and Codex CLIs (the versions the tests pin, fetched from npm into
``~/.cache/ai-memory-tests``), each in tmux with the hooks ``ai-memory init`` wrote, in
front of the tests' model stand-in (tests/agents/standin.py) and one ``ai-memory serve``
on SQLite:

- **Wake latency.** ``AGENT_WAKES`` wakes of one idle session of each client: from the
  send's answer to the stand-in's receipt of the new model turn carrying the inbox notice;
  p50 and p99. Before each send the session's hook is parked again on the server.
- **Requests per minute** that one waiting ``hook wait`` sends to a server with no mail
  for it, counted in the server's access log over ``WAIT_MINUTES`` minutes.
- **Leftovers.** ``AGENT_KILLS`` interactive sessions of each client, each SIGKILLed once
  its hook is parked: the ai-memory waiters still running 6 s after each kill (goal 0),
  and for Codex also its app-server daemons (Codex's own, which run the hooks).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import ROOT
from bench.report import section_write
from tests.agents.harness import (
    SENDER,
    Agents,
    Repo,
    Server,
    Tmux,
    init_repo,
    is_claude,
    is_codex,
    kill,
    kill_marked,
    marked,
    start_idle_claude,
    start_idle_codex,
    wait_parked,
    waiters,
)
from tests.agents.standin import Request, StandIn
from tests.mcp import node_clients
from tests.servers import serving

OUTPUT = ROOT / "docs" / "benchmarks.md"
OUTPUT_JSON = ROOT / "docs" / "benchmarks-agents.json"
BEGIN, END = "<!-- agent wake: begin -->", "<!-- agent wake: end -->"
WAKES = int(os.environ.get("BENCH_AGENT_WAKES", "20"))
KILLS = int(os.environ.get("BENCH_AGENT_KILLS", "20"))
WAIT_MINUTES = float(os.environ.get("BENCH_AGENT_WAIT_MINUTES", "2"))
# After a kill: the 5 s the waiter is given, and a second of slack.
LEFT_AFTER_SECONDS = 6.0
WAKE_DEADLINE_SECONDS = 60

Starter = Callable[[Path, Agents, Repo, Tmux, int, StandIn], object]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _is_wake(request: Request) -> bool:
    return request.is_turn and "cross-project" in request.latest_user_text()


@contextmanager
def _session(work: Path, server: Server) -> Iterator[tuple[Agents, Repo, Tmux, StandIn]]:
    """A fresh HOME, repository, stand-in and tmux; everything killed after."""
    case = work / uuid.uuid4().hex[:8]
    home = case / "home"
    home.mkdir(parents=True)
    with StandIn() as standin:
        agents = Agents(run=uuid.uuid4().hex, home=home, standin=standin, server_url=server.url)
        agents.codex_home.mkdir()
        tmux = Tmux()
        try:
            yield agents, init_repo(agents, case), tmux, standin
        finally:
            tmux.kill()
            kill_marked(agents.run)


def _wake_latencies(work: Path, server: Server, client: Path, start: Starter) -> list[float]:
    seconds = []
    with _session(work, server) as (agents, repo, tmux, standin):
        start(client, agents, repo, tmux, server.port, standin)
        parked = wait_parked(agents, server.port)
        for _ in range(WAKES):
            mark = standin.mark()
            server.send(repo.project)
            sent = time.monotonic()
            woken = standin.wait(_is_wake, after=mark, timeout=WAKE_DEADLINE_SECONDS)
            assert woken is not None, "no wake within a minute"
            seconds.append(woken.at - sent)
            # The woken turn's Stop hook parks a new waiter (the old one ended, or is
            # superseded).
            parked = wait_parked(agents, server.port, besides=parked)
    return seconds


def _requests_per_minute(work: Path, server_log: Path, server: Server) -> float:
    with _session(work, server) as (agents, repo, _, _):
        session = f"bench-idle-{uuid.uuid4().hex[:8]}"
        hook_input = json.dumps({"session_id": session, "cwd": str(repo.path)})
        started = subprocess.run(
            ["ai-memory", "hook", "session-start"],
            input=hook_input,
            cwd=repo.path,
            env=agents.environment(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert started.returncode == 0
        before = server_log.read_text(errors="replace").count("/api/v1/sessions/wait")
        seconds = WAIT_MINUTES * 60
        subprocess.run(
            ["ai-memory", "hook", "wait", "--timeout", f"{seconds:g}"],
            input=hook_input,
            cwd=repo.path,
            env=agents.environment(),
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=False,
        )
        after = server_log.read_text(errors="replace").count("/api/v1/sessions/wait")
    return (after - before) / WAIT_MINUTES


def _leftovers(
    work: Path,
    server: Server,
    client: Path,
    start: Starter,
    is_client: Callable[[Any], bool],
) -> dict[str, int]:
    left = {"waiters": 0, "daemons": 0, "failed_starts": 0}
    for _ in range(KILLS):
        with _session(work, server) as (agents, repo, tmux, standin):
            try:
                start(client, agents, repo, tmux, server.port, standin)
            except AssertionError as failed:
                print(f"a session did not start: {failed}", file=sys.stderr)
                left["failed_starts"] += 1
                continue
            # What a person kills: the client in the window (for Codex, not its daemon).
            kill(
                process.pid
                for process in marked(agents.run)
                if is_client(process) and "app-server" not in process.arguments
            )
            time.sleep(LEFT_AFTER_SECONDS)  # the figure is what is left after this long
            left["waiters"] += len(waiters(agents.run))
            left["daemons"] += sum(
                1 for process in marked(agents.run) if "--managed-daemon" in process.arguments
            )
    return left


def _measure(work: Path) -> dict[str, Any]:
    claude = node_clients.claude_code_cli()
    codex = node_clients.codex_cli()
    results: dict[str, Any] = {}
    with serving(work / "server", database_prefix="bench_agents") as (port, _):
        server = Server(port)
        server.register(SENDER)
        for name, client, start in (
            ("Claude Code", claude, start_idle_claude),
            ("Codex", codex, start_idle_codex),
        ):
            wakes = _wake_latencies(work, server, client, start)
            results[name] = {
                "wake_p50_s": statistics.median(wakes),
                "wake_p99_s": _percentile(wakes, 0.99),
                "wakes": len(wakes),
            }
        results["hook_wait_requests_per_minute"] = _requests_per_minute(
            work, work / "server" / "server.log", server
        )
        results["Claude Code"]["left"] = _leftovers(
            work, server, claude, start_idle_claude, is_claude
        )
        results["Codex"]["left"] = _leftovers(work, server, codex, start_idle_codex, is_codex)
    return results


def _section(results: dict[str, Any]) -> str:
    lines = [
        BEGIN,
        "## Waking the agents",
        "",
        "`python -m bench.agent_wake`: the real Claude Code "
        f"({node_clients.CLAUDE_CODE_VERSION}) and Codex ({node_clients.CODEX_VERSION}) "
        "CLIs in tmux, with the hooks `ai-memory init` wrote, in front of the tests' model "
        "stand-in on loopback, and one `ai-memory serve` on SQLite. Wake latency: from a "
        "send's answer to the stand-in's receipt of the new model turn carrying the inbox "
        f"notice, over {WAKES} wakes of one idle session. Left: what {KILLS} sessions "
        f"leave {LEFT_AFTER_SECONDS:g} s after the client in their window is SIGKILLed "
        "once its hook is parked (for Codex, its launcher and TUI, not its app-server "
        "daemon).",
        "",
        "| client | wake p50 / p99 (s) | waiters left | Codex daemons left |",
        "|---|---|---|---|",
    ]
    for name in ("Claude Code", "Codex"):
        r = results[name]
        daemons = str(r["left"]["daemons"]) if name == "Codex" else "–"
        started = KILLS - r["left"].get("failed_starts", 0)
        lines.append(
            f"| {name} | {r['wake_p50_s']:.2f} / {r['wake_p99_s']:.2f} | "
            f"{r['left']['waiters']} of {started} | {daemons} |"
        )
    failed = sum(results[name]["left"].get("failed_starts", 0) for name in ("Claude Code", "Codex"))
    lines += [
        "",
        *(
            [
                f"{failed} of the sessions to kill did not start (the bench's tmux driving), "
                "and are left out."
            ]
            if failed
            else []
        ),
        *(
            [
                "Codex runs its hooks in its app-server daemon, which outlives the TUI: "
                "a waiter that watches the process that ran the hook stays with it."
            ]
            if results["Codex"]["left"]["waiters"]
            else []
        ),
        "",
        f"A waiting `hook wait` with no mail sends "
        f"{results['hook_wait_requests_per_minute']:.1f} requests a minute "
        f"(over {WAIT_MINUTES:g} minutes).",
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    """Measure and write; with ``BENCH_AGENT_REWRITE=1``, only rewrite the section from
    the last run's JSON."""
    if os.environ.get("BENCH_AGENT_REWRITE") == "1":
        results = json.loads(OUTPUT_JSON.read_text())
    else:
        with tempfile.TemporaryDirectory(prefix="bench-agents-") as work:
            results = _measure(Path(work))
        OUTPUT_JSON.write_text(json.dumps(results, indent=2) + "\n")
    section = _section(results)
    section_write(OUTPUT, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
