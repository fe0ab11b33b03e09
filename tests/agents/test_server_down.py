"""``ai-memory hook wait`` for a session that started while the server was down: once the
server is up, the next mail wakes it (docs/agents.md#woken-by-mail: a session the server does not
know is registered as a ``resume`` start, then waited on). The server comes back with its
data (the project known, the session not), or with its data reset (neither known)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from messaging.notices import inbox_notice
from tests.agents.harness import (
    COMMAND_TIMEOUT_SECONDS,
    SENDER,
    Agents,
    Repo,
    Server,
    connected_to,
    init_repo,
    kill_marked,
    wait_until,
)
from tests.agents.standin import StandIn
from tests.servers import free_port, serving, spawn_database_url

pytestmark = [pytest.mark.slow, pytest.mark.agents]

# Not what the test claims: the hook backs off (up to 60 s) while the server is away.
PARKED_WITHIN_SECONDS = 120
DATABASE_PREFIX = "aimemory_agents"


def registered(server_log: Path) -> bool:
    """Whether the server's access log shows a session start answered (the hook's own:
    the restarted server has had no other)."""
    text = server_log.read_text(errors="replace") if server_log.exists() else ""
    return re.search(r'"POST /api/v1/sessions HTTP/1\.1" 20[01] ', text) is not None


def start_hook_wait(repo: Repo, agents: Agents) -> subprocess.Popen[str]:
    """Claude Code's Stop hook for a session that has just started (no server answered
    its session start)."""
    hook_input = {
        "session_id": "started-while-down",
        "cwd": str(repo.path),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    waiting = subprocess.Popen(
        ["ai-memory", "hook", "wait", "--timeout", "600"],
        cwd=repo.path,
        env=agents.environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiting.stdin is not None
    waiting.stdin.write(json.dumps(hook_input))
    waiting.stdin.close()
    waiting.stdin = None  # given: communicate() must not flush it again
    return waiting


@pytest.mark.parametrize("data", ["kept", "reset"])
def test_a_session_started_while_the_server_was_down_is_woken_by_the_next_mail(
    tmp_path: Path, data: str
) -> None:
    port = free_port()
    server = Server(port)
    with StandIn() as standin, spawn_database_url(DATABASE_PREFIX) as database_url:
        agents = Agents(run=f"down-{port}", home=tmp_path / "home", standin=standin,
                        server_url=server.url)  # fmt: skip
        agents.home.mkdir()
        agents.codex_home.mkdir()
        data_dir = tmp_path / "server"
        if data == "kept":
            # The project was set up while the server ran; then the server went away.
            with serving(data_dir, database_prefix=DATABASE_PREFIX, database_url=database_url,
                         port=port):  # fmt: skip
                repo = init_repo(agents, tmp_path)
                server.register(SENDER)
        else:
            repo = init_repo(agents, tmp_path)  # its registration fails: nothing listens
        waiting = start_hook_wait(repo, agents)
        try:
            restarted_dir = data_dir if data == "kept" else tmp_path / "fresh-server"
            with serving(
                restarted_dir,
                database_prefix=DATABASE_PREFIX,
                database_url=database_url if data == "kept" else None,
                port=port,
            ):
                log = restarted_dir / "server.log"

                def parked() -> bool:
                    ended = waiting.poll()
                    assert ended is None, f"hook wait ended ({ended}): {waiting.communicate()}"
                    return registered(log) and connected_to(waiting.pid, port)

                wait_until(
                    parked,
                    "hook wait registered the session and parked once the server came up",
                    PARKED_WITHIN_SECONDS,
                    pause=0.2,
                )
                if data == "reset":
                    server.register(SENDER)
                server.send(repo.project)
                stdout, stderr = waiting.communicate(timeout=COMMAND_TIMEOUT_SECONDS)
        finally:
            waiting.kill()
            waiting.wait()
            kill_marked(agents.run)

    notice = inbox_notice(count=1, workspace="default", project=repo.project)
    assert (waiting.returncode, stdout, stderr) == (2, "", notice + "\n")
