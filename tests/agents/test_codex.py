"""The real Codex CLI, with the hooks ``ai-memory init`` wrote, against the model stand-in
and a live server (docs/agents.md#codex-woken-by-mail).

- An idle interactive session (under tmux) is woken through ``codex queue``: the stand-in
  sees a new turn of that session carrying the inbox notice.
- A killed Codex leaves no waiter behind after 5 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from messaging.notices import inbox_notice
from tests.agents.harness import (
    START_SECONDS,
    Agents,
    Repo,
    Server,
    Tmux,
    codex_thread,
    is_codex,
    kill_then_no_waiter,
    marked,
    start_idle_codex,
)
from tests.agents.standin import StandIn

pytestmark = [pytest.mark.slow, pytest.mark.agents]


def test_mail_wakes_an_idle_interactive_session_through_codex_queue(
    codex: Path,
    agents: Agents,
    repo: Repo,
    tmux: Tmux,
    server: Server,
    standin: StandIn,
) -> None:
    thread = start_idle_codex(codex, agents, repo, tmux, server.port, standin)
    mark = standin.mark()

    server.send(repo.project)

    expected = inbox_notice(count=1, workspace="default", project=repo.project)
    woken = standin.wait_for(expected, after=mark, timeout=START_SECONDS)
    assert woken is not None, tmux.screen("codex")
    assert codex_thread(woken) == thread
    assert expected in woken.latest_user_text()


def test_a_killed_codex_leaves_no_waiter_after_5_seconds(
    codex: Path,
    agents: Agents,
    repo: Repo,
    tmux: Tmux,
    server: Server,
    standin: StandIn,
) -> None:
    start_idle_codex(codex, agents, repo, tmux, server.port, standin)

    # Every process of the client: its launcher, its TUI and the app-server daemon that
    # ran the hooks (and would outlive the TUI).
    clients = [process.pid for process in marked(agents.run) if is_codex(process)]
    kill_then_no_waiter(agents.run, clients)


@pytest.mark.xfail(
    strict=True,
    reason="Codex's hooks run in its app-server daemon, which outlives the TUI; the waiter "
    "watches the daemon, so it outlives a killed TUI (and its next codex queue runs a turn "
    "in the daemon with no one watching)",
)
def test_a_killed_codex_tui_leaves_no_waiter_after_5_seconds(
    codex: Path,
    agents: Agents,
    repo: Repo,
    tmux: Tmux,
    server: Server,
    standin: StandIn,
) -> None:
    start_idle_codex(codex, agents, repo, tmux, server.port, standin)

    # What a person kills: the window's Codex (launcher and TUI), not the daemon.
    clients = [
        process.pid
        for process in marked(agents.run)
        if is_codex(process) and "app-server" not in process.arguments
    ]
    kill_then_no_waiter(agents.run, clients)
