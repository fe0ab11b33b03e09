"""The real Claude Code CLI, with the hooks ``ai-memory init`` wrote, against the model
stand-in and a live server (docs/agents.md#woken-by-mail).

- An idle interactive session (under tmux) starts a new model turn carrying the inbox
  notice within 3 s of a send from another project.
- ``claude -p`` ends within 5 s of its answer: the Stop hook does not hold it open.
- A killed Claude Code leaves no ``hook wait`` behind after 5 s.
- The SessionStart hook tells the first turn of waiting mail.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from messaging.notices import inbox_notice
from tests.agents.harness import (
    COMMAND_TIMEOUT_SECONDS,
    START_SECONDS,
    Agents,
    Repo,
    Server,
    Tmux,
    is_claude,
    kill_then_no_waiter,
    marked,
    start_idle_claude,
    waiters,
)
from tests.agents.standin import StandIn

pytestmark = [pytest.mark.slow, pytest.mark.agents]

WAKE_WITHIN_SECONDS = 3.0
PRINT_MODE_ENDS_WITHIN_SECONDS = 5.0


def notice(repo: Repo) -> str:
    return inbox_notice(count=1, workspace="default", project=repo.project)


def test_mail_wakes_an_idle_interactive_session_within_3_seconds(
    claude: Path,
    agents: Agents,
    repo: Repo,
    tmux: Tmux,
    server: Server,
    standin: StandIn,
) -> None:
    start_idle_claude(claude, agents, repo, tmux, server.port, standin)
    mark = standin.mark()

    sent = time.monotonic()
    server.send(repo.project)

    woken = standin.wait_for(notice(repo), after=mark, timeout=START_SECONDS)
    assert woken is not None, tmux.screen("claude")
    assert woken.at - sent <= WAKE_WITHIN_SECONDS
    # A new model turn: the notice is the newest input of the conversation.
    assert notice(repo) in woken.latest_user_text()


def test_print_mode_ends_within_5_seconds_of_its_answer(
    claude: Path, agents: Agents, repo: Repo, standin: StandIn
) -> None:
    process = subprocess.Popen(
        [str(claude), "-p", "hello from print mode"],
        cwd=repo.path,
        env=agents.environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        answered = standin.wait_for("hello from print mode", timeout=START_SECONDS)
        assert answered is not None
        stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT_SECONDS)
        ended = time.monotonic()
    finally:
        process.kill()
        process.wait()

    assert (process.returncode, stdout.strip()) == (0, standin.reply), stderr
    assert ended - answered.at <= PRINT_MODE_ENDS_WITHIN_SECONDS
    # One turn: no hook woke it again.
    assert len(standin.turns()) == 1
    assert waiters(agents.run) == []


def test_a_killed_claude_code_leaves_no_waiter_after_5_seconds(
    claude: Path,
    agents: Agents,
    repo: Repo,
    tmux: Tmux,
    server: Server,
    standin: StandIn,
) -> None:
    start_idle_claude(claude, agents, repo, tmux, server.port, standin)

    clients = [process.pid for process in marked(agents.run) if is_claude(process)]
    kill_then_no_waiter(agents.run, clients)


def test_the_session_start_hook_init_wrote_tells_the_model_of_waiting_mail(
    claude: Path, agents: Agents, repo: Repo, server: Server, standin: StandIn
) -> None:
    """(tests/cli/test_init.py proves the files parse; this, that Claude Code runs them.)"""
    server.send(repo.project)

    printed = subprocess.run(
        [str(claude), "-p", "hello"],
        cwd=repo.path,
        env=agents.environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )

    assert printed.returncode == 0, printed.stderr
    [turn] = standin.turns()
    assert turn.contains(notice(repo))
